"""Kueue objects, namespaces and RBAC of a spec's ``teams:`` section, as plain dicts.

One namespace, ClusterQueue and LocalQueue per team; one ResourceFlavor per
instance group; one shared Cohort; the spec's WorkloadPriorityClasses; Kueue
Topologies over the EKS network topology labels; RBAC so a team's users submit
only in their own namespace; the team's FSx PersistentVolumeClaim and the
service account its training pods run as.

Everything here is a pure function of the spec: ``openpod manifests`` writes
these objects as YAML and the TaskGovernance construct applies the same list.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openpod_core import labels
from infra.governance import compute_domain
from infra.governance import resources as res
from openpod_core.accelerator_stack import multi_node_nvlink
from openpod_core.instance_types import InstanceType
from infra.governance.topology_types import publishes_topology
from infra.spec.quota_backing import backed_nodes
from infra.spec.cluster import ClusterSpec
from infra.spec.teams import GroupQuota, TeamSpec
from infra.spec.groups import InstanceGroupSpec

KUEUE_API = "kueue.x-k8s.io/v1beta2"
COHORT = "openpod"
MANAGED_BY = {"app.kubernetes.io/managed-by": "openpod"}
TEAM_LABEL = f"{labels.DOMAIN}/team"

# Topologies. Network: the three EC2 network layers then the host. UltraServer
# types: the UltraServer then the host. Kueue keys a domain by the values of all
# levels above it, so the UltraServer is the top level: an UltraServer whose
# instances hang off different layer-3 network nodes stays one domain.
# CPU groups get a host-only topology so every flavor of a ClusterQueue is
# topology-aware: Kueue then implies topology-aware placement for jobs that ask
# for none, where a queue mixing flavors with and without a topology would
# never give such jobs a flavor with one.
NETWORK_TOPOLOGY = "openpod-network"
ULTRASERVER_TOPOLOGY = "openpod-ultraserver"
HOST_TOPOLOGY = "openpod-host"
TOPOLOGY_LEVELS: dict[str, tuple[str, ...]] = {
    NETWORK_TOPOLOGY: (*labels.TOPOLOGY_LAYERS, labels.HOSTNAME),
    ULTRASERVER_TOPOLOGY: (labels.ULTRASERVER_ID, labels.HOSTNAME),
    HOST_TOPOLOGY: (labels.HOSTNAME,),
}

# FSx for Lustre: the storage construct creates one static PersistentVolume per
# team named fsx_volume_name(team); the claim binds to it by name and never
# triggers dynamic provisioning (storageClassName "").
FSX_CLAIM = "fsx-lustre"

# What a team's users may do in their namespace.
SUBMITTER_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
     "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log", "services", "events", "persistentvolumeclaims"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
    # `openpod submit --runtime openpod` creates the job's peer-replication Secret (owned by its JobSet).
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete", "get"]},
    # `openpod submit` on a multi-node-NVLink group creates the job's IMEX ComputeDomain (owned by its JobSet).
    {"apiGroups": ["resource.nvidia.com"], "resources": ["computedomains"],
     "verbs": ["create", "delete", "get", "list", "watch"]},
)
QUEUE_VIEWER_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": ["kueue.x-k8s.io"],
     "resources": ["clusterqueues", "cohorts", "resourceflavors", "topologies", "workloadpriorityclasses"],
     "verbs": ["get", "list", "watch"]},
)
QUEUE_VIEWER = "openpod-queue-viewer"


def team_group(team: str) -> str:
    """Kubernetes group whose members submit as ``team``: the stack gives each of the team's
    ``users`` (IAM principal ARNs) an EKS access entry with this group."""
    return f"openpod:team:{team}"


def team_members(spec: ClusterSpec) -> dict[str, list[str]]:
    """IAM principal ARN -> the team groups it joins (a user may be in several teams; EKS allows one
    access entry per principal, so the stack gives each principal one entry with all its groups)."""
    out: dict[str, list[str]] = {}
    for team in spec.teams:
        for arn in team.users:
            groups = out.setdefault(arn, [])
            if team_group(team.name) not in groups:
                groups.append(team_group(team.name))
    return out


def local_queue_name(team: str) -> str:
    return team


def cluster_queue_name(team: str) -> str:
    return team


def fsx_volume_name(team: str) -> str:
    return f"{FSX_CLAIM}-{team}"


def topology_of(group: InstanceGroupSpec) -> str:
    """Topology a group's flavor uses: UltraServer types, other types EC2 publishes topology for
    (``topology_types``), and the rest (CPU types, and accelerated types such as p5.4xlarge without topology)."""
    t = group.type
    if t.ultraserver:
        return ULTRASERVER_TOPOLOGY
    if t.is_accelerated and publishes_topology(t.name):
        return NETWORK_TOPOLOGY
    return HOST_TOPOLOGY


def _meta(name: str, namespace: str | None = None, **labels_: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**MANAGED_BY, **labels_}
    return meta


# ----------------------------------------------------------------------- capacity


@dataclass(frozen=True)
class TeamCapacity:
    """A team's reach on one group, in nodes."""

    team: str
    group: str
    nominal: int
    lendable: int          # of its nominal quota, what others may borrow
    borrowable: int        # what it may borrow (its limit, capped by what others lend)
    borrowing_limit: int | None
    lending_limit: int | None

    @property
    def max_nodes(self) -> int:
        """The most nodes a job of this team could ever be admitted on."""
        return self.nominal + self.borrowable


