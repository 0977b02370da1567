"""Team quotas backed by nodes that exist: a group runs ``desired_size`` nodes, not ``max_size``.

The platform adds no nodes on demand (no cluster autoscaler; an EKS managed node group keeps ``desiredSize``
until someone changes it: https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html, checked
2026-11-25), and the remediation controller holds ``hot_spares`` out of every quota. So the nodes teams can be
admitted on are ``desired_size - hot_spares``; quota beyond that is a promise Kueue keeps (it admits) and the
scheduler cannot (pods stay Pending while holding the quota).

A group at ``desired_size: 0`` is the documented scale-from-zero choice (capacity blocks before their window, a
data-preparation group an operator raises when needed): its quotas are reported as a warning, not an error.

Duck-typed over the cluster spec so ``infra/spec/rules.py`` calls it without an import circle.
"""

from __future__ import annotations


def backed_nodes(group) -> int:
    """Nodes of ``group`` teams can be admitted on: desired size less the hot spares."""
    return max(0, group.desired_size - group.hot_spares)


def _over(spec):
    """(group, team crossing the line, total quota) for every group whose teams' quotas exceed its backed nodes."""
    for g in spec.instance_groups:
        total, first = 0, None
        for t in spec.teams:
            q = t.quotas.get(g.name)
            if q is None:
                continue
            total += q.nodes
            if first is None and total > backed_nodes(g):
                first = t.name
        if first is not None:
            yield g, first, total


def _line(g, team: str, total: int) -> tuple[str, str]:
    return (f"teams.{team}.quotas.{g.name}.nodes",
            f"team {team}'s quota of {g.name} nodes is not backed: the teams' quotas on {g.name} add up to {total} "
            f"nodes but the group runs desired_size {g.desired_size} - hot_spares {g.hot_spares} = "
            f"{backed_nodes(g)} (nothing adds nodes beyond desired_size); lower the quotas or raise desired_size")


def unbacked_quotas(spec) -> list[tuple[str, str]]:
    """(path, message): one line per group whose quotas exceed its backed nodes, naming the first team that does."""
    return [_line(g, team, total) for g, team, total in _over(spec) if g.desired_size > 0]


def scale_from_zero_quotas(spec) -> list[tuple[str, str]]:
    """The same for groups at desired_size 0 (a documented choice): warnings."""
    return [_line(g, team, total) for g, team, total in _over(spec) if g.desired_size == 0]
