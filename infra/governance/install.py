"""How Kueue and JobSet are installed: OCI Helm charts at pinned versions, and their values.

Kueue is configured for this platform:

* ``TopologyAwareScheduling`` feature gate on (jobs ask for one UltraServer or
  one network spine through pod-template annotations);
* fair sharing on unless ``queueing.fair_sharing`` is false
  (``fairSharing.preemptionStrategies``): idle quota is shared by the
  ClusterQueues' ``fairSharing.weight``;
* ``waitForPodsReady`` from ``queueing.wait_for_pods_ready``: a gang whose pods
  never all start is evicted and its quota released;
* integrations limited to ``batch/job`` and ``jobset.x-k8s.io/jobset``: the pod
  integration would put a webhook in front of every pod of the cluster;
* ``hugepages-`` excluded from quota accounting: hugepages are a per-node
  kernel setting every EFA pod asks for, not a scarce shared resource;
* the controller runs on the system group and tolerates its taint (``system_group.py``).

JobSet is configured for replica fault tolerance: its ``RestartJob`` feature
gate on, so a failed replica group's child Job restarts alone
(``jobset_manager_config``, ``jobset_controller_patch``).

The chart version pins the controller image (released charts default the
image tag to their own version), so only the chart version is set.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from infra.governance import compute_domain
from infra.governance.queues import TEAM_LABEL
from infra.governance.system_group import system_node_selector, system_tolerations
from infra.spec.queueing import QueueingSpec
from infra.spec.cluster import ClusterSpec

KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
KUEUE_NAMESPACE = "kueue-system"
JOBSET_NAMESPACE = "jobset-system"
KUEUE_RELEASE = "kueue"
JOBSET_RELEASE = "jobset"
# Kueue's controller service account: <fullname>-controller-manager, the fullname being the release name when it
# contains the chart name (kubernetes-sigs/kueue@v0.19.2 charts/kueue/templates/manager/manager.yaml:111,
# templates/_helpers.tpl:29-35).
KUEUE_CONTROLLER = f"{KUEUE_RELEASE}-controller-manager"
# The readiness gate's probe: a server-side dry-run create of this ResourceFlavor runs Kueue's
# mutating and validating webhooks (kubernetes-sigs/kueue@v0.19.2:pkg/webhooks/resourceflavor_webhook.go:46,61)
# and stores nothing (platform_constructs/webhook_gate.py).
KUEUE_WEBHOOK_PROBE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                       "metadata": {"name": "openpod-webhook-probe"}, "spec": {}}
KUEUE_WEBHOOK_PROBE_PLURAL = "resourceflavors"
KUEUE_WEBHOOK_PROBE_PATH = f"/apis/{KUEUE_WEBHOOK_PROBE['apiVersion']}/{KUEUE_WEBHOOK_PROBE_PLURAL}?dryRun=All"

FEATURE_GATES = {"TopologyAwareScheduling": True}
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
EXCLUDED_RESOURCE_PREFIXES = ("hugepages-",)


def wait_for_pods_ready(queueing: QueueingSpec) -> dict[str, Any]:
    """Kueue's ``waitForPodsReady`` from the spec's ``queueing.wait_for_pods_ready``.

    An admitted gang whose pods are not all Ready within ``timeout`` is evicted (its quota released)
    and requeued after ``backoffBaseSeconds * 2^(n-1)`` capped at ``backoffMaxSeconds``; a running one
    that lost a pod and is not Ready again within ``recoveryTimeout`` likewise
    (kueue@v0.19.2 apis/config/v1beta2/configuration_types.go:302-329, 402-440). ``blockAdmission``
    stays false: one slow gang must not stop every other team's admissions. Kueue 0.19.2 would
    otherwise apply its own defaults silently (30 min, recovery = timeout, 60 s base;
    apis/config/v1beta2/defaults.go:48-52, 99-117): the values are set here so they are the spec's.
    """
    w = queueing.wait_for_pods_ready
    strategy: dict[str, Any] = {"timestamp": "Eviction", "backoffBaseSeconds": w.backoff_base_seconds,
                                "backoffMaxSeconds": w.backoff_max_seconds}
    if w.backoff_limit_count is not None:
        strategy["backoffLimitCount"] = w.backoff_limit_count
    return {"timeout": f"{w.timeout_minutes}m", "blockAdmission": False,
            "recoveryTimeout": f"{w.recovery_timeout_minutes}m" if w.recovery_timeout_minutes else "0s",
            "requeuingStrategy": strategy}


def kueue_manager_config(spec: ClusterSpec | None = None) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for ``spec`` (its ``queueing:``
    section; the section's defaults when None)."""
    queueing = spec.queueing if spec is not None else QueueingSpec()
    cfg: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        # Per-ClusterQueue usage and quota gauges (kueue_cluster_queue_resource_usage, _nominal_quota; the
        # platform's team dashboards and openpod:team_borrowed:sum read them) are reported only with this on
        # (kueue@v0.19.2:apis/config/v1beta2/configuration_types.go:182-185).
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
            "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        # Every job in a team namespace is Kueue's, with or without a queue label: one created without it
        # is suspended, never started (kueue@v0.19.2:apis/config/v1beta2/configuration_types.go:46-70).
        # The selector replaces the default (all but kube-system and kueue-system; defaults.go:124-132).
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
        "waitForPodsReady": wait_for_pods_ready(queueing),
        "resources": {"excludeResourcePrefixes": list(EXCLUDED_RESOURCE_PREFIXES)},
    }
    mappings = compute_domain.device_class_mappings(spec) if spec is not None else []
    if mappings:  # IMEX channel claims of GB200 jobs (infra/governance/compute_domain.py)
        cfg["resources"]["deviceClassMappings"] = mappings
    if queueing.fair_sharing:
        # Present = fair sharing on (kueue@v0.19.2 pkg/scheduler/preemption/fairsharing/strategy.go:50-52).
        cfg["fairSharing"] = {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)}
    return cfg


