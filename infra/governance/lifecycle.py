"""How each generated object leaves the cluster when the spec no longer has it (CDK path).

The EKS kubectl handler applies a changed manifest resource with ``kubectl apply --prune -l
aws.cdk.eks/prune-<resource>`` and no ``--prune-allowlist`` (aws-cdk-lib 2.275.0,
custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py:63-67), so kubectl prunes
only its default allowlist: of the kinds we create, ``Namespace`` and ``PersistentVolumeClaim``
(k8s.io/kubectl pkg/util/prune/prune.go, ``defaultNamespacedPruneResources`` /
``defaultNonNamespacedPruneResources``; checked 2026-11-23). A ClusterQueue, ResourceFlavor,
WorkloadPriorityClass, ... dropped from a shared manifest would stay on the cluster.

So every cluster-scoped object outside that allowlist gets a manifest resource of its own, keyed by
kind and name: when the spec drops it, CloudFormation deletes the resource and the handler runs
``kubectl delete -f`` on it (apply/__init__.py:68-72). Namespaced objects (LocalQueue, Role,
RoleBinding, claim, service account) go with their team's Namespace, which the core manifest prunes.
The ``openpod-host`` Topology stays in the shared Kueue manifest: every spec has a CPU system group, so
it always exists and that manifest is never empty (an emptied manifest resource would be deleted, and
its delete would remove objects now owned by their own resources).
"""

from __future__ import annotations

from typing import Any

# kubectl's default prune allowlist (k8s.io/kubectl pkg/util/prune/prune.go), by kind.
KUBECTL_DEFAULT_PRUNE_NAMESPACED = frozenset({
    "ConfigMap", "Endpoints", "PersistentVolumeClaim", "Pod", "ReplicationController", "Secret", "Service", "Job",
    "CronJob", "Ingress", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"})
KUBECTL_DEFAULT_PRUNE_CLUSTER = frozenset({"Namespace", "PersistentVolume"})

ALWAYS_PRESENT = frozenset({("Topology", "openpod-host")})


def standalone(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` gets a manifest resource of its own (so CloudFormation deletes it with the spec)."""
    meta = obj["metadata"]
    return ("namespace" not in meta and obj["kind"] not in KUBECTL_DEFAULT_PRUNE_CLUSTER
            and (obj["kind"], meta["name"]) not in ALWAYS_PRESENT)


def resource_id(obj: dict[str, Any]) -> str:
    """Construct id of a standalone object's manifest resource: stable for as long as the object exists."""
    return f"{obj['kind']}-{obj['metadata']['name']}"


def removed_by(obj: dict[str, Any]) -> str:
    """How ``obj`` is deleted once the spec drops it, on the CDK path."""
    if standalone(obj):
        return "its own manifest resource is deleted (kubectl delete)"
    if "namespace" in obj["metadata"]:
        return "its Namespace is pruned"
    if obj["kind"] in KUBECTL_DEFAULT_PRUNE_CLUSTER:
        return "kubectl apply --prune (default allowlist)"
    return "never dropped (always part of the spec)"