def _quota(team: TeamSpec, group: str) -> GroupQuota:
    return team.quotas.get(group) or GroupQuota(nodes=0)


def _lendable(q: GroupQuota) -> int:
    return q.nodes if q.lending_limit is None else min(q.lending_limit, q.nodes)


def queued_groups(spec: ClusterSpec) -> list[InstanceGroupSpec]:
    """Groups any team has quota on, in spec order: every team's queue lists them all."""
    used = {g for t in spec.teams for g, q in t.quotas.items()}
    return [g for g in spec.instance_groups if g.name in used]


def pool_nodes(spec: ClusterSpec, group: str) -> int:
    """Nodes of a queued group that run (``desired_size``, hot spares excluded: ``quota_backing.backed_nodes``)
    and no team has quota on: the Cohort's own quota, a shared pool every team may borrow from
    (kueue@v0.19.2 apis/kueue/v1beta2/cohort_types.go:38-65). Nodes up to ``max_size`` that do not run are no
    pool: quota on them would admit jobs whose pods stay Pending."""
    g = spec.group(group)
    return max(0, backed_nodes(g) - sum(_quota(t, group).nodes for t in spec.teams))


def idle_pools(spec: ClusterSpec) -> list[str]:
    """``<group> <nodes>`` for each queued group with an idle pool (``pool_nodes``), for the CLI's summaries."""
    return [f"{g.name} {pool_nodes(spec, g.name)}" for g in queued_groups(spec) if pool_nodes(spec, g.name)]


def capacity(spec: ClusterSpec, team: TeamSpec, group: str) -> TeamCapacity:
    q = _quota(team, group)
    others = sum(_lendable(_quota(t, group)) for t in spec.teams if t.name != team.name)
    others += pool_nodes(spec, group)
    borrowable = others if q.borrowing_limit is None else min(q.borrowing_limit, others)
    return TeamCapacity(team.name, group, q.nodes, _lendable(q), borrowable, q.borrowing_limit, q.lending_limit)


# ------------------------------------------------------------------------ objects


# Pod Security Admission warns and audits at Baseline; admission.py's openpod-pod-security enforces Baseline
# plus the training runtime's two exceptions, which PSA's own enforce mode cannot express.
POD_SECURITY_LABELS = {"pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/audit": "baseline"}


