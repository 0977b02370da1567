"""The rules about teams and their queues (Kueue, and its Workloads through kube-state-metrics): recording rules
and alerts, spliced into observability/rules.py in their place."""

from __future__ import annotations

from observability.rule_base import KSM, LEADER, Alert, Record
from observability.thresholds import AlertThresholds

# Kueue's eviction reasons that mean a fault (kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go:630-645,
# apis/kueue/v1beta2/workload_types.go:1090-1108); Preempted, the Stopped ones and Deactivated are by design.
EVICTION_FAULTS = "PodsReadyTimeout|AdmissionCheck|NodeFailures"
WL = "openpod_kueue_workload"   # kube-state-metrics custom resource state (platform_constructs/exporters.py)
# A LocalQueue's oldest pending workload's wait; joined to the LocalQueue's ClusterQueue (openpod_kueue_localqueue_info,
# spec.clusterQueue, immutable) so it groups with, and is silenced by, that ClusterQueue's alerts; without the
# LocalQueue's series (a Workload naming a LocalQueue that does not exist) it keeps its alert, without cluster_queue.
_WAIT = "(time() - min by (namespace, local_queue) (openpod:kueue_workload_pending_since:seconds))"
_CREATED = f"max by (namespace, local_queue, workload) ({WL}_created_timestamp_seconds{{{KSM}}})"
_REQUEUED = (f"max by (namespace, local_queue, workload) "
             f'({WL}_condition_transition_timestamp_seconds{{{KSM}, type="QuotaReserved"}})')
_USAGE = "sum by (cluster_queue, flavor, resource) (kueue_cluster_queue_resource_usage{%s})" % LEADER
_NOMINAL = "sum by (cluster_queue, flavor, resource) (kueue_cluster_queue_nominal_quota{%s})" % LEADER
_AT_QUOTA = f"({_USAGE} >= {_NOMINAL}) and ({_NOMINAL} > 0)"   # a team using all of some resource's quota


def queue_records() -> list[Record]:
    return [
        Record("openpod:team_pending_workloads:sum",
               f"sum by (cluster_queue, status) (kueue_pending_workloads{{{LEADER}}})",
               "pending workloads per team queue (cluster_queue is the team) and status"),
        Record("openpod:team_pending_workloads_all:sum",
               f"sum by (cluster_queue) (kueue_pending_workloads{{{LEADER}}})",
               "pending workloads per team queue, active and inadmissible together"),
        Record("openpod:team_admission_wait_seconds:p90_1h",
               "histogram_quantile(0.9, sum by (cluster_queue, le) "
               f"(rate(kueue_admission_wait_time_seconds_bucket{{{LEADER}}}[1h])))",
               "90th percentile of the time team workloads waited for admission, last hour"),
        Record("openpod:team_borrowed:sum",
               "sum by (cluster_queue, resource) (clamp_min("
               f"kueue_cluster_queue_resource_usage{{{LEADER}}} - kueue_cluster_queue_nominal_quota{{{LEADER}}}, 0))",
               "resources a team uses beyond its nominal quota (borrowed from its cohort)"),
        Record("openpod:kueue_workload_pending_since:seconds",
               f"(({_CREATED} >= {_REQUEUED}) or {_REQUEUED} or {_CREATED}) "
               f"unless on (namespace, workload) ({WL}_condition{{{KSM}, type=~\"QuotaReserved|Finished\"}} == 1)",
               "when each Kueue Workload still waiting for quota began to wait: its creation, or the last change of "
               "its QuotaReserved condition (an evicted, requeued workload waits again from then)"),
    ]


