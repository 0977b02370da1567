"""The rules about the platform's own machinery: Kueue's and JobSet's controller managers (controller-runtime's
reconcile, work queue and leader election families, on the metrics endpoints the kueue and jobset scrape jobs
read) and the platform's own workloads (kube-state-metrics' deployment, daemonset and pod stores, in the
platform's namespaces only). Spliced into observability/rules.py in their place."""

from __future__ import annotations

from observability.metrics import JOB_JOBSET, JOB_KUEUE
from observability.rule_base import KSM, Alert
from observability.scrape import JOBSET_NAMESPACE, KUEUE_NAMESPACE, MONITORING_NAMESPACE, OPENPOD_NAMESPACE
from observability.thresholds import AlertThresholds

# DaemonSet and Deployment status as the API defines it: facts kubernetes.workload-status.
# Where the platform's workloads run: the node agent and remediation controller, the exporters, Kueue, JobSet,
# and kube-system (device plugins, platform_constructs/device_plugins.py; the EKS add-ons). Team users cannot
# create objects there (team namespaces carry the team label), so a team's Deployment raises nothing.
PLATFORM_NAMESPACES = (OPENPOD_NAMESPACE, MONITORING_NAMESPACE, KUEUE_NAMESPACE, JOBSET_NAMESPACE, "kube-system")
NS = f'namespace=~"{"|".join(PLATFORM_NAMESPACES)}"'
WL = f"{KSM}, {NS}"
# controller-runtime's families as Kueue's and JobSet's managers serve them (observability/engine_metrics/
# controller_runtime.py; facts controller-runtime.reconcile-errors, client-go.leader-election-gauge). Series of
# every replica are summed or maxed per manager: a standby's leader gauge is 0, the leader's 1.
CR = f'job=~"{JOB_KUEUE}|{JOB_JOBSET}"'
BY_CTRL = "by (job, controller)"
STUCK = ', condition="Progressing", status="false"'   # past progressDeadlineSeconds (ProgressDeadlineExceeded)
# The managers' Deployments: kueue@v0.19.2 charts/kueue/templates/manager/manager.yaml (<release>-controller-manager,
# infra/governance/install.py KUEUE_CONTROLLER); jobset@v0.12.0 charts/jobset/templates/controller/_helpers.tpl:20-22,
# 57-59 (<fullname>-controller).
LOGS = (f"`kubectl -n {KUEUE_NAMESPACE} logs deploy/kueue-controller-manager` (kueue) or "
        f"`kubectl -n {JOBSET_NAMESPACE} logs deploy/jobset-controller` (jobset)")


# A container's restarts with its pod's node joined from kube_pod_info (node = spec.nodeName,
# kube-state-metrics@v2.20.0:internal/store/pod.go:661-662; both families carry namespace, pod, uid, pod.go:41):
# on uid, so a pod name reused on another node joins its own pod; kube_pod_info's other labels (pod_ip,
# host_ip, ...) are maxed away, one series per pod. A pod without kube_pod_info keeps its alert, without node.
_RESTARTS = f"increase(kube_pod_container_status_restarts_total{{{WL}}}[1h])"
_ON_NODE = (f"max by (namespace, pod, container, node) ({_RESTARTS} * on (namespace, pod, uid) group_left (node) "
            f"max by (namespace, pod, uid, node) (kube_pod_info{{{WL}}}))")


def _dep(family: str, extra: str = "") -> str:
    return f"max by (namespace, deployment) (kube_deployment_{family}{{{WL}{extra}}})"


def _ds(family: str) -> str:
    return f"max by (namespace, daemonset) (kube_daemonset_status_{family}{{{WL}}})"


