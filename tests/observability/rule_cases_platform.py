"""The alert cases of the platform's own machinery (Kueue's and JobSet's controller managers, the platform's
Deployments, DaemonSets and pods): part of rule_cases.CASES."""

from __future__ import annotations

from tests.observability.rule_case_base import JS, KSM, Case, s

# Kueue's manager as the kueue scrape job reads it: controller-runtime's families carry no replica_role
KM = {"job": "kueue", "instance": "10.0.0.5:8443", "pod": "kueue-controller-manager-6d9-x"}
KM1 = {**KM, "instance": "10.0.0.7:8443", "pod": "kueue-controller-manager-6d9-y"}   # an HA standby
WLC = {"controller": "workload_controller"}         # Named("workload_controller"), kueue@v0.19.2 workload_controller.go:1623
JSC = {"controller": "jobset"}                      # the kind's name, JobSet's one controller


def reconciles(labels: dict, ok: str, errors: str) -> list[dict]:
    """controller-runtime's reconcile counters of one controller as its manager serves them: every result's label
    set from the start (internal/controller/controller.go:449-456), the errors counted twice (482-490)."""
    return [s("controller_runtime_reconcile_total", {**labels, "result": "success"}, ok),
            s("controller_runtime_reconcile_total", {**labels, "result": "error"}, errors),
            s("controller_runtime_reconcile_total", {**labels, "result": "requeue"}, "0x40"),
            s("controller_runtime_reconcile_total", {**labels, "result": "requeue_after"}, "0x40"),
            s("controller_runtime_reconcile_errors_total", labels, errors)]


def depth(labels: dict, controller: str, values: str) -> dict:
    """workqueue_depth of a controller's queue: name and controller both the controller's, no priority
    (internal/metrics/workqueue.go:117)."""
    return s("workqueue_depth", {**labels, "name": controller, "controller": controller, "priority": ""}, values)


PLATFORM = {**KSM, "namespace": "openpod-system"}
MON = {**KSM, "namespace": "openpod-monitoring"}


def pod_info(labels: dict, pod: str, uid: str, node: str, ip: str) -> dict:
    """kube_pod_info's labels (kube-state-metrics@v2.20.0:internal/store/pod.go:661): the pod's node and more."""
    return {**labels, "pod": pod, "uid": uid, "host_ip": "10.0.1.9", "pod_ip": ip, "node": node,
            "created_by_kind": "DaemonSet", "created_by_name": "dcgm-exporter", "priority_class": "",
            "host_network": "false"}



def ds(labels: dict, *, desired: str, current: str, available: str, updated: str) -> list[dict]:
    """A DaemonSet's status as kube-state-metrics serves it; unavailable is desired - available."""
    def minus(a: str, b: str) -> str:
        expand = lambda v: [x for part in v.split() for x in ([part.split("x")[0]] * (int(part.split("x")[1]) + 1)
                                                              if "x" in part else [part])]
        return " ".join(str(int(x) - int(y)) for x, y in zip(expand(a), expand(b)))
    return [s(f"kube_daemonset_status_{k}", labels, v) for k, v in (
        ("desired_number_scheduled", desired), ("current_number_scheduled", current),
        ("number_available", available), ("number_unavailable", minus(desired, available)),
        ("updated_number_scheduled", updated))]


