"""The kube-state-metrics 2.20.0 families of the stores the rules read (node; deployment and daemonset, the
platform's own workloads), of the pods and of the statefulsets (kubernetes/kube-state-metrics@v2.20.0:
internal/store/node.go, pod.go, deployment.go, daemonset.go, statefulset.go, the name line of each family
generator: nodeMetricFamilies at node.go:45-61, podMetricFamilies at pod.go:44-107, deploymentMetricFamilies at
deployment.go:61, daemonSetMetricFamilies at daemonset.go:42, statefulSetMetricFamilies at statefulset.go:43), and
the Kueue Workload families our custom resource state configuration adds (platform_constructs/exporters.py
KUEUE_WORKLOAD_STATE). The rules read the workload stores in the platform's namespaces only
(observability/platform_rules.py PLATFORM_NAMESPACES): a team's Deployment is the team's."""

from __future__ import annotations

from observability.engine_metrics.model import EngineMetric

ENGINE = "kube-state-metrics 2.20.0"
STORE = "kubernetes/kube-state-metrics@v2.20.0:internal/store"
OURS = "platform_constructs/exporters.py (KUEUE_WORKLOAD_STATE)"

_ALLOW = ("empty unless allow-listed (--metric-labels-allowlist, --metric-annotations-allowlist); the platform's "
          "chart values set none (platform_constructs/exporters.py)")
_TIMES = "a timestamp of the object's life; the failures it would date are alerted from state"
_SPEC = "the pod's spec or identity, no state an alert needs"
_OPTIN = "opt-in (NewOptInFamilyGenerator, --metric-opt-in-list); not enabled"
_REQUESTS = "requests are Kueue's quota, read as kueue_cluster_queue_resource_usage"
_STATE = ("pod state; a platform pod that does not run shows as its Deployment or DaemonSet short of pods "
          "(OpenpodPlatformDeploymentUnavailable, OpenpodPlatformDaemonSetUnavailable), a training pod's restarts "
          "as its incarnations (OpenpodJobCrashLooping)")
_OBJ = "the object's spec or identity, no state an alert needs"
_COUNTS = "a count the alert's available-against-desired comparison sums up (it reads those two)"
_GENERATION = "a rollout that does not progress is read from its outcome (pods unavailable, the Progressing condition)"
_NO_STS = ("the platform runs no StatefulSet: its workloads are Deployments (Kueue, JobSet, kube-state-metrics, the "
           "remediation controller) and DaemonSets (node agent, exporters, device plugins)")
_DEPLOYMENT = ("OpenpodPlatformDeploymentUnavailable",)
_DAEMONSET = ("OpenpodPlatformDaemonSetUnavailable",)
_SCHED = ("an admitted gang whose pods cannot be placed is evicted after waitForPodsReady.timeout "
          "(PodsReadyTimeout: OpenpodWorkloadsEvictedRepeatedly)")
_DISRUPT = "why a pod was deleted (preemption, taint manager, eviction): its job's restart is counted instead"
_CONDITION = ("OpenpodManyNodesNotReady", "OpenpodNodeNotReady", "OpenpodNodeReadyFlapping")


def _n(name: str, line: int, alerts: tuple[str, ...] = (), dashboard: bool = False, unused: str = "") -> EngineMetric:
    return EngineMetric(ENGINE, name, "gauge", f"{STORE}/node.go:{line}", alerts, dashboard, unused)


def _p(name: str, typ: str, line: int, unused: str) -> EngineMetric:
    return EngineMetric(ENGINE, name, typ, f"{STORE}/pod.go:{line}", unused=unused)


def _crs(name: str, alerts: tuple[str, ...]) -> EngineMetric:
    return EngineMetric(ENGINE, name, "gauge", OURS, alerts, True)


