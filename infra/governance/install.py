"""How Kueue and JobSet are installed: OCI Helm charts at pinned versions, and their values.

Kueue is configured for this platform:

* ``TopologyAwareScheduling`` feature gate on (jobs ask for one UltraServer or
  one network spine through pod-template annotations);
* fair sharing on (``fairSharing.preemptionStrategies``): idle quota is shared
  by the ClusterQueues' ``fairSharing.weight``;
* integrations limited to ``batch/job`` and ``jobset.x-k8s.io/jobset``: the pod
  integration would put a webhook in front of every pod of the cluster;
* ``hugepages-`` excluded from quota accounting: hugepages are a per-node
  kernel setting every EFA pod asks for, not a scarce shared resource;
* the controller runs on the system group (CPU nodes with min_size >= 1).

The chart version pins the controller image (released charts default the
image tag to their own version), so only the chart version is set.
"""

from __future__ import annotations

from typing import Any

import yaml

from openpod_core import labels
from infra.governance.queues import TEAM_LABEL
from infra.spec import ClusterSpec

KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
KUEUE_NAMESPACE = "kueue-system"
JOBSET_NAMESPACE = "jobset-system"
KUEUE_RELEASE = "kueue"
JOBSET_RELEASE = "jobset"
# Objects the charts create that the CDK app waits on before applying queues.
KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_WEBHOOK_SERVICE = "kueue-webhook-service"

FEATURE_GATES = {"TopologyAwareScheduling": True}
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
EXCLUDED_RESOURCE_PREFIXES = ("hugepages-",)


def system_node_selector(spec: ClusterSpec) -> dict[str, str]:
    """Run controllers on the spec's first always-on CPU group."""
    for g in spec.instance_groups:
        if not g.type.is_accelerated and g.min_size >= 1:
            return {labels.INSTANCE_GROUP: g.name}
    return {}


def kueue_manager_config() -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
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
        "fairSharing": {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)},
        "resources": {"excludeResourcePrefixes": list(EXCLUDED_RESOURCE_PREFIXES)},
    }


def kueue_values(spec: ClusterSpec) -> dict[str, Any]:
    return {
        "controllerManager": {
            "featureGates": [{"name": k, "enabled": v} for k, v in FEATURE_GATES.items()],
            "nodeSelector": system_node_selector(spec),
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_manager_config(), sort_keys=False)},
    }


def jobset_values(spec: ClusterSpec) -> dict[str, Any]:
    # prometheus.enable would render a ServiceMonitor, whose CRD the cluster may not have:
    # the install would fail. The controller still serves /metrics.
    return {"controller": {"nodeSelector": system_node_selector(spec)}, "prometheus": {"enable": False}}