def kueue_values(spec: ClusterSpec) -> dict[str, Any]:
    # controllerManager.nodeSelector / .tolerations: kueue@v0.19.2:charts/kueue/values.yaml:104-107, rendered
    # into the manager Deployment by templates/manager/manager.yaml:121-122 (tolerations).
    return {
        "controllerManager": {
            "featureGates": [{"name": k, "enabled": v} for k, v in FEATURE_GATES.items()],
            "nodeSelector": system_node_selector(spec),
            "tolerations": system_tolerations(spec),
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_manager_config(spec), sort_keys=False)},
    }


def jobset_values(spec: ClusterSpec) -> dict[str, Any]:
    # prometheus.enable would render a ServiceMonitor, whose CRD the cluster may not have:
    # the install would fail. The controller still serves /metrics.
    # controller.nodeSelector / .tolerations: jobset@v0.12.0:charts/jobset/values.yaml:70,74, rendered by
    # templates/controller/deployment.yaml:130-141.
    return {"controller": {"nodeSelector": system_node_selector(spec), "tolerations": system_tolerations(spec)},
            "prometheus": {"enable": False}}


# JobSet's controller configuration. The v0.12.0 chart renders its own (templates/controller/configmap.yaml:24-37)
# with no featureGates and no value to add them or extra args, and passes it to the controller only as the file
# --config=/controller_manager_config.yaml (templates/controller/deployment.yaml:49-53, 62-65, 113-116); the
# controller has no --feature-gates flag and reads gates only from that file (main.go:77-93, 111-120).
#
# So two patches after the chart, each setting only fields the chart does not render: a second key in the chart's
# ConfigMap holding the whole file with the gate, and ``items`` on the chart's config volume that projects that key
# as controller_manager_config.yaml. Touching a field the chart renders (the volume's ConfigMap name, the chart's
# key, the args) would make the next ``helm upgrade`` fail: the CDK's kubectl layer runs Helm 4.1.3, which installs
# and upgrades by server-side apply without --force-conflicts (helm/helm@v4.1.3:pkg/cmd/upgrade.go:156-157,279-280;
# pkg/action/upgrade.go:664-668), and a field another manager (kubectl patch) changed is a conflict.
JOBSET_FEATURE_GATES = {"RestartJob": True}
JOBSET_CONTROLLER = "jobset-controller"          # <release>-controller (templates/controller/_helpers.tpl:20-22,57-59)
JOBSET_CONFIG_MAP = "jobset-controller-config"   # <release>-controller-config (_helpers.tpl:50-52)
JOBSET_CONFIG_VOLUME = "manager-config"          # templates/controller/deployment.yaml:63,114-116
JOBSET_CONFIG_FILE = "controller_manager_config.yaml"  # the chart's key and the mount's subPath (configmap.yaml:25,
                                                       # deployment.yaml:64)