PLATFORM_CASES = [
    # -------------------------------------------------------------- the platform's controller managers and workloads
    Case("OpenpodPlatformControllerReconcileErrors", "35m",   # a quarter of Kueue's workload reconciles fail
         [*reconciles({**KM, **WLC}, "0+15x40", "0+5x40"), *reconciles({**JS, **JSC}, "0+2x40", "0x40")],
         [{"job": "kueue", "controller": "workload_controller"}],
         ["kueue controller workload_controller: 25% of its reconciles fail"]),
    Case("OpenpodPlatformControllerReconcileErrors", "35m",
         [*reconciles({**KM, **WLC}, "0+30x40", "0+1x40"),                   # conflicts now and then: 3 %
          *reconciles({**JS, **JSC}, "0+20x40", "0+10x3 30x37"),             # a 3-minute burst, then none
          *reconciles({**KM, "controller": "cohort_controller"}, "0x40", "0 1x39")]),   # one failure, rarely run
    Case("OpenpodPlatformControllerQueueBackedUp", "30m",
         [depth(KM, "workload_controller", "150x40"),                        # never under 100 for 15 minutes
          s("workqueue_longest_running_processor_seconds", {**JS, "name": "jobset", "controller": "jobset"},
            "0+60x40")],                                                      # one item in hand for 30 minutes
         [{"job": "kueue", "controller": "workload_controller"}, {"job": "jobset", "controller": "jobset"}],
         ["kueue controller workload_controller: its work queue is not draining",
          "jobset controller jobset: its work queue is not draining"]),
    Case("OpenpodPlatformControllerQueueBackedUp", "30m",
         [depth(KM, "workload_controller", "0 800x10 0x30"),                 # a burst drained
          depth(KM, "clusterqueue_controller", " ".join(["150 20"] * 20)),   # busy, but it drains
          s("workqueue_longest_running_processor_seconds", {**JS, "name": "jobset", "controller": "jobset"},
            " ".join(["0 30"] * 20))]),
    Case("OpenpodPlatformControllerLeaderless", "20m",   # both Kueue replicas standbys since 6m
         [s("leader_election_master_status", {**KM, "name": "c1f6bfd2.kueue.x-k8s.io"}, "1x5 0x30"),
          s("leader_election_master_status", {**KM1, "name": "c1f6bfd2.kueue.x-k8s.io"}, "0x35"),
          s("leader_election_master_status", {**JS, "name": "6d4f6a47.jobset.x-k8s.io"}, "1x35")],
         [{"job": "kueue"}], ["kueue: no replica of its controller manager holds the leader Lease"]),
    Case("OpenpodPlatformControllerLeaderless", "20m",   # the leader's pod gone at 10m; the standby takes over
         [s("leader_election_master_status", {**KM, "name": "c1f6bfd2.kueue.x-k8s.io"}, "1x10 stale"),
          s("leader_election_master_status", {**KM1, "name": "c1f6bfd2.kueue.x-k8s.io"}, "0x12 1x30")]),
    Case("OpenpodPlatformDeploymentUnavailable", "25m",
         [s("kube_deployment_spec_replicas", {**KSM, "namespace": "kueue-system",
                                             "deployment": "kueue-controller-manager"}, "1x30"),
          s("kube_deployment_status_replicas_available", {**KSM, "namespace": "kueue-system",
                                                         "deployment": "kueue-controller-manager"}, "1x5 0x30"),
          s("kube_deployment_spec_replicas", {**PLATFORM, "deployment": "node-remediation"}, "2x30"),
          s("kube_deployment_status_replicas_available", {**PLATFORM, "deployment": "node-remediation"}, "2x30"),
          s("kube_deployment_status_condition", {**PLATFORM, "deployment": "node-remediation",
                                                 "condition": "Progressing", "status": "true"}, "1x5 0x30"),
          s("kube_deployment_status_condition", {**PLATFORM, "deployment": "node-remediation",
                                                 "condition": "Progressing", "status": "false"}, "0x5 1x30")],
         [{"namespace": "kueue-system", "deployment": "kueue-controller-manager"},
          {"namespace": "openpod-system", "deployment": "node-remediation"}],
         ["Deployment kueue-system/kueue-controller-manager: replicas unavailable or its rollout stuck",
          "Deployment openpod-system/node-remediation: replicas unavailable or its rollout stuck"]),
    Case("OpenpodPlatformDeploymentUnavailable", "25m",
         [s("kube_deployment_spec_replicas", {**PLATFORM, "deployment": "node-remediation"}, "2x30"),
          s("kube_deployment_status_replicas_available", {**PLATFORM, "deployment": "node-remediation"},
            "2x5 1x5 2x20"),                                                  # a rollout: one pod at a time
          s("kube_deployment_status_condition", {**PLATFORM, "deployment": "node-remediation",
                                                 "condition": "Progressing", "status": "true"}, "1x30"),
          s("kube_deployment_spec_replicas", {**KSM, "namespace": "team-a", "deployment": "notebook"}, "1x30"),
          s("kube_deployment_status_replicas_available", {**KSM, "namespace": "team-a", "deployment": "notebook"},
            "0x30"),                                                          # a team's own Deployment
          s("kube_deployment_spec_replicas", {**KSM, "namespace": "jobset-system", "deployment": "jobset-controller"},
            "0x30"),                                                          # scaled to zero
          s("kube_deployment_status_replicas_available",
            {**KSM, "namespace": "jobset-system", "deployment": "jobset-controller"}, "0x30")]),
    Case("OpenpodPlatformDaemonSetUnavailable", "25m",
         [*ds({**PLATFORM, "daemonset": "node-health-agent-amd64"}, desired="10x30", current="10x5 9x25",
              available="10x5 9x25", updated="10x30"),                        # a pod pending on one node
          *ds({**KSM, "namespace": "openpod-monitoring", "daemonset": "dcgm-exporter"}, desired="4x30",
              current="4x30", available="4x5 0x25", updated="4x30"),          # no pod available at all
          *ds({**KSM, "namespace": "kube-system", "daemonset": "nvidia-device-plugin-daemonset"}, desired="10x30",
              current="10x30", available="10x5 9x25", updated="10x5 5x25")],  # a rollout stuck on a pod
         [{"namespace": "openpod-system", "daemonset": "node-health-agent-amd64"},
          {"namespace": "openpod-monitoring", "daemonset": "dcgm-exporter"},
          {"namespace": "kube-system", "daemonset": "nvidia-device-plugin-daemonset"}],
         ["DaemonSet openpod-system/node-health-agent-amd64: pods not scheduled or unavailable",
          "DaemonSet openpod-monitoring/dcgm-exporter: pods not scheduled or unavailable",
          "DaemonSet kube-system/nvidia-device-plugin-daemonset: pods not scheduled or unavailable"]),
    Case("OpenpodPlatformDaemonSetUnavailable", "25m",
         [*ds({**PLATFORM, "daemonset": "node-health-agent-amd64"}, desired="10x30", current="10x30",
              available="10x5 9x25", updated="10x30"),                        # its pod on a node not Ready
          *ds({**KSM, "namespace": "openpod-monitoring", "daemonset": "dcgm-exporter"}, desired="4x5 5x25",
              current="4x7 5x23", available="4x8 5x22", updated="4x7 5x23"),  # a node joined
          *ds({**KSM, "namespace": "team-a", "daemonset": "sidecar"}, desired="4x30", current="4x30",
              available="0x30", updated="4x30")]),                            # a team's own
    Case("OpenpodPlatformPodCrashLooping", "40m",   # no kube_pod_info (its family off): the alert without node
         [s("kube_pod_container_status_restarts_total", {**PLATFORM, "pod": "node-remediation-7c9-x", "uid": "u1",
                                                         "container": "controller"}, "0x5 1x5 2x5 3x5 4x25")],
         [{"namespace": "openpod-system", "pod": "node-remediation-7c9-x", "container": "controller"}],
         ["Pod openpod-system/node-remediation-7c9-x: container controller keeps restarting"]),
    Case("OpenpodPlatformPodCrashLooping", "40m",   # with kube_pod_info: the pod's node joined
         [s("kube_pod_container_status_restarts_total", {**MON, "pod": "dcgm-exporter-q7w", "uid": "u3",
                                                         "container": "exporter"}, "0x5 1x5 2x5 3x5 4x25"),
          # its IP assigned at 3m: a second series of the same pod, stale once replaced (pod.go:661-662)
          s("kube_pod_info", pod_info(MON, "dcgm-exporter-q7w", "u3", "gpu-j", ""), "1x3 stale"),
          s("kube_pod_info", pod_info(MON, "dcgm-exporter-q7w", "u3", "gpu-j", "10.0.1.9"), "_x3 1x40"),
          # a second kube-state-metrics replica serves the same pod: one series per pod after the max
          s("kube_pod_info", {**pod_info(MON, "dcgm-exporter-q7w", "u3", "gpu-j", "10.0.1.9"),
                              "instance": "10.0.0.4:8080"}, "1x45")],
         [{"namespace": "openpod-monitoring", "pod": "dcgm-exporter-q7w", "container": "exporter", "node": "gpu-j"}],
         ["Pod openpod-monitoring/dcgm-exporter-q7w: container exporter keeps restarting"]),
    Case("OpenpodPlatformPodCrashLooping", "40m",
         [s("kube_pod_container_status_restarts_total", {**PLATFORM, "pod": "node-remediation-7c9-x", "uid": "u1",
                                                         "container": "controller"}, "0x5 1x40"),   # one OOM
          s("kube_pod_container_status_restarts_total", {**KSM, "namespace": "team-a", "pod": "llm-node-0-0",
                                                         "uid": "u2", "container": "trainer"}, "0+1x40")]),
]