def platform_alerts(t: AlertThresholds) -> list[Alert]:
    ctrl = ("job", "controller")
    return [
        Alert("OpenpodPlatformControllerReconcileErrors",
              f"sum {BY_CTRL} (rate(controller_runtime_reconcile_errors_total{{{CR}}}[5m])) "
              f"/ sum {BY_CTRL} (rate(controller_runtime_reconcile_total{{{CR}}}[5m])) > {t.controller_error_ratio} "
              f"and sum {BY_CTRL} (increase(controller_runtime_reconcile_errors_total{{{CR}}}[15m])) "
              f">= {t.controller_errors}", "15m", "warning",
              "{{ $labels.job }} controller {{ $labels.controller }}: {{ $value | humanizePercentage }} of its "
              "reconciles fail",
              f"For 15 minutes over {t.controller_error_ratio:.0%} of the controller's reconciles (over 5-minute "
              f"windows, and at least {t.controller_errors} in 15 minutes) returned an error: the objects it owns (Workloads, queues, "
              "JobSets) are not brought to their spec, so jobs are not admitted, started or restarted. Counted "
              "from the manager's own counters (terminal errors, recovered panics and timeouts included).",
              f"{LOGS}: the error names the object and the call (API server "
              "refusals, RBAC, webhooks, a malformed object); fix the cause, or delete the object it chokes on.",
              ctrl),
        Alert("OpenpodPlatformControllerQueueBackedUp",
              f"max {BY_CTRL} (min_over_time((sum by (job, pod, controller) (workqueue_depth{{{CR}}}))[15m:1m])) "
              f">= {t.controller_queue_depth} "
              f"or max {BY_CTRL} (workqueue_longest_running_processor_seconds{{{CR}}}) "
              f"> {t.controller_stuck_minutes * 60}", "5m", "warning",
              "{{ $labels.job }} controller {{ $labels.controller }}: its work queue is not draining",
              f"The controller's work queue has held {t.controller_queue_depth} items or more for 15 minutes, or "
              f"one of its workers has been busy with one item for over {t.controller_stuck_minutes} minutes: "
              "changes to Workloads and JobSets wait behind it (admission, starts, restarts lag) or one object "
              "is never handled.",
              f"{LOGS} and the manager's CPU (`kubectl top pod`); many "
              "objects created at once drain by themselves; a worker stuck on one item (a hung API call) "
              "clears when the manager restarts: `kubectl rollout restart` its Deployment.", ctrl),
        Alert("OpenpodPlatformControllerLeaderless",
              f"max by (job) (leader_election_master_status{{{CR}}}) == 0", "5m", "critical",
              "{{ $labels.job }}: no replica of its controller manager holds the leader Lease",
              "Every replica serving metrics reports itself a standby (client-go sets the gauge to 0 at start and "
              "to 1 on acquiring the Lease): no Workload is admitted (Kueue) or no JobSet started or restarted "
              "(JobSet) while the managers wait. A manager that is down is OpenpodScrapeTargetDown instead.",
              f"`kubectl -n {KUEUE_NAMESPACE} get lease` or `-n {JOBSET_NAMESPACE}` (holder, renew time) and {LOGS}: "
              "RBAC on leases, the API server's reachability, a holder that is gone (its Lease expires after "
              "its duration); delete the stale Lease if its holder no longer exists.", ("job",)),
        Alert("OpenpodPlatformDeploymentUnavailable",
              f"{_dep('spec_replicas')} - {_dep('status_replicas_available')} > 0 "
              f"or {_dep('status_condition', STUCK)} == 1",
              f"{t.platform_unavailable_minutes}m", "warning",
              "Deployment {{ $labels.namespace }}/{{ $labels.deployment }}: replicas unavailable or its rollout stuck",
              f"For {t.platform_unavailable_minutes} minutes the platform Deployment has had fewer available "
              "replicas than it wants, or its rollout has passed its progress deadline (Progressing false): one "
              "of the platform's controllers or exporters (Kueue, JobSet, kube-state-metrics, the remediation "
              "controller) is down or short of replicas, and with it what it does.",
              "`kubectl -n {{ $labels.namespace }} describe deploy {{ $labels.deployment }}` and its pods' "
              "events: unschedulable (the system group's capacity, taints), an image that does not pull, a crash "
              "loop (OpenpodPlatformPodCrashLooping); roll back a bad rollout (`kubectl rollout undo`).",
              ("namespace", "deployment")),
        Alert("OpenpodPlatformDaemonSetUnavailable",
              f"{_ds('desired_number_scheduled')} - {_ds('current_number_scheduled')} > 0 "
              f"or ({_ds('desired_number_scheduled')} > 0 and {_ds('number_available')} == 0) "
              f"or ({_ds('number_unavailable')} > 0 and {_ds('updated_number_scheduled')} "
              f"< {_ds('desired_number_scheduled')})",
              f"{t.platform_unavailable_minutes}m", "warning",
              "DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }}: pods not scheduled or unavailable",
              f"For {t.platform_unavailable_minutes} minutes the platform DaemonSet (node agent, exporters, device "
              "plugins) has had nodes it should run on without its pod, no pod available at all, or a rollout "
              "with pods unavailable that does not finish: the nodes concerned lose what it does (fault "
              "detection, metrics, devices). Pods unavailable on a node that is not Ready are that node's alert.",
              "`kubectl -n {{ $labels.namespace }} get ds {{ $labels.daemonset }}` (desired, current, ready, "
              "up-to-date) and the events of its pending or failing pods: the nodes' CPU or memory taken, a "
              "taint it does not tolerate, an image that does not pull; roll back a bad rollout.",
              ("namespace", "daemonset")),
        Alert("OpenpodPlatformPodCrashLooping",
              f"({_ON_NODE} or on (namespace, pod, container) max by (namespace, pod, container) ({_RESTARTS})) "
              f">= {t.platform_restarts_per_hour}", "0m", "warning",
              "Pod {{ $labels.namespace }}/{{ $labels.pod }}: container {{ $labels.container }} keeps restarting",
              f"A container of one of the platform's pods restarted {t.platform_restarts_per_hour} times or more "
              "within an hour: while it is down its "
              "work (admission, JobSet control, fault detection, remediation, metrics) stops, and a loop hides "
              "between scrapes from the scrape-target alerts.",
              "`kubectl -n {{ $labels.namespace }} logs {{ $labels.pod }} -c {{ $labels.container }} --previous` "
              "and `kubectl describe pod` (last state: OOMKilled raises its memory limit; an error exit names "
              "its cause: configuration, RBAC, the API server).", ("namespace", "pod", "container", "node")),
    ]
