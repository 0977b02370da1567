"""The node agent's drain path: cordon, then evict through the Eviction API (PodDisruptionBudgets honoured).

The remediation controller drains one node before a reboot or a replacement
(:func:`evict_pods`); ``openpod drain --group`` drains a whole instance group before
its node group is upgraded (:func:`drain_group`). An evicted training pod gets SIGTERM
and its grace period: the platform's runtime checkpoints the current step durably and
exits, so the job resumes from that step. Cordoning the whole group first means the
job is stopped once, not once per replaced node (a JobSet recreates every pod when one
fails, and would land again on a not-yet-upgraded node).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from node_agent.kube import Cluster, Eviction
from openpod_core import labels as L

# Set on the nodes drain_group cordoned (and only those), so uncordon_group never
# uncordons a node someone else cordoned - e.g. the remediation controller.
DRAINED_BY = f"{L.DOMAIN}/cordoned-by"


def evict_pods(cluster: Cluster, node: str) -> list[str]:
    """Ask to evict every evictable pod on ``node``; the ``namespace/name`` of those a budget blocks now."""
    blocked = []
    for pod in cluster.list_pods_on_node(node):
        if pod.evictable and cluster.evict_pod(pod.namespace, pod.name) is Eviction.BLOCKED:
            blocked.append(f"{pod.namespace}/{pod.name}")
    return blocked


@dataclass
class GroupDrain:
    group: str
    nodes: list[str]
    remaining: dict[str, list[str]] = field(default_factory=dict)  # node -> pods still there at the end
    seconds: float = 0.0

    @property
    def done(self) -> bool:
        return not any(self.remaining.values())


def drain_group(cluster: Cluster, group: str, *, timeout_s: float, poll_s: float = 5.0,
                progress: Callable[[str], None] = lambda line: None,
                clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                ) -> GroupDrain:
    """Cordon every node of instance group ``group``, then evict until no evictable pod is left or ``timeout_s``.

    Pods are waited for until they are gone, not only until their eviction is accepted: a
    terminating training pod is still writing its checkpoint.
    """
    found = sorted(cluster.list_nodes({L.INSTANCE_GROUP: group}), key=lambda n: n.name)
    nodes = [n.name for n in found]
    out = GroupDrain(group, nodes)
    for n in found:
        if not n.unschedulable:
            cluster.patch_node(n.name, unschedulable=True, annotations={DRAINED_BY: "openpod-drain"})
    progress(f"cordoned {len(nodes)} node(s) of group {group}")
    start = clock()
    while True:
        for name in nodes:
            evict_pods(cluster, name)
            out.remaining[name] = sorted(f"{p.namespace}/{p.name}" for p in cluster.list_pods_on_node(name)
                                         if p.evictable)
        left = sum(len(v) for v in out.remaining.values())
        out.seconds = clock() - start
        if not left:
            progress(f"group {group} drained in {out.seconds:.0f}s")
            return out
        if out.seconds >= timeout_s:
            progress(f"timed out after {out.seconds:.0f}s with {left} pod(s) left")
            return out
        progress(f"{left} pod(s) still on {sum(1 for v in out.remaining.values() if v)} node(s) "
                 f"({out.seconds:.0f}s; evicted pods are checkpointing)")
        sleep(poll_s)


def uncordon_group(cluster: Cluster, group: str) -> list[str]:
    """Undo :func:`drain_group`'s cordon (an upgrade that was called off); the nodes uncordoned.

    Nodes cordoned by anything else (the remediation controller, an operator) stay cordoned.
    """
    nodes = sorted(n.name for n in cluster.list_nodes({L.INSTANCE_GROUP: group})
                   if n.unschedulable and n.annotations.get(DRAINED_BY) == "openpod-drain")
    for name in nodes:
        cluster.patch_node(name, unschedulable=False, annotations={DRAINED_BY: None})
    return nodes
