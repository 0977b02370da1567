"""Every metric family Kueue v0.19.2 registers (kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go, the
``Name:`` line of each; ``Register`` at 1452-1501, ``RegisterLQMetrics`` at 1503-1524), with the platform's use."""

from __future__ import annotations

from observability.engine_metrics.model import EngineMetric

ENGINE = "Kueue v0.19.2"
GO = "kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go"
QUEUES = "infra/governance/queues.py"

_LQ = ("the LocalQueue copy of a ClusterQueue family (LocalQueueMetrics gate, on by default since 0.17: "
       "pkg/features/kube_features.go:687-689); a team is one ClusterQueue, which the rules read")
_NO_CHECKS = f"no AdmissionChecks are configured ({QUEUES}): it equals the admitted family the rules read"
_GATED = ("served only with the UnadmittedWorkloadsObservability gate, off by default "
          "(kube_features.go:899-900); the platform turns on TopologyAwareScheduling only")
_ONE_COHORT = f"the platform has one flat Cohort ({QUEUES}): the subtree sums equal the ClusterQueue families read"
_MULTI = "MultiKueue is not used (integrations: batch/job and JobSet on one cluster, infra/governance/install.py)"
_READY = ("time to pods ready; a gang not ready within waitForPodsReady.timeout is evicted as PodsReadyTimeout, "
          "which OpenpodWorkloadsEvictedRepeatedly counts")
_DONE = "finished workloads are the teams' outcome, not a platform fault"

_PENDING = ("OpenpodClusterQueueInactive", "OpenpodTeamQueueStalled", "OpenpodTeamQueueStarving",
            "OpenpodTeamStarvedUnderQuota", "OpenpodWorkloadsInadmissible")
_QUOTA = ("OpenpodTeamQueueStalled", "OpenpodTeamStarvedUnderQuota")


def _k(name: str, typ: str, line: int, alerts: tuple[str, ...] = (), dashboard: bool = False,
       unused: str = "") -> EngineMetric:
    return EngineMetric(ENGINE, name, typ, f"{GO}:{line}", alerts, dashboard, unused)