NODE: tuple[EngineMetric, ...] = (
    _n("kube_node_deletion_timestamp", 65, unused="a node being deleted (replacement, scale-in) is expected; "
       "its pods' loss shows in their jobs' alerts"),
    _n("kube_node_created", 88, unused=_TIMES),
    _n("kube_node_status_addresses", 112, unused="addresses, no state"),
    _n("kube_node_info", 135, unused="versions as labels (kernel, kubelet, runtime), no state"),
    _n("kube_node_annotations", 187, unused=_ALLOW),
    _n("kube_node_labels", 212, unused=_ALLOW),
    _n("kube_node_role", 237, unused="node-role.kubernetes.io/* labels; the platform tells groups apart by its own "
       "openpod.io labels"),
    _n("kube_node_spec_pod_cidrs", 263, unused="the VPC CNI gives pods VPC addresses, not a node CIDR"),
    _n("kube_node_spec_taint", 291, unused="the platform's taints are the remediation's own acts, reported by its "
       "metrics (openpod_remediation_*, openpod_pair_check_held_nodes)"),
    _n("kube_node_spec_unschedulable", 319, unused="the platform's cordons are the remediation's own acts, "
       "reported by its metrics (openpod_remediations_in_flight, openpod_remediation_failed_nodes)"),
    _n("kube_node_status_allocatable", 338, ("OpenpodNodeAcceleratorsLost", "OpenpodScrapeJobAbsent"), True),
    _n("kube_node_status_capacity", 422, ("OpenpodNodeAcceleratorsLost", "OpenpodNodeAgentMissing"), True),
    _n("kube_node_status_condition", 509, _CONDITION, True),
)