def namespace(team: TeamSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": _meta(team.name, **{TEAM_LABEL: team.name, **POD_SECURITY_LABELS})}


def topologies(spec: ClusterSpec) -> list[dict[str, Any]]:
    used = sorted({topology_of(g) for g in spec.instance_groups})
    return [{"apiVersion": KUEUE_API, "kind": "Topology", "metadata": _meta(name),
             "spec": {"levels": [{"nodeLabel": key} for key in TOPOLOGY_LEVELS[name]]}} for name in used]


def resource_flavor(group: InstanceGroupSpec) -> dict[str, Any]:
    """Nodes of one group. Pods admitted on it tolerate the group's own taints only:
    never the health-check startup taint, the unhealthy taint or the hot-spare taint."""
    spec: dict[str, Any] = {"nodeLabels": {labels.INSTANCE_GROUP: group.name}}
    if group.taints:
        spec["tolerations"] = [
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect.value} for t in group.taints
        ]
    spec["topologyName"] = topology_of(group)
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
            "metadata": _meta(group.name, **{labels.INSTANCE_GROUP: group.name}), "spec": spec}


def cohort(spec: ClusterSpec) -> dict[str, Any]:
    """The teams' Cohort. Nodes of a queued group beyond the sum of the teams' quotas are its own
    quota: an idle pool any team borrows from (within its borrowing limit), shared by fair sharing
    or, classically, first come; nobody owns it, so nobody reclaims it by preemption."""
    groups = queued_groups(spec)
    covered = covered_resources(groups)
    if not any(pool_nodes(spec, g.name) for g in groups):
        return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": _meta(COHORT), "spec": {}}
    flavors = []
    for g in groups:
        per_node = _per_node(g.type, covered)
        n = pool_nodes(spec, g.name)
        flavors.append({"name": g.name, "resources": [
            {"name": r, "nominalQuota": res.quantity(r, n * per_node[r])} for r in covered]})
    return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": _meta(COHORT),
            "spec": {"resourceGroups": [{"coveredResources": covered, "flavors": flavors}]}}


def covered_resources(groups: list[InstanceGroupSpec]) -> list[str]:
    present: set[str] = set()
    for g in groups:
        present |= set(_node_quantities(g.type))
    return [r for r in (*res.RESOURCE_ORDER, compute_domain.IMEX_CHANNEL) if r in present]


def _node_quantities(t: InstanceType) -> dict[str, int]:
    """What one node of type ``t`` counts for in quota: its pod share, plus one IMEX channel on multi-node-NVLink
    types (a DRA claim, mapped to a quota resource in Kueue's configuration: infra/governance/compute_domain.py)."""
    have = res.node_share(t).quantities(t)
    if multi_node_nvlink(t):
        have[compute_domain.IMEX_CHANNEL] = 1
    return have


def _per_node(t: InstanceType, covered: list[str]) -> dict[str, int]:
    have = _node_quantities(t)
    return {r: have.get(r, 0) for r in covered}


def cluster_queue(spec: ClusterSpec, team: TeamSpec) -> dict[str, Any]:
    groups = queued_groups(spec)
    covered = covered_resources(groups)
    flavors = []
    for g in groups:
        q = _quota(team, g.name)
        per_node = _per_node(g.type, covered)
        rows = []
        for r in covered:
            row: dict[str, Any] = {"name": r, "nominalQuota": res.quantity(r, q.nodes * per_node[r])}
            if q.borrowing_limit is not None:
                row["borrowingLimit"] = res.quantity(r, q.borrowing_limit * per_node[r])
            if q.lending_limit is not None:
                row["lendingLimit"] = res.quantity(r, q.lending_limit * per_node[r])
            rows.append(row)
        flavors.append({"name": g.name, "resources": rows})
    p = team.preemption
    cq_spec: dict[str, Any] = {
        "cohortName": COHORT,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.name}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {
            "reclaimWithinCohort": p.reclaim_within_cohort,
            "withinClusterQueue": p.within_cluster_queue,
        },
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
    }
    if spec.queueing.fair_sharing:
        # Fair preemption never reads borrowWithinCohort (kueue@v0.19.2 preemption.go:155-160, 631-650):
        # it is left out rather than shown as if it applied; the weight is what decides instead.
        cq_spec["fairSharing"] = {"weight": _weight(team.fair_sharing_weight)}
    else:
        # Classical preemption: weights are unused, borrowWithinCohort applies
        # (classical/hierarchical_preemption.go:71-77, 103-112).
        cq_spec["preemption"]["borrowWithinCohort"] = {"policy": p.borrow_within_cohort}
    if flavors:
        cq_spec["resourceGroups"] = [{"coveredResources": covered, "flavors": flavors}]
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": _meta(cluster_queue_name(team.name), **{TEAM_LABEL: team.name}), "spec": cq_spec}


