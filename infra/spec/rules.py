"""The rules that relate several fields of a spec (AZs, reservations, UltraServer sizes, quotas, devices): each
``_check_*`` yields problems, so every problem is reported at once; :data:`CHECKS` lists them for
:func:`infra.spec.loading.parse_spec`. Field-level rules live on the models."""

from __future__ import annotations

import re
from typing import Iterator

from infra.spec import quota_backing
from infra.spec.base import LABEL_KEY, Problem
from infra.spec.cluster import ClusterSpec
from infra.spec.eks import EKS_VERSIONS
from infra.spec.groups import CapacityType
from infra.spec.teams import RESERVED_NAMESPACES, RESERVED_PREFIXES, reserved_name
from openpod_core import accelerator_stack, instance_regions, instance_types, local_zones, regions
from openpod_core.facts.register import value as fact_value


def _dupes(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return sorted({i for i in items if i in seen or seen.add(i)})  # type: ignore[func-returns-value]


def _check_azs(spec: ClusterSpec) -> Iterator[Problem]:
    if spec.region not in regions.REGIONS:
        # facts: aws.regions
        yield Problem("region", f"{spec.region!r} is not an AWS Region (openpod_core/regions.py lists "
                                f"{len(regions.REGIONS)}, e.g. us-east-1, eu-west-1, ap-northeast-1)")
        return
    letters = regions.AZ_LETTERS.get(spec.region)
    for i, az in enumerate(spec.availability_zones):
        if not az.startswith(spec.region) or not re.fullmatch(r"[a-z]", az[len(spec.region):]):
            yield Problem(f"availability_zones[{i}]", f"{az!r} is not an AZ of region {spec.region} "
                                                      f"(expected e.g. {spec.region}a)")
        elif letters and az[-1] not in letters:
            # facts: ec2.az-letters.moto
            yield Problem(f"availability_zones[{i}]", f"{az!r}: region {spec.region} has no zone {az[-1]!r}; its "
                                                      f"zones are {', '.join(spec.region + c for c in letters)}")
    for d in _dupes(spec.availability_zones):
        yield Problem("availability_zones", f"{d!r} listed twice")
    zones = set(spec.availability_zones) | {g.availability_zone for g in spec.instance_groups if g.availability_zone}
    for name, zone_id in spec.availability_zone_ids.items():
        at = f"availability_zone_ids.{name}"
        if name not in zones:
            yield Problem(at, f"{name!r} is none of the spec's zones ({', '.join(sorted(zones))})")
        if not ZONE_ID.match(zone_id):
            yield Problem(at, f"{zone_id!r} is not a zone ID; allowed: IDs such as use1-az6 or use1-dfw2-az1 "
                              "(aws ec2 describe-availability-zones --query 'AvailabilityZones[].[ZoneName,ZoneId]')")
        elif not zone_id.startswith(regions.ZONE_ID_PREFIX.get(spec.region, "")):
            yield Problem(at, f"{zone_id!r} is not a zone ID of {spec.region} (they start "
                              f"{regions.ZONE_ID_PREFIX[spec.region]}-)")
    for d in _dupes(list(spec.availability_zone_ids.values())):
        yield Problem("availability_zone_ids", f"{d!r} is given for two zone names; each name is one zone")
    n = spec.network.layout_azs
    if n is not None and not 2 <= n <= len(spec.availability_zones):
        yield Problem("network.layout_azs", f"{n} must be 2..{len(spec.availability_zones)}: the number of the "
                                            "first availability_zones the subnet layout was made for")
    if spec.storage.fsx.availability_zone and spec.storage.fsx.availability_zone not in spec.availability_zones:
        yield Problem("storage.fsx.availability_zone", f"{spec.storage.fsx.availability_zone!r} is not one of "
                                                       f"availability_zones ({', '.join(spec.availability_zones)})")


ZONE_ID = re.compile(r"^[a-z]+[0-9]+(-[a-z]+[0-9]+)?-az[0-9]+$")


def _check_groups(spec: ClusterSpec) -> Iterator[Problem]:
    quoted = sorted({g for t in spec.teams for g in t.quotas})
    for d in _dupes([g.name for g in spec.instance_groups]):
        yield Problem("instance_groups", f"duplicate group name {d!r}; names must be unique")
    if not any(not g.type.is_accelerated and g.min_size >= 1 for g in spec.instance_groups):
        yield Problem("instance_groups", "needs a CPU system group with min_size >= 1 "
                                         "(CoreDNS, Kueue and the remediation controller run there)")
    elif not any(not g.type.is_accelerated and g.min_size >= 1 and g.name not in quoted
                 for g in spec.instance_groups):   # the system group (infra/governance/system_group.py)
        yield Problem("teams", f"team quotas on {', '.join(quoted)} leave no system group: the platform's "
                               "controllers need a CPU group with min_size >= 1 that no team has quota on; add one "
                               "or remove the team quota from one such group")
    for i, g in enumerate(spec.instance_groups):
        at = f"instance_groups[{i}] ({g.name})"
        if not g.min_size <= g.desired_size <= g.max_size:
            yield Problem(at, f"sizes must satisfy min_size <= desired_size <= max_size "
                              f"(got {g.min_size} <= {g.desired_size} <= {g.max_size})")
        if g.hot_spares > g.max_size:
            yield Problem(f"{at}.hot_spares", f"{g.hot_spares} exceeds max_size {g.max_size}")
        if g.pair_check_image and not g.type.efa_supported:
            yield Problem(f"{at}.pair_check_image", f"{g.instance_type} has no EFA: the two-node check measures EFA "
                                                    "bandwidth; allowed only on EFA groups")
        if g.availability_zone and g.availability_zone not in spec.availability_zones:
            lz = local_zones.get(g.availability_zone)
            known = ", ".join(z.name for z in local_zones.of_region(spec.region))
            if lz is None or lz.parent_region != spec.region:
                yield Problem(f"{at}.availability_zone",
                              f"{g.availability_zone!r} is not one of availability_zones "
                              f"({', '.join(spec.availability_zones)}) nor a Local Zone of {spec.region} "
                              f"(known: {known or 'none'}; openpod_core/local_zones.py)")
            elif g.type.name not in lz.offers:
                yield Problem(f"{at}.availability_zone", f"Local Zone {lz.name} is known to offer "
                                                         f"{', '.join(lz.offers)}, not {g.type.name}")
        if instance_regions.offered_in(g.instance_type, spec.region) is False:
            # facts: ec2.instance-type-offerings.moto
            where = ", ".join(sorted(instance_regions.OFFERED_IN[g.instance_type]))
            yield Problem(f"{at}.instance_type", f"{g.instance_type} is not offered in region {spec.region}; it "
                                                 f"is in {where} (openpod_core/instance_regions.py)")
        block_max = int(fact_value("ec2.capacity-blocks.max-instances"))
        if (g.capacity.type is CapacityType.CAPACITY_BLOCK and not g.type.ultraserver
                and g.max_size > block_max):
            yield Problem(f"{at}.max_size", f"{g.max_size} exceeds {block_max}: a Capacity Block holds at most "
                                            f"{block_max} instances and a group launches into one block")
        if g.type.ultraserver and g.capacity.type is not CapacityType.CAPACITY_BLOCK:
            # facts: ec2.ultraservers.capacity-blocks-only
            yield Problem(f"{at}.capacity.type", f"{g.instance_type} is sold only through EC2 Capacity Blocks "
                                                 f"({g.type.ultraserver.name} UltraServers), not "
                                                 f"{g.capacity.type.value}: use capacity.type capacity-block "
                                                 "(`openpod capacity` lists offerings)")
        if g.capacity.type is CapacityType.CAPACITY_BLOCK and g.min_size:
            # facts: eks.capacity-block-mng - instances run only inside the block's window
            yield Problem(f"{at}.min_size", f"must be 0 for a capacity-block group (got {g.min_size}): its "
                                            "instances can run only while the block is active; raise "
                                            "desired_size when it starts and lower it before it ends")
        if g.uses_reservation:
            if not g.capacity.reservation_id and g.capacity.type is CapacityType.RESERVATION:
                yield Problem(f"{at}.capacity.reservation_id",
                              f"required when capacity.type is {g.capacity.type.value} (e.g. cr-0123456789abcdef0)")
            if not g.availability_zone:
                yield Problem(f"{at}.availability_zone",
                              f"required with capacity.type {g.capacity.type.value}: reservations are AZ-bound")
            if g.placement_group:
                yield Problem(f"{at}.placement_group",
                              "must be false (or unset) with a reservation or capacity block: the reservation "
                              "already fixes placement and a placement group makes launches fail")
        elif g.capacity.reservation_id:
            yield Problem(f"{at}.capacity.reservation_id",
                          "only allowed with capacity.type reservation or capacity-block")
        yield from _spot(at, g)
        if g.capacity.type is CapacityType.CAPACITY_BLOCK and not g.type.is_accelerated:
            yield Problem(f"{at}.capacity.type", f"capacity blocks are for accelerated instances, "
                                                 f"not {g.instance_type}")
        if g.placement_group and not g.type.efa_supported:
            yield Problem(f"{at}.placement_group", f"{g.instance_type} has no EFA; a cluster placement group "
                                                   "only helps EFA groups")
        us = g.type.ultraserver
        if us:
            for field in ("min_size", "desired_size", "max_size", "hot_spares"):
                n = getattr(g, field)
                if n % us.instances:
                    yield Problem(f"{at}.{field}", f"{n} is not a multiple of {us.instances}: {g.instance_type} "
                                                   f"comes in {us.name} UltraServers of {us.instances} instances")
        for j, t in enumerate(g.taints):
            if not LABEL_KEY.match(t.key):
                yield Problem(f"{at}.taints[{j}].key", f"{t.key!r} is not a valid taint key")


# EKS takes 0-20 instanceTypes for a node group with a launch template; Spot capacity is ON_DEMAND | SPOT |
# CAPACITY_BLOCK, one per group (facts eks.nodegroup.spot).
MAX_NODEGROUP_INSTANCE_TYPES = 20


def _spot(at: str, g) -> Iterator[Problem]:
    """A spot group's rules: alternatives only for spot, and each interchangeable with ``instance_type``."""
    alternatives = g.capacity.spot_instance_types
    if g.capacity.type is not CapacityType.SPOT:
        if alternatives:
            yield Problem(f"{at}.capacity.spot_instance_types",
                          f"only with capacity.type spot (it is {g.capacity.type.value}): reservations and capacity "
                          "blocks hold one instance type, and Spot capacity is never a capacity block")
        return
    for d in _dupes(g.instance_types + [t for t in alternatives if t == g.instance_type]):
        yield Problem(f"{at}.capacity.spot_instance_types", f"{d!r} is listed twice (instance_type counts)")
    if len(set(g.instance_types)) > MAX_NODEGROUP_INSTANCE_TYPES:
        yield Problem(f"{at}.capacity.spot_instance_types",
                      f"{len(set(g.instance_types))} instance types; an EKS node group takes at most "
                      f"{MAX_NODEGROUP_INSTANCE_TYPES}")
    t = g.type
    for j, name in enumerate(alternatives):
        o = instance_types.get(name)
        differs = [what for what, a, b in (
            ("accelerators", t.accelerator_count, o.accelerator_count),
            ("accelerator model", t.accelerator_model, o.accelerator_model),
            ("accelerator memory", t.accelerator_memory_gib, o.accelerator_memory_gib),
            ("EFA", t.efa_supported, o.efa_supported), ("CPU architecture", t.arch, o.arch),
            # one launch template holds the EFA interfaces, laid out from instance_type's network cards
            ("EFA interface layout", (t.network_cards, tuple(sorted(t.efa_cards or ()))) if t.efa_supported else None,
             (o.network_cards, tuple(sorted(o.efa_cards or ()))) if o.efa_supported else None)) if a != b]
        if differs:
            yield Problem(f"{at}.capacity.spot_instance_types[{j}]",
                          f"{name} differs from {g.instance_type} in {', '.join(differs)}; every type of a group "
                          "must offer jobs the same resources")


def _check_governance(spec: ClusterSpec) -> Iterator[Problem]:
    for d in _dupes([t.name for t in spec.teams]):
        yield Problem("teams", f"duplicate team name {d!r}")
    for d in _dupes([p.name for p in spec.priorities]):
        yield Problem("priorities", f"duplicate priority name {d!r}")
    for d in _dupes([str(p.value) for p in spec.priorities]):
        yield Problem("priorities", f"two priorities share value {d}; give each a distinct value so "
                                    "preemption order is unambiguous")
    groups = {g.name: g for g in spec.instance_groups}
    given: dict[str, int] = {}
    for i, t in enumerate(spec.teams):
        team_at = f"teams[{i}] ({t.name})"
        data_dir = spec.storage.fsx.data_repository_path.strip("/").split("/")[0]
        if reserved_name(t.name):
            yield Problem(f"{team_at}.name", f"{t.name!r} is reserved (the team name is its namespace); "
                                             f"not allowed: {', '.join(sorted(RESERVED_NAMESPACES))}, "
                                             f"{', '.join(p + '*' for p in RESERVED_PREFIXES)}")
        elif t.name == data_dir:
            yield Problem(f"{team_at}.name", f"{t.name!r} is the FSx data repository directory "
                                             f"(storage.fsx.data_repository_path {spec.storage.fsx.data_repository_path}); "
                                             "the team name is also its FSx directory: choose another name")
        for d in _dupes(list(t.users)):
            yield Problem(f"{team_at}.users", f"{d!r} is listed twice")
        known = [pr.name for pr in spec.priorities]
        for name in t.allowed_priorities or []:
            if name not in known:
                yield Problem(f"{team_at}.allowed_priorities",
                              f"unknown priority {name!r}; priorities are: {', '.join(known)}")
        p = t.preemption
        if spec.queueing.fair_sharing and p.borrow_within_cohort != "Never":
            # kueue@v0.19.2 pkg/scheduler/preemption/preemption.go:155-160, 631-650: fair preemption
            # never reads borrowWithinCohort
            yield Problem(f"{team_at}.preemption.borrow_within_cohort",
                          f"{p.borrow_within_cohort} has no effect with fair sharing on (Kueue's fair-sharing "
                          "preemption ignores borrowWithinCohort); leave it Never, or set queueing.fair_sharing: "
                          "false for classical preemption")
        if t.fair_sharing_weight <= 1e-9:
            # kueue@v0.19.2 pkg/webhooks/common.go:56-57
            yield Problem(f"{team_at}.fair_sharing_weight",
                          f"{t.fair_sharing_weight!r} is too small: Kueue needs a weight above 1e-9 "
                          "(weights are relative: give the other teams larger weights instead)")
        if not spec.queueing.fair_sharing and t.fair_sharing_weight != 1:
            yield Problem(f"{team_at}.fair_sharing_weight",
                          f"{t.fair_sharing_weight:g} has no effect with queueing.fair_sharing false; "
                          "remove it or turn fair sharing on")
        if p.borrow_within_cohort != "Never" and p.reclaim_within_cohort == "Never":
            yield Problem(f"{team_at}.preemption.borrow_within_cohort",
                          "must be Never when reclaim_within_cohort is Never (Kueue rejects the pair)")
        for gname, q in t.quotas.items():
            at = f"{team_at}.quotas.{gname}"
            if gname not in groups:
                yield Problem(at, f"unknown instance group; groups are: {', '.join(groups)}")
                continue
            g = groups[gname]
            if q.nodes > g.schedulable_nodes:
                yield Problem(f"{at}.nodes", f"{q.nodes} exceeds what group {gname} can supply: max_size "
                                             f"{g.max_size} - hot_spares {g.hot_spares} = {g.schedulable_nodes}")
            if q.lending_limit is not None and q.lending_limit > q.nodes:
                yield Problem(f"{at}.lending_limit", f"{q.lending_limit} exceeds the team's nominal quota {q.nodes}")
            if q.borrowing_limit is not None and q.nodes + q.borrowing_limit > g.schedulable_nodes:
                yield Problem(f"{at}.borrowing_limit",
                              f"{q.borrowing_limit} lets the team reach {q.nodes + q.borrowing_limit} nodes, more "
                              f"than group {gname} can supply ({g.schedulable_nodes}); at most "
                              f"{g.schedulable_nodes - q.nodes}")
            given[gname] = given.get(gname, 0) + q.nodes
    for gname, total in given.items():
        g = groups[gname]
        if total > g.schedulable_nodes:
            yield Problem("teams", f"teams' quotas on group {gname} add up to {total} nodes, more than it can supply "
                                   f"({g.schedulable_nodes} = max_size {g.max_size} - hot_spares {g.hot_spares})")


def _check_eks(spec: ClusterSpec) -> Iterator[Problem]:
    for d in _dupes([e.principal_arn for e in spec.eks.access_entries]):
        yield Problem("eks.access_entries", f"{d!r} is listed twice; EKS allows one access entry per principal "
                                            "(give it the broader access)")
    for i, g in enumerate(spec.instance_groups):
        if not accelerator_stack.kubernetes_supports(g.type, spec.eks.version):
            # facts: eks.p6e-gb200 (DRA, hence NVIDIA's IMEX ComputeDomains, needs it)
            allowed = [v for v in EKS_VERSIONS if accelerator_stack.kubernetes_supports(g.type, v)]
            yield Problem("eks.version", f"{spec.eks.version} is too old for instance_groups[{i}] ({g.name}): "
                                         f"{g.instance_type} needs Kubernetes >= "
                                         f"{accelerator_stack.min_kubernetes(g.type)} on EKS (Dynamic Resource "
                                         f"Allocation for NVIDIA's IMEX ComputeDomains); allowed: "
                                         f"{', '.join(allowed)}")


def _check_buckets(spec: ClusterSpec) -> Iterator[Problem]:
    for name in ("datasets", "checkpoints", "logs"):
        b = getattr(spec.storage.buckets, name)
        if b.object_lock_days and not b.versioned:
            yield Problem(f"storage.buckets.{name}.object_lock_days",
                          "Object Lock needs versioning: set versioned: true, or remove object_lock_days")


def _check_backed_quotas(spec: ClusterSpec) -> Iterator[Problem]:
    yield from (Problem(path, msg) for path, msg in quota_backing.unbacked_quotas(spec))


def _check_devices(spec: ClusterSpec) -> Iterator[Problem]:
    # /dev/sdX and /dev/xvdX name the same device: the block device driver may attach one under the other's name
    # (https://docs.aws.amazon.com/ebs/latest/userguide/device_naming.html, checked 2026-11-25)
    for i, g in enumerate(spec.instance_groups):
        for d in _dupes([v.device_name.replace("/dev/xvd", "/dev/sd") for v in g.volumes]):
            yield Problem(f"instance_groups[{i}] ({g.name}).volumes",
                          f"device {d} (or its /dev/xvd name) is listed twice; each volume needs its own device")


CHECKS = (_check_azs, _check_groups, _check_eks, _check_governance, _check_buckets, _check_devices,
          _check_backed_quotas)
