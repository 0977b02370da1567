"""The order CloudFormation upgrades the platform in when ``eks.version`` changes, read from the templates.

The order is the templates' own dependency order, which the platform's stack sets on purpose:

1. the control plane (``AWS::EKS::Cluster`` Version, in place; EKS moves one minor version at a time);
2. add-ons at versions for the new version (they reference the cluster, so they follow it; kube-proxy's
   default follows ``eks.version``, ``infra.spec.eks.KUBE_PROXY_ADDON``, and so does CoreDNS's, ``COREDNS_ADDON``);
3. CPU node groups (they depend on the network add-ons), at most ``MaxUnavailable`` nodes at a time;
4. accelerator node groups (they depend on the CPU groups), never force-updated: EKS evicts their pods
   through the Eviction API with PodDisruptionBudgets honoured, as the node agent's drain does, so a
   job gets SIGTERM and its grace period to checkpoint; an eviction a budget forbids fails the update
   instead of killing the job. Draining each group first with ``openpod drain`` (the node agent's
   drain path, :mod:`node_agent.drain`) stops each job once instead of once per replaced node.

Reserved and capacity-block groups update with ``UpdateStrategy: MINIMAL`` (old nodes go before new ones
come: a full reservation has no room to surge); a capacity-block group is upgraded at desired size 0,
in a deploy of its own first. A version update never shares a deploy with a launch-template change.
"""

from __future__ import annotations

import shlex

from openpod_core import labels


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def order(base, head, spec_path: str | None = None) -> list[str]:
    """Upgrade steps, in order, for every cluster whose Kubernetes version changes between the assemblies;
    the commands they name carry ``--spec spec_path`` (as given to ``openpod plan``), so they paste as printed."""
    steps: list[str] = []
    for stack, h_tpl in sorted(head.templates.items()):
        b_res = base.templates.get(stack, {}).get("Resources", {})
        h_res = h_tpl.get("Resources", {})
        for lid, cluster in h_res.items():
            if cluster["Type"] != "AWS::EKS::Cluster" or b_res.get(lid, {}).get("Type") != "AWS::EKS::Cluster":
                continue
            old, new = b_res[lid]["Properties"].get("Version"), cluster["Properties"].get("Version")
            if not old or not new or old == new:
                continue
            steps += _cluster_steps(lid, old, new, b_res, h_res, spec_path)
    return steps


def _cluster_steps(lid: str, old: str, new: str, b_res: dict, h_res: dict, spec_path: str | None = None
                   ) -> list[str]:
    (om, on), (nm, nn) = _minor(old), _minor(new)
    step = f"control plane {lid}: Kubernetes {old} -> {new}, in place"
    if (nm, nn) < (om, on):
        step += " - EKS cannot downgrade a cluster: this update will fail"
    elif nm == om and nn - on > 1:
        step += (f" - EKS upgrades one minor version at a time: deploy {om}.{on + 1} first, then each next "
                 "version")
    out = [step]
    spec = f" --spec {shlex.quote(spec_path)}" if spec_path else ""

    def changed(res: dict, key: str) -> list[tuple[str, dict, object]]:
        return [(k, r, b_res.get(k, {}).get("Properties", {}).get(key)) for k, r in sorted(res.items())
                if b_res.get(k, {}).get("Properties", {}).get(key) != r["Properties"].get(key)]

    addons = [(k, r, before) for k, r, before in changed(
        {k: r for k, r in h_res.items() if r["Type"] == "AWS::EKS::Addon"}, "AddonVersion")]
    if addons:
        out.append("add-ons, after the control plane: " + ", ".join(
            f"{r['Properties']['AddonName']} {before} -> {r['Properties'].get('AddonVersion')}"
            for _, r, before in addons))
    groups = [(k, r) for k, r, _ in changed(
        {k: r for k, r in h_res.items() if r["Type"] == "AWS::EKS::Nodegroup"}, "Version")]
    cpu = [(k, r) for k, r in groups if not _accelerated(r)]
    accel = [(k, r) for k, r in groups if _accelerated(r)]
    if cpu:
        out.append("CPU node groups, after the network add-ons: " + ", ".join(_group(r) for _, r in cpu))
    blocks = [(k, r) for k, r in accel if r["Properties"].get("CapacityType") == "CAPACITY_BLOCK"]
    if blocks:
        out.insert(0, "first, in a deploy of its own: set desired_size 0 on the capacity-block groups (EKS upgrades "
                      "them only at 0: fact eks.capacity-block-mng), then this version, then desired_size back: "
                      + ", ".join(_name(r) for _, r in blocks))
    if accel:
        out.append("accelerator node groups, after the CPU groups, not force-updated (evictions honour "
                   "PodDisruptionBudgets; jobs get SIGTERM and their grace period to checkpoint): "
                   + ", ".join(_group(r) for _, r in accel))
        out.insert(0, "before the deploy, drain the accelerator groups (the node agent's drain path) so each job "
                      "checkpoints and stops once, not once per replaced node: " + "; ".join(
                       f"openpod drain{spec} --group {_name(r)}"
                       for _, r in accel))
    if groups:
        out.append("keep launch-template changes (user data, volumes, instance options) out of this deploy: EKS "
                   "takes a node-group version update alone (fact eks.nodegroup.version-update-alone)")
    stale = [_name(r) for r in h_res.values()
             if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"].get("Version") not in (None, new)]
    if stale:
        out.append(f"warning: node groups not following {new}: {', '.join(stale)}")
    return out


def _accelerated(nodegroup: dict) -> bool:
    return nodegroup["Properties"].get("Labels", {}).get(labels.ACCELERATOR, "none") != "none"


def _name(nodegroup: dict) -> str:
    """The spec's group name: the instance-group label (node groups have CloudFormation-made names)."""
    p = nodegroup["Properties"]
    return str(p.get("Labels", {}).get(labels.INSTANCE_GROUP) or p.get("NodegroupName"))


def _group(nodegroup: dict) -> str:
    p = nodegroup["Properties"]
    config = p.get("UpdateConfig") or {}
    unavailable = config.get("MaxUnavailable")
    minimal = ", old nodes first: MINIMAL" if config.get("UpdateStrategy") == "MINIMAL" else ""
    return f"{_name(nodegroup)} ({unavailable} node(s) at a time{minimal})" if unavailable else _name(nodegroup)