JOBSET_OPENPOD_KEY = "openpod_controller_manager_config.yaml"  # ours, next to the chart's
CONFIG_HASH_ANNOTATION = "openpod.io/config-sha256"
CHART_VERSION_ANNOTATION = "openpod.io/jobset-chart-version"


def jobset_manager_config() -> dict[str, Any]:
    """JobSet's Configuration (config.jobset.x-k8s.io/v1alpha1): the chart's own at its defaults
    (configmap.yaml:27-37 with values.yaml:36-43, release ``jobset``), plus ``featureGates``
    (api/config/v1alpha1/configuration_types.go:39-41)."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": True},
        "clientConnection": {"qps": 500, "burst": 500},
        "internalCertManagement": {"enable": True, "webhookServiceName": f"{JOBSET_RELEASE}-webhook-service",
                                   "webhookSecretName": f"{JOBSET_RELEASE}-webhook-server-cert"},
        "featureGates": dict(JOBSET_FEATURE_GATES),
    }


def jobset_config_text() -> str:
    return yaml.safe_dump(jobset_manager_config(), sort_keys=False)


def jobset_config_patch(chart_version: str) -> dict[str, Any]:
    """Merge patch of the chart's ConfigMap: our file under a key of its own (the chart's key is left as rendered)."""
    return {"metadata": {"annotations": {CHART_VERSION_ANNOTATION: chart_version.lstrip("v")}},
            "data": {JOBSET_OPENPOD_KEY: jobset_config_text()}}


def jobset_controller_patch(chart_version: str) -> dict[str, Any]:
    """Strategic-merge patch of the chart's controller Deployment: its config volume projects our key as the
    file the controller reads, and the pod template carries that file's hash, so a changed file rolls the
    controller (the file is a subPath mount, which the kubelet never refreshes). The chart version on the
    Deployment makes a chart upgrade re-apply the patch."""
    digest = hashlib.sha256(jobset_config_text().encode()).hexdigest()
    return {"metadata": {"annotations": {CHART_VERSION_ANNOTATION: chart_version.lstrip("v")}},
            "spec": {"template": {
                "metadata": {"annotations": {CONFIG_HASH_ANNOTATION: digest}},
                "spec": {"volumes": [{"name": JOBSET_CONFIG_VOLUME, "configMap": {
                    "items": [{"key": JOBSET_OPENPOD_KEY, "path": JOBSET_CONFIG_FILE}]}}]}}}}


def jobset_controller_restore_patch() -> dict[str, Any]:
    """The chart's own file back (applied when the patch is removed): no ``items``, every key projected. The
    annotations are emptied, not removed: CloudFormation properties cannot carry the null a merge patch deletes
    with."""
    return {"metadata": {"annotations": {CHART_VERSION_ANNOTATION: ""}},
            "spec": {"template": {
                "metadata": {"annotations": {CONFIG_HASH_ANNOTATION: ""}},
                "spec": {"volumes": [{"name": JOBSET_CONFIG_VOLUME, "configMap": {"items": []}}]}}}}