ROWS: tuple[EngineMetric, ...] = (
    _k("kueue_admission_attempts_total", "counter", 354,
       unused="counts scheduling cycles, not workloads: a stuck queue shows as pending without admissions "
       "(OpenpodTeamQueueStalled)"),
    _k("kueue_admission_attempt_duration_seconds", "histogram", 366,
       unused="the scheduler's cycle latency; slow admission shows as workloads waiting (OpenpodWorkloadStarving)"),
    _k("multikueue_workloads_dispatched_total", "counter", 377, unused=_MULTI),
    _k("multikueue_workloads_admitted_total", "counter", 385, unused=_MULTI),
    _k("kueue_admission_cycle_preemption_skips", "gauge", 393,
       unused="per-cycle contention between ClusterQueues; the starvation it causes is alerted "
       "(OpenpodWorkloadStarving, OpenpodTeamStarvedUnderQuota)"),
    _k("kueue_build_info", "gauge", 403, unused="version labels only; the chart version pins the image"),
    _k("kueue_pending_workloads", "gauge", 414, _PENDING, True),
    _k("kueue_local_queue_pending_workloads", "gauge", 426, unused=_LQ),
    _k("kueue_finished_workloads", "gauge", 438, unused=_DONE),
    _k("kueue_local_queue_finished_workloads", "gauge", 447, unused=_LQ),
    _k("kueue_quota_reserved_workloads_total", "counter", 456, unused=_NO_CHECKS),
    _k("kueue_local_queue_quota_reserved_workloads_total", "counter", 464, unused=_LQ),
    _k("kueue_finished_workloads_total", "counter", 472, unused=_DONE),
    _k("kueue_local_queue_finished_workloads_total", "counter", 480, unused=_LQ),
    _k("kueue_quota_reserved_wait_time_seconds", "histogram", 488, unused=_NO_CHECKS),
    _k("kueue_pods_ready_to_evicted_time_seconds", "histogram", 497,
       unused="how long an evicted workload ran; the evictions are counted (OpenpodWorkloadsEvictedRepeatedly)"),
    _k("kueue_local_queue_quota_reserved_wait_time_seconds", "histogram", 519, unused=_LQ),
    _k("kueue_admitted_workloads_total", "counter", 528, ("OpenpodTeamQueueStalled", "OpenpodTeamQueueStarving"),
       True),
    _k("kueue_local_queue_admitted_workloads_total", "counter", 536, unused=_LQ),
    _k("kueue_admission_wait_time_seconds", "histogram", 544, dashboard=True),
    _k("kueue_ready_wait_time_seconds", "histogram", 553, unused=_READY),
    _k("kueue_admitted_until_ready_wait_time_seconds", "histogram", 562, unused=_READY),
    _k("kueue_local_queue_admission_wait_time_seconds", "histogram", 571, unused=_LQ),
    _k("kueue_admission_checks_wait_time_seconds", "histogram", 580,
       unused=f"no AdmissionChecks are configured ({QUEUES}): always empty"),
    _k("kueue_local_queue_admission_checks_wait_time_seconds", "histogram", 589, unused=_LQ),
    _k("kueue_local_queue_ready_wait_time_seconds", "histogram", 598, unused=_LQ),
    _k("kueue_local_queue_admitted_until_ready_wait_time_seconds", "histogram", 607, unused=_LQ),
    _k("kueue_workload_creation_latency_seconds", "histogram", 616,
       unused="Kueue's job-to-Workload latency (MetricForWorkloadCreationLatency, on); a job never given a "
       "Workload is pending nowhere, and no Kueue metric shows it"),
    _k("kueue_pod_scheduling_gate_removal_seconds", "histogram", 625,
       unused="topology gate removal latency; gates never removed leave pods unready, evicted as PodsReadyTimeout"),
    _k("kueue_evicted_workloads_total", "counter", 633, ("OpenpodWorkloadsEvictedRepeatedly",), True),
    _k("kueue_replaced_workload_slices_total", "counter", 654,
       unused="declared but never registered (Register, metrics.go:1452-1501, omits it): not served"),
    _k("kueue_local_queue_evicted_workloads_total", "counter", 662, unused=_LQ),
    _k("kueue_evicted_workloads_once_total", "counter", 683,
       unused="first evictions only; the rules count every eviction (kueue_evicted_workloads_total)"),
    _k("kueue_preempted_workloads_total", "counter", 706, dashboard=True),
    _k("kueue_workload_eviction_latency_seconds", "histogram", 719,
       unused="eviction to quota released; a slow release shows as the team starved (OpenpodTeamStarvedUnderQuota)"),
    _k("kueue_reserving_active_workloads", "gauge", 739, unused=_NO_CHECKS),
    _k("kueue_local_queue_reserving_active_workloads", "gauge", 748, unused=_LQ),
    _k("kueue_admitted_active_workloads", "gauge", 757, ("OpenpodTeamQueueStalled",), True),
    _k("kueue_local_queue_admitted_active_workloads", "gauge", 766, unused=_LQ),
    _k("kueue_cluster_queue_status", "gauge", 775, ("OpenpodClusterQueueInactive",), True),
    _k("kueue_local_queue_status", "gauge", 785, unused=_LQ),
    _k("kueue_unadmitted_workloads", "gauge", 795, unused=_GATED),
    _k("kueue_local_queue_unadmitted_workloads", "gauge", 804, unused=_GATED),
    _k("kueue_cluster_queue_resource_reservation", "gauge", 813, unused=_NO_CHECKS),
    _k("kueue_cluster_queue_resource_pending", "gauge", 822,
       unused="resources pending workloads request; the workloads are counted (kueue_pending_workloads)"),
    _k("kueue_cluster_queue_resource_usage", "gauge", 831, _QUOTA, True),
    _k("kueue_local_queue_resource_reservation", "gauge", 840, unused=_LQ),
    _k("kueue_local_queue_resource_usage", "gauge", 849, unused=_LQ),
    _k("kueue_local_queue_admission_fair_sharing_usage", "gauge", 858,
       unused="admission fair sharing within a ClusterQueue is not configured (one LocalQueue per team)"),
    _k("kueue_cluster_queue_nominal_quota", "gauge", 869, _QUOTA, True),
    _k("kueue_cluster_queue_borrowing_limit", "gauge", 878,
       unused=f"the spec's own limit ({QUEUES}); lent quota not returned is alerted from usage and nominal quota"),
    _k("kueue_cluster_queue_lending_limit", "gauge", 887,
       unused=f"the spec's own limit ({QUEUES}); lent quota not returned is alerted from usage and nominal quota"),
    _k("kueue_cluster_queue_weighted_share", "gauge", 896,
       unused="fair sharing's ordering value; its outcome (a team starved) is alerted from usage and quota"),
    _k("kueue_cohort_weighted_share", "gauge", 909, unused=_ONE_COHORT),
    _k("kueue_cohort_subtree_quota", "gauge", 922, unused=_ONE_COHORT),
    _k("kueue_cohort_subtree_admitted_workloads_total", "counter", 931, unused=_ONE_COHORT),
    _k("kueue_cohort_subtree_resource_reservations", "gauge", 939, unused=_ONE_COHORT),
    _k("kueue_cohort_subtree_admitted_active_workloads", "gauge", 949, unused=_ONE_COHORT),
    _k("kueue_cohort_info", "gauge", 958, unused=_ONE_COHORT),
    _k("kueue_cluster_queue_info", "gauge", 966, unused=_ONE_COHORT),
)
