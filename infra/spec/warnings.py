"""Warnings on a valid spec: sizes that synthesis or a deploy will refuse later, said before anything is built.

A warning is not an error (quotas can be raised); ``openpod validate`` prints each as ``warning: <file>: <line>``
and still exits 0. The resource count per instance group is measured (see :data:`RESOURCES_PER_GROUP`) and a test
synthesizes the examples to keep it true (tests/cdk/test_spec_warnings.py).
"""

from __future__ import annotations

from openpod_core import local_zones
from openpod_core.facts.register import value as fact_value
from infra.spec.groups import CapacityType

# CloudFormation resources one instance group adds to the platform stack: its launch template, its managed node
# group and the Kubernetes manifest of its settings, plus a cluster placement group on EFA groups. Measured
# 2026-11-25 by synthesizing examples/default.yaml with one more group (m7i +3, p5 +4, trn2 +4).
RESOURCES_PER_GROUP = 3
RESOURCES_PER_PLACEMENT_GROUP = 1
# The rest of the stack for examples/default.yaml (171 resources, 11 of them its three created groups'): a floor
# (153 since the dead-man's switch joined the stack: watchdog SNS topic, its policy, its CloudWatch alarm; 160 since
# the control-plane log group is adopted: three SDK calls with a policy each, their function and its role, for
# the one log group resource; 169 since the remediation role names the platform's own Auto Scaling groups, read at
# deploy time by a custom resource, and the FSx free-capacity alarm joined: measured 2026-11-28, 180 in all; 171
# with the Prometheus workspace's two quota alarms, 2026-11-29, 182 in all).
PLATFORM_RESOURCES = 171


def group_resources(g) -> int:
    """CloudFormation resources of instance group ``g`` (0 for a capacity-block group with no block yet)."""
    if g.awaits_capacity_block:
        return 0
    return RESOURCES_PER_GROUP + (RESOURCES_PER_PLACEMENT_GROUP if g.wants_placement_group else 0)


def estimated_resources(spec) -> int:
    return PLATFORM_RESOURCES + sum(group_resources(g) for g in spec.instance_groups)


def warnings_for(spec) -> list[str]:
    out = []
    limit = int(fact_value("cloudformation.max-resources-per-template"))
    n = estimated_resources(spec)
    if n > limit:
        per = ", ".join(sorted({f"{group_resources(g)} per {'EFA ' if g.wants_placement_group else ''}group"
                                for g in spec.instance_groups if group_resources(g)}))
        out.append(f"instance_groups: {len(spec.instance_groups)} groups make about {n} CloudFormation resources "
                   f"({PLATFORM_RESOURCES} for the platform, {per}); one stack holds at most {limit}, so synthesis "
                   "or the deploy will fail: use fewer groups")
    ngs = int(fact_value("eks.quota.managed-node-groups-per-cluster"))
    created = [g for g in spec.instance_groups if not g.awaits_capacity_block]
    if len(created) > ngs:
        out.append(f"instance_groups: {len(created)} managed node groups; EKS's default quota is {ngs} per cluster "
                   "(request an increase of L-6D54EA21 before deploying)")
    nodes = int(fact_value("eks.quota.nodes-per-managed-node-group"))
    for i, g in enumerate(spec.instance_groups):
        if g.max_size > nodes:
            out.append(f"instance_groups[{i}] ({g.name}).max_size: {g.max_size} nodes; EKS's default quota is "
                       f"{nodes} per managed node group (request an increase of L-BD136A63, or split the group)")
    for i, g in enumerate(spec.instance_groups):
        w = _block_zone_warning(spec, i, g)
        if w:
            out.append(w)
        if g.capacity.type is CapacityType.SPOT and len(g.instance_types) < 2:
            # facts: eks.nodegroup.spot ("we recommend specifying multiple values for instanceTypes")
            out.append(f"instance_groups[{i}] ({g.name}).capacity.spot_instance_types: a spot group of one instance "
                       "type draws from few Spot pools and is interrupted together; EKS recommends several types "
                       "(same accelerators, memory, EFA and architecture)")
    return out


def _block_zone_warning(spec, i: int, g) -> str | None:
    """A Capacity Block group placed where no block of its type is sold: its type's blocks are served only from
    the Local Zones that offer it (openpod_core/local_zones.py: P6e-GB200 UltraServer blocks need the Dallas Local
    Zone, fact ec2.p6e-gb200.local-zone). A warning, not an error: the group is declared (quotas and flavors name
    it) and created only once a block id is set, and the table may lag a new offering."""
    if g.capacity.type is not CapacityType.CAPACITY_BLOCK:
        return None
    zones = [z for z in local_zones.LOCAL_ZONES if g.instance_type in z.offers]
    az = spec.group_az(g)
    if not zones or az in {z.name for z in zones}:
        return None
    where = ", ".join(f"{z.name} (parent region {z.parent_region}, zone group {z.group})" for z in zones)
    return (f"instance_groups[{i}] ({g.name}).availability_zone: {az}: Capacity Blocks of {g.instance_type} are "
            f"sold only in {where} (fact ec2.p6e-gb200.local-zone), so no block can serve this group; it stays "
            "declared but is never created")