POD: tuple[EngineMetric, ...] = (
    _p("kube_pod_completion_time", "gauge", 114, unused=_TIMES),
    _p("kube_pod_container_info", "gauge", 149, unused=_SPEC),
    _p("kube_pod_container_resource_limits", "gauge", 179, unused=_REQUESTS),
    _p("kube_pod_container_resource_requests", "gauge", 243, unused=_REQUESTS),
    _p("kube_pod_container_state_started", "gauge", 306, unused=_TIMES),
    _p("kube_pod_container_status_last_terminated_reason", "gauge", 339, unused=_STATE),
    _p("kube_pod_container_status_last_terminated_exitcode", "gauge", 365, unused=_STATE),
    _p("kube_pod_container_status_last_terminated_timestamp", "gauge", 391, unused=_TIMES),
    _p("kube_pod_container_status_ready", "gauge", 417, unused=_STATE),
    EngineMetric(ENGINE, "kube_pod_container_status_restarts_total", "counter", f"{STORE}/pod.go:441",
                 ("OpenpodPlatformPodCrashLooping",), True),
    _p("kube_pod_container_status_running", "gauge", 465, unused=_STATE),
    _p("kube_pod_container_status_terminated", "gauge", 490, unused=_STATE),
    _p("kube_pod_container_status_terminated_reason", "gauge", 515, unused=_STATE),
    _p("kube_pod_container_status_waiting", "gauge", 541, unused=_STATE),
    _p("kube_pod_container_status_waiting_reason", "gauge", 566, unused=_STATE),
    _p("kube_pod_created", "gauge", 592, unused=_TIMES),
    _p("kube_pod_deletion_timestamp", "gauge", 617, unused=_TIMES),
    EngineMetric(ENGINE, "kube_pod_info", "gauge", f"{STORE}/pod.go:642",   # node: pod.go:661-662
                 ("OpenpodPlatformPodCrashLooping",)),
    _p("kube_pod_resourceclaim_info", "gauge", 675, unused=_SPEC),
    _p("kube_pod_ips", "gauge", 731, unused=_SPEC),
    _p("kube_pod_init_container_info", "gauge", 769, unused=_SPEC),
    _p("kube_pod_init_container_resource_limits", "gauge", 805, unused=_REQUESTS),
    _p("kube_pod_init_container_resource_requests", "gauge", 869, unused=_REQUESTS),
    _p("kube_pod_init_container_status_last_terminated_reason", "gauge", 932, unused=_STATE),
    _p("kube_pod_init_container_status_ready", "gauge", 957, unused=_STATE),
    _p("kube_pod_init_container_status_restarts_total", "counter", 982, unused=_STATE),
    _p("kube_pod_init_container_status_running", "gauge", 1006, unused=_STATE),
    _p("kube_pod_init_container_status_terminated", "gauge", 1031, unused=_STATE),
    _p("kube_pod_init_container_status_terminated_reason", "gauge", 1056, unused=_STATE),
    _p("kube_pod_init_container_status_waiting", "gauge", 1082, unused=_STATE),
    _p("kube_pod_init_container_status_waiting_reason", "gauge", 1107, unused=_STATE),
    _p("kube_pod_init_container_state_started", "gauge", 1134, unused=_TIMES),
    _p("kube_pod_init_container_status_last_terminated_exitcode", "gauge", 1167, unused=_STATE),
    _p("kube_pod_init_container_status_last_terminated_timestamp", "gauge", 1193, unused=_TIMES),
    _p("kube_pod_annotations", "gauge", 1219, unused=_ALLOW),
    _p("kube_pod_labels", "gauge", 1243, unused=_ALLOW),
    _p("kube_pod_overhead_cpu_cores", "gauge", 1267, unused=_SPEC),
    _p("kube_pod_overhead_memory_bytes", "gauge", 1293, unused=_SPEC),
    _p("kube_pod_owner", "gauge", 1320, unused=_SPEC),
    _p("kube_pod_restart_policy", "gauge", 1368, unused=_SPEC),
    _p("kube_pod_runtimeclass_name_info", "gauge", 1389, unused=_SPEC),
    _p("kube_pod_spec_volumes_persistentvolumeclaims_info", "gauge", 1414, unused=_SPEC),
    _p("kube_pod_spec_volumes_persistentvolumeclaims_readonly", "gauge", 1447, unused=_SPEC),
    _p("kube_pod_start_time", "gauge", 1480, unused=_TIMES),
    _p("kube_pod_status_phase", "gauge", 1504, unused=_STATE),
    _p("kube_pod_status_initialized_time", "gauge", 1548, unused=_TIMES),
    _p("kube_pod_status_container_ready_time", "gauge", 1575, unused=_TIMES),
    _p("kube_pod_status_ready_time", "gauge", 1602, unused=_TIMES),
    _p("kube_pod_status_qos_class", "gauge", 1630, unused=_SPEC),
    _p("kube_pod_status_ready", "gauge", 1672, unused=_STATE),
    _p("kube_pod_status_reason", "gauge", 1701, unused=_STATE),
    _p("kube_pod_status_disruption_reason", "gauge", 1754, unused=_DISRUPT),
    _p("kube_pod_status_scheduled", "gauge", 1786, unused=_SCHED),
    _p("kube_pod_status_scheduled_time", "gauge", 1815, unused=_SCHED),
    _p("kube_pod_status_unschedulable", "gauge", 1842, unused=_SCHED),
    _p("kube_pod_status_unscheduled_time", "gauge", 1869, unused=_SCHED),
    _p("kube_pod_tolerations", "gauge", 1932, unused=_SPEC),
    _p("kube_pod_nodeselectors", "gauge", 1975, unused=_OPTIN),
    _p("kube_pod_service_account", "gauge", 1996, unused=_SPEC),
    _p("kube_pod_scheduler", "gauge", 2017, unused=_SPEC),
)

def _w(store: str, name: str, line: int, alerts: tuple[str, ...] = (), unused: str = "") -> EngineMetric:
    return EngineMetric(ENGINE, name, "gauge", f"{STORE}/{store}.go:{line}", alerts, bool(alerts), unused)