def queue_alerts(t: AlertThresholds) -> list[Alert]:
    return [
        Alert("OpenpodTeamQueueStalled",
              f'openpod:team_pending_workloads:sum{{status="active"}} > 0 unless on (cluster_queue) '
              f"(sum by (cluster_queue) (increase(kueue_admitted_workloads_total{{{LEADER}}}"
              f"[{t.queue_stalled_minutes}m])) > 0) unless on (cluster_queue) "
              f"(sum by (cluster_queue) (kueue_admitted_active_workloads{{{LEADER}}}) > 0) unless on (cluster_queue) "
              f"(max by (cluster_queue) ({_AT_QUOTA}))", "5m", "warning",
              "Team {{ $labels.cluster_queue }}: workloads pending, none admitted for "
              f"{t.queue_stalled_minutes} minutes",
              "The team's ClusterQueue has admissible workloads waiting, admitted none in the window, runs "
              "nothing and is below its quota: admission itself is stuck (a busy team at quota is not stalled).",
              "`kubectl get workloads -n <team>`: quota used by running jobs is normal; otherwise check "
              "the cohort's lending, node groups at max size, and Kueue's logs.", ("cluster_queue", "status")),
        Alert("OpenpodClusterQueueInactive",
              f'max by (cluster_queue) (kueue_cluster_queue_status{{{LEADER}, status="active"}}) == 0 '
              f"and on (cluster_queue) openpod:team_pending_workloads_all:sum > 0",
              f"{t.queue_inactive_minutes}m", "warning",
              "Team {{ $labels.cluster_queue }}: its ClusterQueue is not active and has workloads waiting",
              "Kueue reports the ClusterQueue pending or terminating (a flavor or admission check it names is "
              "missing, it is stopped): nothing of the team is admitted, whatever quota is free.",
              "`kubectl get clusterqueue {{ $labels.cluster_queue }} -o yaml`: the Active condition's reason "
              "(FlavorNotFound, AdmissionCheckNotFound, Stopped); fix the spec (`openpod queues`) or its "
              "ResourceFlavor.", ("cluster_queue",)),
        Alert("OpenpodTeamStarvedUnderQuota",
              f"(sum by (cohort, cluster_queue, resource) (kueue_cluster_queue_nominal_quota{{{LEADER}}}) "
              f"- sum by (cohort, cluster_queue, resource) (kueue_cluster_queue_resource_usage{{{LEADER}}}) > 0) "
              f"and on (cluster_queue) (openpod:team_pending_workloads_all:sum > 0) "
              f"and on (cohort, resource) (sum by (cohort, resource) (clamp_min("
              f"kueue_cluster_queue_resource_usage{{{LEADER}}} - kueue_cluster_queue_nominal_quota{{{LEADER}}}, 0))"
              f" > 0)", f"{t.reclaim_minutes}m", "warning",
              "Team {{ $labels.cluster_queue }}: {{ $value }} {{ $labels.resource }} of its quota unused while "
              "workloads wait and another team borrows",
              f"For {t.reclaim_minutes} minutes the team has had workloads pending below its nominal quota while "
              "another ClusterQueue of its cohort used more than its own: the lent quota is not coming back "
              "(no reclaimWithinCohort preemption, or the borrower's workloads cannot be preempted).",
              "`kubectl get clusterqueues` (usage, borrowing) and the pending workload's QuotaReserved message; "
              "check the team's preemption settings (reclaimWithinCohort) in the spec's queueing section, or "
              "preempt the borrower's workload by hand.", ("cohort", "cluster_queue", "resource")),
        Alert("OpenpodWorkloadsEvictedRepeatedly",
              f"sum by (cluster_queue, reason) (increase(kueue_evicted_workloads_total{{{LEADER}, "
              f'reason=~"{EVICTION_FAULTS}"}}[1h])) >= {t.evictions_per_hour}', "0m", "warning",
              "Team {{ $labels.cluster_queue }}: workloads evicted {{ printf \"%.0f\" $value }} times in an hour "
              "({{ $labels.reason }})",
              "Kueue keeps evicting the team's admitted workloads for a fault, not by design: pods not ready in "
              "time (image pulls, unschedulable pods, bad nodes), a failed admission check, failed nodes under "
              "topology-aware scheduling. Each eviction requeues the workload, which is admitted and evicted "
              "again. Preemption, stopped queues and deactivation are left out.",
              "`kubectl get events -n <team> --field-selector reason=Evicted` and `kubectl describe workload` of "
              "the evicted ones: the Evicted condition's message names the cause; for PodsReadyTimeout, the "
              "pods' events (image pull, scheduling) or the nodes they landed on.", ("cluster_queue", "reason")),
        Alert("OpenpodWorkloadStarving",
              f"({_WAIT} * on (namespace, local_queue) group_left (cluster_queue) max by (namespace, local_queue, "
              f"cluster_queue) (openpod_kueue_localqueue_info{{{KSM}}}) or on (namespace, local_queue) {_WAIT}) "
              f"> {t.starvation_minutes * 60}", "5m", "warning",
              "Queue {{ $labels.namespace }}/{{ $labels.local_queue }}: its oldest workload has waited "
              "{{ $value | humanizeDuration }} for quota",
              f"A workload of this LocalQueue has had no quota reserved for over {t.starvation_minutes} minutes, "
              "whether or not others were admitted meanwhile (a large job starved by smaller ones, or no room).",
              "`kubectl get workloads -n {{ $labels.namespace }}` and `kubectl describe workload` of the oldest: "
              "its QuotaReserved message says what is missing; consider its priority, the queueing strategy "
              "(StrictFIFO), the cohort's borrowing, or a quota change.", ("namespace", "local_queue", "cluster_queue")),
        Alert("OpenpodTeamQueueStarving",
              f"(sum by (cluster_queue) (kueue_pending_workloads{{{LEADER}}} offset {t.starvation_minutes}m) "
              f"- sum by (cluster_queue) (increase(kueue_admitted_workloads_total{{{LEADER}}}"
              f"[{t.starvation_minutes}m])) >= 1) "
              f"and on (cluster_queue) (min_over_time(openpod:team_pending_workloads_all:sum"
              f"[{t.starvation_minutes}m:5m]) > 0) "
              f"unless on () (count({WL}_created_timestamp_seconds{{{KSM}}}) > 0)", "5m", "warning",
              "Team {{ $labels.cluster_queue }}: a workload has waited over "
              f"{t.starvation_minutes} minutes",
              f"More workloads were pending {t.starvation_minutes} minutes ago than the queue has admitted since, "
              "and it never emptied: at least one has waited that long (Kueue's counts alone; it misses a large "
              "workload passed by many small ones, which OpenpodWorkloadStarving catches from the Workloads "
              "themselves, and stays off when that data is there).",
              "`kubectl get workloads -A` for the team's LocalQueues, oldest first; `kubectl describe workload` "
              "says what it waits for (quota, flavor, topology); then as OpenpodWorkloadStarving.",
              ("cluster_queue",)),
        Alert("OpenpodWorkloadsInadmissible",
              'openpod:team_pending_workloads:sum{status="inadmissible"} > 0',
              f"{t.inadmissible_minutes}m", "info",
              "Team {{ $labels.cluster_queue }}: {{ $value }} workloads Kueue cannot admit",
              "Kueue found no flavor/quota that fits these workloads; they wait until the queue changes.",
              "`kubectl describe workload` shows why (request above quota, missing flavor, topology); tell the "
              "team to resize the job or the platform team to change the quota.", ("cluster_queue", "status")),
    ]
