"""``openpod status``: the platform as the cluster sees it - instance groups, nodes, health, hot spares, queue use.

Read only, from three lists (:class:`infra.governance.live.QueueApi`): the Nodes, Kueue's ClusterQueues and its
LocalQueues. Everything a node's state says comes from the keys the node agent and the node groups set
(:mod:`openpod_core.labels`):

* the group: label ``openpod.io/instance-group`` (a node without it, or of a group the spec lacks, is shown as such);
* health: label ``openpod.io/node-health-status`` (Schedulable, UnschedulablePendingReboot,
  UnschedulablePendingReplacement), condition ``AcceleratorHealthy``, the kubelet's ``Ready`` condition; a node
  the agent does not watch (neither accelerated nor EFA: the system group) has no health label and is Ready
  when the kubelet says so;
* held back: the taints ``openpod.io/health-check`` (start-up deep check), ``openpod.io/pair-check`` (two-node
  check, pending | failed), ``openpod.io/unhealthy``, ``openpod.io/hot-spare`` (with label ``openpod.io/hot-spare``),
  and ``spec.unschedulable`` (cordoned, e.g. by ``openpod drain`` or the controller's drain).

Queue use is :func:`infra.governance.live.queue_usage` (ClusterQueue status) plus each team's LocalQueue status
(``pendingWorkloads``, ``reservingWorkloads``, ``admittedWorkloads``: Kueue v0.19.2
apis/kueue/v1beta2/localqueue_types.go, the CRD's status schema in config/components/crd/bases).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from infra.governance import live
from infra.governance.apply import ClusterError
from infra.spec.cluster import ClusterSpec
from openpod_core import labels

# A node's state, first match wins (the order says what matters most to an operator).
NOT_READY = "NotReady"
CHECKING = "HealthCheck"
PAIR_CHECK = "PairCheck"
HOT_SPARE = "HotSpare"
CORDONED = "Cordoned"
READY = "Ready"               # a node the node agent does not watch (no accelerator, no EFA: the system group)
NO_LABEL = "Unlabelled"       # a node the agent watches but has not labelled (yet): its pod not running there
NO_GROUP = "-"                # a node without the instance-group label, or of a group the spec does not have

OPENPOD_TAINTS = (labels.STARTUP_TAINT, labels.PAIR_CHECK_TAINT, labels.UNHEALTHY_TAINT, labels.HOT_SPARE_TAINT,
                  labels.SYSTEM_TAINT)


@dataclass(frozen=True)
class NodeStatus:
    name: str
    group: str
    instance_type: str
    ready: bool
    health: str | None            # the health label's value, None when absent
    accelerator_healthy: str | None   # the AcceleratorHealthy condition's status (True/False/Unknown), None: absent
    hot_spare: bool
    cordoned: bool
    taints: tuple[str, ...]       # the platform's taints, as key=value:effect
    state: str


def _cond(node: dict[str, Any], type_: str) -> str | None:
    return next((c.get("status") for c in node.get("status", {}).get("conditions") or [] if c.get("type") == type_),
                None)


def node_status(node: dict[str, Any], groups: set[str]) -> NodeStatus:
    meta = node.get("metadata", {})
    lab = meta.get("labels") or {}
    spec = node.get("spec") or {}
    taints = {t.get("key"): t for t in spec.get("taints") or []}
    ours = tuple(f"{k}={taints[k].get('value', '')}:{taints[k].get('effect', '')}" for k in OPENPOD_TAINTS
                 if k in taints)
    group = lab.get(labels.INSTANCE_GROUP, "")
    ready = _cond(node, "Ready") == "True"
    health = lab.get(labels.HEALTH_STATUS)
    hot_spare = lab.get(labels.HOT_SPARE) == "true" or labels.HOT_SPARE_TAINT in taints
    cordoned = bool(spec.get("unschedulable"))
    if not ready:
        state = NOT_READY
    elif health in (labels.HEALTH_PENDING_REBOOT, labels.HEALTH_PENDING_REPLACEMENT):
        state = health
    elif labels.STARTUP_TAINT in taints:
        state = CHECKING
    elif labels.PAIR_CHECK_TAINT in taints:
        state = f"{PAIR_CHECK}({taints[labels.PAIR_CHECK_TAINT].get('value', '')})"
    elif cordoned:
        state = CORDONED
    elif hot_spare:
        state = HOT_SPARE
    elif health is None:
        # the agent's DaemonSet selects accelerated or EFA nodes only (node_agent/deploy.py, its node affinity)
        watched = lab.get(labels.ACCELERATOR) in ("nvidia", "neuron") or lab.get(labels.EFA) == "true"
        state = NO_LABEL if watched else READY
    else:
        state = health
    return NodeStatus(meta.get("name", ""), group if group in groups else NO_GROUP,
                      lab.get(labels.INSTANCE_TYPE, ""), ready, health, _cond(node, labels.HEALTH_CONDITION),
                      hot_spare, cordoned, ours, state)


@dataclass
class GroupStatus:
    name: str
    instance_type: str
    min_size: int
    desired_size: int
    max_size: int
    hot_spares_wanted: int
    nodes: int = 0
    ready: int = 0
    schedulable: int = 0
    hot_spares: int = 0
    checking: int = 0             # start-up deep check or two-node check
    pending_reboot: int = 0
    pending_replacement: int = 0
    other: int = 0                # not ready, cordoned, unlabelled
    node_names: list[str] = field(default_factory=list)


def group_status(spec: ClusterSpec, nodes: list[NodeStatus]) -> list[GroupStatus]:
    out = {g.name: GroupStatus(g.name, g.instance_type, g.min_size, g.desired_size, g.max_size, g.hot_spares)
           for g in spec.instance_groups}
    for n in nodes:
        if n.group == NO_GROUP:
            g = out.setdefault(NO_GROUP, GroupStatus(NO_GROUP, "", 0, 0, 0, 0))
        else:
            g = out[n.group]
        g.nodes += 1
        g.ready += n.ready
        g.node_names.append(n.name)
        if n.state in (labels.HEALTH_SCHEDULABLE, READY):
            g.schedulable += 1
        elif n.state == HOT_SPARE:
            g.hot_spares += 1
        elif n.state == CHECKING or n.state.startswith(PAIR_CHECK):
            g.checking += 1
        elif n.state == labels.HEALTH_PENDING_REBOOT:
            g.pending_reboot += 1
        elif n.state == labels.HEALTH_PENDING_REPLACEMENT:
            g.pending_replacement += 1
        else:
            g.other += 1
    return list(out.values())


@dataclass(frozen=True)
class LocalQueueStatus:
    namespace: str
    name: str
    cluster_queue: str
    pending: int
    reserving: int
    admitted: int


def local_queue_status(objs: list[dict[str, Any]]) -> list[LocalQueueStatus]:
    out = []
    for o in sorted(objs, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])):
        st = o.get("status") or {}
        out.append(LocalQueueStatus(o["metadata"].get("namespace", ""), o["metadata"]["name"],
                                    (o.get("spec") or {}).get("clusterQueue", ""), int(st.get("pendingWorkloads", 0)),
                                    int(st.get("reservingWorkloads", 0)), int(st.get("admittedWorkloads", 0))))
    return out


@dataclass
class ClusterStatus:
    groups: list[GroupStatus]
    nodes: list[NodeStatus]
    usage: list[live.QueueUsage] | None       # None: the queues could not be read (``queue_error`` says why)
    local_queues: list[LocalQueueStatus] | None
    queue_error: str | None = None

    def as_data(self) -> dict[str, Any]:
        return {
            "groups": [{k: v for k, v in asdict(g).items() if k != "node_names"} for g in self.groups],
            "nodes": [{**asdict(n), "taints": list(n.taints)} for n in self.nodes],
            "queues": None if self.usage is None else [
                {"team": u.team, "group": u.group, "nominal_nodes": u.nominal, "in_use_nodes": u.in_use,
                 "borrowed_nodes": u.borrowed, "idle_nodes": u.idle, "admitted": u.admitted, "pending": u.pending}
                for u in self.usage],
            "local_queues": None if self.local_queues is None else [asdict(q) for q in self.local_queues],
            "queue_error": self.queue_error,
        }


def read_status(spec: ClusterSpec, api: live.QueueApi) -> ClusterStatus:
    """Nodes first (an unreachable cluster raises :class:`ClusterError` here); the queues after, and a cluster
    without Kueue's API (or one that refuses the read) still shows its nodes, with ``queue_error`` saying why."""
    groups = {g.name for g in spec.instance_groups}
    nodes = sorted((node_status(n, groups) for n in api.nodes()), key=lambda n: (n.group, n.name))
    try:
        usage = live.queue_usage(spec, api.cluster_queues())
        lqs = local_queue_status(api.local_queues())
        error = None
    except ClusterError as e:
        usage, lqs, error = None, None, str(e)
    return ClusterStatus(group_status(spec, nodes), nodes, usage, lqs, error)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def render(spec: ClusterSpec, st: ClusterStatus) -> list[str]:
    rows = [("GROUP", "TYPE", "NODES", "DESIRED", "READY", "SCHEDULABLE", "HOT SPARES", "CHECKING", "REBOOT",
             "REPLACE", "OTHER")]
    for g in st.groups:
        rows.append((g.name, g.instance_type or "-", str(g.nodes),
                     f"{g.desired_size} ({g.min_size}-{g.max_size})" if g.name != NO_GROUP else "-", str(g.ready),
                     str(g.schedulable), f"{g.hot_spares}/{g.hot_spares_wanted}", str(g.checking),
                     str(g.pending_reboot), str(g.pending_replacement), str(g.other)))
    lines = _table(rows)
    lines.append("")
    if st.nodes:
        rows = [("NODE", "GROUP", "TYPE", "READY", "STATE", "HEALTH LABEL", "ACCELERATORS", "TAINTS")]
        for n in st.nodes:
            rows.append((n.name, n.group, n.instance_type or "-", "yes" if n.ready else "no", n.state,
                         n.health or "-", {"True": "healthy", "False": "unhealthy"}.get(n.accelerator_healthy or "",
                                                                                     n.accelerator_healthy or "-"),
                         ",".join(t.removeprefix(f"{labels.DOMAIN}/") for t in n.taints) or "-"))
        lines += _table(rows)
    else:
        lines.append("no nodes")
    lines.append("")
    if st.usage is None:
        lines.append(f"queues: not read ({st.queue_error})")
    else:
        lines += live.render_usage(spec, st.usage)[:len(st.usage) + 1]   # its table, not its notes
        if st.local_queues:
            lines.append("")
            lines += _table([("NAMESPACE", "LOCAL QUEUE", "CLUSTER QUEUE", "PENDING", "RESERVING", "ADMITTED")] + [
                (q.namespace, q.name, q.cluster_queue, str(q.pending), str(q.reserving), str(q.admitted))
                for q in st.local_queues])
    lines.append("")
    lines.append("HOT SPARES present/wanted; CHECKING = start-up deep check or two-node check; REBOOT / REPLACE = "
                 "the node agent's health label UnschedulablePending*; OTHER = not ready, cordoned or unlabelled; "
                 "queue figures in nodes (IN USE = quota admitted jobs hold)")
    return lines