DEPLOYMENT: tuple[EngineMetric, ...] = (
    _w("deployment", "kube_deployment_owner", 64, unused=_OBJ),
    _w("deployment", "kube_deployment_created", 101, unused=_TIMES),
    _w("deployment", "kube_deployment_status_replicas", 121, unused=_COUNTS),
    _w("deployment", "kube_deployment_status_replicas_ready", 137, unused=_COUNTS),
    _w("deployment", "kube_deployment_status_replicas_available", 153, _DEPLOYMENT),
    _w("deployment", "kube_deployment_status_replicas_unavailable", 169, unused=_COUNTS),
    _w("deployment", "kube_deployment_status_replicas_updated", 185, unused=_GENERATION),
    _w("deployment", "kube_deployment_status_terminating_replicas", 201, unused=_COUNTS),
    _w("deployment", "kube_deployment_status_observed_generation", 221, unused=_GENERATION),
    _w("deployment", "kube_deployment_status_condition", 237, _DEPLOYMENT),
    _w("deployment", "kube_deployment_spec_replicas", 268, _DEPLOYMENT),
    _w("deployment", "kube_deployment_spec_paused", 288, unused="a paused rollout is an operator's act"),
    _w("deployment", "kube_deployment_spec_strategy_rollingupdate_max_unavailable", 304, unused=_OBJ),
    _w("deployment", "kube_deployment_spec_strategy_rollingupdate_max_surge", 333, unused=_OBJ),
    _w("deployment", "kube_deployment_metadata_generation", 360, unused=_GENERATION),
    _w("deployment", "kube_deployment_deletion_timestamp", 376, unused=_TIMES),
    _w("deployment", "kube_deployment_annotations", 396, unused=_ALLOW),
    _w("deployment", "kube_deployment_labels", 418, unused=_ALLOW),
)

DAEMONSET: tuple[EngineMetric, ...] = (
    _w("daemonset", "kube_daemonset_created", 45, unused=_TIMES),
    _w("daemonset", "kube_daemonset_status_current_number_scheduled", 67, _DAEMONSET),
    _w("daemonset", "kube_daemonset_status_desired_number_scheduled", 85, _DAEMONSET),
    _w("daemonset", "kube_daemonset_status_number_available", 103, _DAEMONSET),
    _w("daemonset", "kube_daemonset_status_number_misscheduled", 121,
       unused="pods left on nodes the DaemonSet no longer selects; they run, no fault"),
    _w("daemonset", "kube_daemonset_status_number_ready", 139,
       unused="ready pods; available (ready for minReadySeconds) is read"),
    _w("daemonset", "kube_daemonset_status_number_unavailable", 157, _DAEMONSET),
    _w("daemonset", "kube_daemonset_status_observed_generation", 175, unused=_GENERATION),
    _w("daemonset", "kube_daemonset_status_updated_number_scheduled", 193, _DAEMONSET),
    _w("daemonset", "kube_daemonset_metadata_generation", 209, unused=_GENERATION),
    _w("daemonset", "kube_daemonset_deletion_timestamp", 227, unused=_TIMES),
    _w("daemonset", "kube_daemonset_annotations", 247, unused=_ALLOW),
    _w("daemonset", "kube_daemonset_labels", 269, unused=_ALLOW),
)

STATEFULSET: tuple[EngineMetric, ...] = tuple(_w("statefulset", name, line, unused=_NO_STS) for name, line in (
    ("kube_statefulset_created", 46), ("kube_statefulset_status_replicas", 66),
    ("kube_statefulset_status_replicas_available", 82), ("kube_statefulset_status_replicas_current", 98),
    ("kube_statefulset_status_replicas_ready", 114), ("kube_statefulset_status_replicas_updated", 130),
    ("kube_statefulset_status_observed_generation", 146), ("kube_statefulset_replicas", 162),
    ("kube_statefulset_ordinals_start", 182), ("kube_statefulset_metadata_generation", 202),
    ("kube_statefulset_persistentvolumeclaim_retention_policy", 218), ("kube_statefulset_annotations", 245),
    ("kube_statefulset_labels", 267), ("kube_statefulset_status_current_revision", 289),
    ("kube_statefulset_status_update_revision", 307), ("kube_statefulset_deletion_timestamp", 325)))

CUSTOM_RESOURCE_STATE: tuple[EngineMetric, ...] = (
    _crs("openpod_kueue_workload_created_timestamp_seconds", ("OpenpodTeamQueueStarving", "OpenpodWorkloadStarving")),
    _crs("openpod_kueue_workload_condition", ("OpenpodWorkloadStarving",)),
    _crs("openpod_kueue_workload_condition_transition_timestamp_seconds", ("OpenpodWorkloadStarving",)),
    EngineMetric(ENGINE, "openpod_kueue_localqueue_info", "gauge", OURS, ("OpenpodWorkloadStarving",)),
)

ROWS = NODE + POD + DEPLOYMENT + DAEMONSET + STATEFULSET + CUSTOM_RESOURCE_STATE
