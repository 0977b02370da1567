"""The system group: where the platform's controllers run, its taint, and the placement every controller takes.

The system groups are the CPU groups that always have nodes (``min_size >= 1``) and on which no team has quota.
They carry ``CriticalAddonsOnly=true:NoSchedule`` (``openpod_core.labels.SYSTEM_TAINT``), so a pod that does
not tolerate it - any pod outside the platform's own, whoever creates it - is never scheduled there; team
namespaces may not tolerate it (``admission.py``). Each controller the platform installs selects the first
system group (``system_node_selector``) and tolerates its taints (``system_tolerations``).
"""

from __future__ import annotations

from infra.spec.cluster import ClusterSpec
from infra.spec.groups import InstanceGroupSpec, Taint, TaintEffect
from openpod_core import labels

SYSTEM_TAINT = Taint(key=labels.SYSTEM_TAINT, value=labels.SYSTEM_TAINT_VALUE, effect=TaintEffect.NO_SCHEDULE)


def system_groups(spec: ClusterSpec) -> list[InstanceGroupSpec]:
    """CPU groups with ``min_size >= 1`` that no team has quota on, in spec order."""
    queued = {g for t in spec.teams for g in t.quotas}
    return [g for g in spec.instance_groups
            if not g.type.is_accelerated and g.min_size >= 1 and g.name not in queued]


def is_system_group(spec: ClusterSpec, group: InstanceGroupSpec) -> bool:
    return any(g.name == group.name for g in system_groups(spec))


def group_taints(spec: ClusterSpec, group: InstanceGroupSpec) -> list[Taint]:
    """The taints a group's nodes carry from the spec: its own, and the system taint on a system group."""
    return [*group.taints, SYSTEM_TAINT] if is_system_group(spec, group) else list(group.taints)


def _controller_group(spec: ClusterSpec) -> InstanceGroupSpec | None:
    groups = system_groups(spec)
    if groups:
        return groups[0]
    # No group without team quota: the first always-on CPU group (untainted: it is a team's).
    return next((g for g in spec.instance_groups if not g.type.is_accelerated and g.min_size >= 1), None)


def system_node_selector(spec: ClusterSpec) -> dict[str, str]:
    """The controllers' nodeSelector: the first system group."""
    g = _controller_group(spec)
    return {labels.INSTANCE_GROUP: g.name} if g is not None else {}


def toleration(t: Taint) -> dict[str, str]:
    """The toleration of exactly one taint (key, value and effect)."""
    return {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect.value}


def system_tolerations(spec: ClusterSpec) -> list[dict[str, str]]:
    """Tolerations of every taint of the group ``system_node_selector`` selects (none when there is none)."""
    g = _controller_group(spec)
    return [toleration(t) for t in group_taints(spec, g)] if g is not None else []