def _weight(w: float) -> str | int:
    """A Kubernetes quantity for a weight, exactly the spec's decimal: an integer when whole, else
    a plain decimal string (``0.0005``, ``1.005``). Kueue reads it as a float
    (kueue@v0.19.2 pkg/cache/scheduler/fair_sharing.go:204-216) and accepts any weight > 1e-9
    (pkg/webhooks/common.go:56-57); rounding to milli-units would turn weights below 0.001 into 0,
    which Kueue treats as an infinite share (never wins idle capacity, fair_sharing.go:90-98)."""
    d = Decimal(repr(float(w)))
    return int(d) if d == d.to_integral_value() else format(d.normalize(), "f")


def local_queue(team: TeamSpec) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue",
            "metadata": _meta(local_queue_name(team.name), team.name, **{TEAM_LABEL: team.name}),
            "spec": {"clusterQueue": cluster_queue_name(team.name)}}


def priority_classes(spec: ClusterSpec) -> list[dict[str, Any]]:
    out = []
    for p in sorted(spec.priorities, key=lambda p: -p.value):
        obj: dict[str, Any] = {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
                               "metadata": _meta(p.name), "value": p.value}
        if p.description:
            obj["description"] = p.description
        out.append(obj)
    return out


def _subjects(team: TeamSpec) -> list[dict[str, Any]]:
    """The team's Kubernetes group only: its IAM users and roles join it through their EKS access
    entries (a User subject would name one identity, and role sessions have per-session names)."""
    return [{"kind": "Group", "name": team_group(team.name), "apiGroup": "rbac.authorization.k8s.io"}]


def rbac(team: TeamSpec) -> list[dict[str, Any]]:
    name = f"{team.name}-submitter"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": _meta(name, team.name, **{TEAM_LABEL: team.name}), "rules": [dict(r) for r in SUBMITTER_RULES]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": _meta(name, team.name, **{TEAM_LABEL: team.name}),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": _subjects(team)}
    return [role, binding]


def queue_viewer(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Every team may read the cluster-wide queue objects (quotas, borrowing, priorities)."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(QUEUE_VIEWER),
            "rules": [dict(r) for r in QUEUE_VIEWER_RULES]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": _meta(QUEUE_VIEWER),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": QUEUE_VIEWER},
               "subjects": [s for t in spec.teams for s in _subjects(t)]}
    return [role, binding]


def fsx_claim(spec: ClusterSpec, team: TeamSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(FSX_CLAIM, team.name, **{TEAM_LABEL: team.name}),
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "volumeName": fsx_volume_name(team.name),
                     "resources": {"requests": {"storage": f"{spec.storage.fsx.storage_capacity_gib}Gi"}}}}


def training_service_account(team: TeamSpec) -> dict[str, Any]:
    """The service account submitted pods run as; the stack's Pod Identity association gives it the
    platform's training role (datasets, checkpoints, logs buckets)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(labels.TRAINING_SERVICE_ACCOUNT, team.name, **{TEAM_LABEL: team.name})}
