"""Read-only AWS checks before a deploy (``openpod preflight``) and Capacity Block offerings (``openpod capacity``).

Preflight asks the caller's account, with read-only calls, what a deploy would otherwise find out
half-way through CloudFormation: is each instance type offered in its AZ, do the on-demand vCPU
quotas cover the groups at ``max_size``, does each reservation or capacity block exist and match
its group (its zone, a Local Zone included, against the group's), is each pinned add-on version
available for the cluster's Kubernetes version, do the IAM principals named in access entries exist,
and are the cluster's AZs outside the AZ IDs EKS refuses. Every failure is one line naming the spec field.

``openpod capacity`` lists the Capacity Block offerings that would fit a group and prints the spec
lines to use once one is bought.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable, Iterator


from infra.spec.groups import CapacityType, InstanceGroupSpec
from infra.spec.cluster import ClusterSpec
from openpod_core import local_zones
from openpod_core.facts.register import value as fact_value

# Service Quotas codes of EC2's "Running On-Demand <family> instances" vCPU quotas.
# Source: https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html (checked 2026-11-23).
QUOTAS: dict[str, tuple[str, str]] = {
    "P": ("L-417A185B", "Running On-Demand P instances"),
    "Trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
    "G": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "Standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
}
# A reservation a group can launch into now or later.
USABLE_RESERVATION_STATES = {"active", "scheduled", "payment-pending"}


def quota_family(instance_type: str) -> str:
    """The on-demand vCPU quota family of an instance type (by its family prefix)."""
    family = instance_type.split(".")[0]
    if family.startswith("trn"):
        return "Trn"
    if family.startswith("p"):
        return "P"
    if family.startswith("g") or family.startswith("vt"):
        return "G"
    return "Standard"


@dataclass(frozen=True)
class Finding:
    """One preflight result: ``ok`` or not, the check's name and a one-line message naming the spec field."""

    ok: bool
    check: str
    message: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.check:<12} {self.message}"


@dataclass
class Clients:
    """The boto3 clients preflight reads through (all calls read-only)."""

    ec2: Any
    eks: Any
    quotas: Any
    iam: Any

    @classmethod
    def for_region(cls, region: str, session=None) -> "Clients":
        import boto3

        s = session or boto3.session.Session()
        return cls(ec2=s.client("ec2", region_name=region), eks=s.client("eks", region_name=region),
                   quotas=s.client("service-quotas", region_name=region), iam=s.client("iam", region_name=region))


def _created(spec: ClusterSpec) -> list[tuple[int, InstanceGroupSpec]]:
    return [(i, g) for i, g in enumerate(spec.instance_groups) if not g.awaits_capacity_block]


def _at(i: int, g: InstanceGroupSpec) -> str:
    return f"instance_groups[{i}] ({g.name})"


def _azs(spec: ClusterSpec, g: InstanceGroupSpec) -> list[str]:
    return [spec.group_az(g)] if (g.type.efa_supported or g.availability_zone) else list(spec.availability_zones)


def check_offerings(spec: ClusterSpec, ec2) -> Iterator[Finding]:
    groups = [(i, g) for i, g in _created(spec) if g.capacity.type is CapacityType.ON_DEMAND]
    if not groups:
        return
    offered: set[tuple[str, str]] = set()
    kwargs = {"LocationType": "availability-zone",
              "Filters": [{"Name": "instance-type", "Values": sorted({g.instance_type for _, g in groups})}]}
    while True:
        page = ec2.describe_instance_type_offerings(**kwargs)
        offered |= {(o["InstanceType"], o["Location"]) for o in page.get("InstanceTypeOfferings", [])}
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    for i, g in groups:
        for az in _azs(spec, g):
            if (g.instance_type, az) in offered:
                yield Finding(True, "offering", f"{_at(i, g)}: {g.instance_type} offered in {az}")
            else:
                yield Finding(False, "offering", f"{_at(i, g)}.instance_type: {g.instance_type} is not offered "
                                                 f"in {az} ({spec.region}); pick another AZ or a reservation")


def check_quotas(spec: ClusterSpec, quotas) -> Iterator[Finding]:
    need: dict[str, list[tuple[str, int]]] = {}
    for _, g in _created(spec):
        if g.capacity.type in (CapacityType.CAPACITY_BLOCK, CapacityType.SPOT):
            continue  # blocks are paid capacity outside the on-demand quotas; Spot has quotas of its own
        need.setdefault(quota_family(g.instance_type), []).append((g.name, g.max_size * g.type.vcpus))
    for family, groups in sorted(need.items()):
        code, name = QUOTAS[family]
        total = sum(v for _, v in groups)
        value = quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
        who = ", ".join(f"{n} {v}" for n, v in groups)
        if total <= value:
            yield Finding(True, "quota", f"{code} {name}: {total:.0f} vCPUs needed at max_size ({who}) "
                                         f"<= quota {value:.0f}")
        else:
            yield Finding(False, "quota", f"instance_groups ({', '.join(n for n, _ in groups)}).max_size: "
                                          f"{total:.0f} vCPUs at max_size exceed quota {code} ({name}) of "
                                          f"{value:.0f} in {spec.region}; request an increase or lower max_size")


def check_reservations(spec: ClusterSpec, ec2) -> Iterator[Finding]:
    groups = [(i, g) for i, g in _created(spec) if g.capacity.reservation_id]
    if not groups:
        return
    found = {}
    for i, g in groups:
        try:
            page = ec2.describe_capacity_reservations(CapacityReservationIds=[g.capacity.reservation_id])
            found.update({r["CapacityReservationId"]: r for r in page.get("CapacityReservations", [])})
        except Exception as e:  # botocore ClientError: InvalidCapacityReservationId.NotFound, ...
            if "NotFound" not in str(e) and "Malformed" not in str(e):
                raise
    for i, g in groups:
        at, rid = _at(i, g), g.capacity.reservation_id
        r = found.get(rid)
        if r is None:
            yield Finding(False, "reservation", f"{at}.capacity.reservation_id: {rid} not found in {spec.region}")
            continue
        problems = []
        if r["InstanceType"] != g.instance_type:
            problems.append(f"is for {r['InstanceType']}, the group runs {g.instance_type}")
        if r["AvailabilityZone"] != spec.group_az(g):
            problems.append(f"is in {r['AvailabilityZone']}, the group launches in {spec.group_az(g)}")
        want_id = spec.availability_zone_ids.get(spec.group_az(g))
        if want_id and r.get("AvailabilityZoneId") and r["AvailabilityZoneId"] != want_id:
            problems.append(f"is in zone ID {r['AvailabilityZoneId']}, availability_zone_ids says "
                            f"{spec.group_az(g)} is {want_id}")
        if r["TotalInstanceCount"] < g.max_size:
            problems.append(f"holds {r['TotalInstanceCount']} instances, max_size is {g.max_size}")
        if r["State"] not in USABLE_RESERVATION_STATES:
            problems.append(f"is {r['State']}")
        is_block = r.get("ReservationType") == "capacity-block"
        if is_block != (g.capacity.type is CapacityType.CAPACITY_BLOCK):
            problems.append(f"is {'a capacity block' if is_block else 'an on-demand reservation'}, "
                            f"capacity.type is {g.capacity.type.value}")
        if problems:
            yield Finding(False, "reservation", f"{at}.capacity.reservation_id: {rid} " + "; ".join(problems))
        else:
            window = f", {r['StartDate']:%Y-%m-%d %H:%M} to {r['EndDate']:%Y-%m-%d %H:%M} UTC" if is_block else ""
            yield Finding(True, "reservation", f"{at}: {rid} {r['State']}, {r['TotalInstanceCount']} x "
                                               f"{r['InstanceType']} in {r['AvailabilityZone']}{window}")


def check_addons(spec: ClusterSpec, eks) -> Iterator[Finding]:
    k8s = spec.eks.version
    for name, version in sorted(spec.eks.addon_versions.items()):
        page = eks.describe_addon_versions(addonName=name, kubernetesVersion=k8s)
        available = {v["addonVersion"] for a in page.get("addons", []) for v in a.get("addonVersions", [])}
        if version in available:
            yield Finding(True, "add-on", f"{name} {version} available for Kubernetes {k8s}")
        else:
            newest = ", ".join(sorted(available, reverse=True)[:3]) or "none"
            yield Finding(False, "add-on", f"eks.addons.{name}: {version} is not available for Kubernetes {k8s} "
                                           f"(available: {newest})")


def check_principals(spec: ClusterSpec, iam) -> Iterator[Finding]:
    for i, entry in enumerate(spec.eks.access_entries):
        arn = entry.principal_arn
        kind, _, name = arn.split(":", 5)[-1].partition("/")
        name = name.rsplit("/", 1)[-1]
        try:
            (iam.get_role(RoleName=name) if kind == "role" else iam.get_user(UserName=name))
            yield Finding(True, "principal", f"{arn} exists")
        except iam.exceptions.NoSuchEntityException:
            yield Finding(False, "principal", f"eks.access_entries[{i}].principal_arn: {arn} does not exist")


# AZ IDs where EKS does not place a cluster's control plane: its subnets may not be there.
# Source: https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html#network-requirements-subnets
# (fact eks.cluster.refused-zone-ids, checked 2026-11-25).
EKS_REFUSED_ZONE_IDS = {"use1-az3": "us-east-1", "usw1-az2": "us-west-1", "cac1-az3": "ca-central-1"}


def check_cluster_zones(spec: ClusterSpec, ec2) -> Iterator[Finding]:
    """The cluster's AZs (the first ``network.layout_azs``) are not AZ IDs EKS refuses. AZ names map to IDs
    per account, so only the account can say: describe-availability-zones."""
    zones = list(spec.availability_zones[:spec.network.layout_azs or len(spec.availability_zones)])
    if not any(region == spec.region for region in EKS_REFUSED_ZONE_IDS.values()):
        return
    ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones(ZoneNames=zones)["AvailabilityZones"]}
    for i, name in enumerate(zones):
        zone_id = ids.get(name, "?")
        if zone_id in EKS_REFUSED_ZONE_IDS:
            yield Finding(False, "eks-zone", f"availability_zones[{i}]: {name} is {zone_id} in this account, where "
                                             "EKS places no cluster; pick another AZ")
        else:
            yield Finding(True, "eks-zone", f"{name} ({zone_id}) takes EKS cluster subnets")


def check_zone_ids(spec: ClusterSpec, ec2) -> Iterator[Finding]:
    """The spec's ``availability_zone_ids`` are this account's mapping of zone names to IDs (per account: a spec
    written for another account can name the same letters for other zones)."""
    names = sorted(spec.availability_zone_ids)
    if not names:
        return
    page = ec2.describe_availability_zones(ZoneNames=names, AllAvailabilityZones=True)
    ids = {z["ZoneName"]: z["ZoneId"] for z in page.get("AvailabilityZones", [])}
    for name in names:
        want, have = spec.availability_zone_ids[name], ids.get(name)
        if have == want:
            yield Finding(True, "zone-ids", f"{name} is {have} in this account")
        else:
            yield Finding(False, "zone-ids", f"availability_zone_ids.{name}: {want} in the spec, {have or 'no zone'} "
                                             "in this account; reservations and Capacity Blocks are per zone ID: "
                                             "fix the mapping or pick the zone name this account gives that ID")


CHECKS = (("offerings", check_offerings, "ec2"), ("zone ids", check_zone_ids, "ec2"), ("quotas", check_quotas, "quotas"),
          ("reservations", check_reservations, "ec2"), ("add-ons", check_addons, "eks"),
          ("principals", check_principals, "iam"), ("eks zones", check_cluster_zones, "ec2"))


def preflight(spec: ClusterSpec, clients: Clients) -> list[Finding]:
    """Run every check; a check whose AWS call fails becomes one failing finding, never a traceback."""
    out: list[Finding] = []
    for name, check, client in CHECKS:
        try:
            out.extend(check(spec, getattr(clients, client)))
        except Exception as e:  # credentials, throttling, denied: say which check could not run
            out.append(Finding(False, name, f"could not run: {type(e).__name__}: {str(e).splitlines()[0]}"))
    return out


# ----------------------------------------------------------------------------------------- capacity


def capacity_request(g: InstanceGroupSpec, start: dt.datetime, days: int, window_days: int = 14,
                     all_zones: bool = False) -> dict:
    """The DescribeCapacityBlockOfferings parameters for ``g`` (fact ec2.capacity-block-offerings.ultraserver).

    An UltraServer type is asked for by UltraServer (``UltraserverType``, ``UltraserverCount``: ``max_size`` in
    UltraServers), never by instance count (at most 64 per block, fact ec2.capacity-blocks.max-instances: 72
    GB200 instances found nothing). ``AllAvailabilityZones`` also lists Local Zones not opted into; it is set for
    a group placed in a Local Zone, whose blocks are sold there.
    """
    kwargs: dict = dict(InstanceType=g.instance_type, CapacityDurationHours=24 * days,
                        StartDateRange=start, EndDateRange=start + dt.timedelta(days=window_days + days))
    us = g.type.ultraserver
    if us:
        kwargs.update(UltraserverType=us.name, UltraserverCount=max(1, g.max_size // us.instances))
    else:
        kwargs["InstanceCount"] = min(g.max_size, int(fact_value("ec2.capacity-blocks.max-instances")))
    if all_zones or (g.availability_zone and local_zones.get(g.availability_zone) is not None):
        kwargs["AllAvailabilityZones"] = True
    return kwargs


def capacity_offerings(ec2, g: InstanceGroupSpec, start: dt.datetime, days: int,
                       window_days: int = 14, all_zones: bool = False) -> list[dict]:
    """Capacity Block offerings that fit the group (:func:`capacity_request`), starting in the window."""
    kwargs = capacity_request(g, start, days, window_days, all_zones)
    out: list[dict] = []
    while True:
        page = ec2.describe_capacity_block_offerings(**kwargs)
        out.extend(page.get("CapacityBlockOfferings", []))
        if not page.get("NextToken"):
            return sorted(out, key=lambda o: (o["StartDate"], float(o.get("UpfrontFee") or 0)))
        kwargs["NextToken"] = page["NextToken"]


def _size(g: InstanceGroupSpec) -> str:
    us = g.type.ultraserver
    if us:
        return f"{max(1, g.max_size // us.instances)} x {us.name} ({g.max_size} x {g.instance_type})"
    return f"{g.max_size} x {g.instance_type}"


def opt_in_hint(spec: ClusterSpec, g: InstanceGroupSpec) -> list[str]:
    """How to opt in to the Local Zone a group (or its type) is sold in; EC2 lists only opted-in zones."""
    zones = [z for z in local_zones.of_region(spec.region)
             if z.name == g.availability_zone or g.type.name in z.offers]
    return [f"{g.instance_type} is sold in Local Zone {z.name}; opt in to its group first (no charge): aws ec2 "
            f"modify-availability-zone-group --region {spec.region} --group-name {z.group} --opt-in-status opted-in"
            for z in zones]


def render_offerings(spec: ClusterSpec, g: InstanceGroupSpec, offers: Iterable[dict]) -> list[str]:
    offers = list(offers)
    if not offers:
        return [f"no Capacity Block offerings for {_size(g)} in {spec.region} in that window", *opt_in_hint(spec, g)]
    lines = [f"{'offering':<28} {'az':<14} {'start (UTC)':<17} {'end (UTC)':<17} {'count':>5} {'upfront':>14}"]
    for o in offers:
        count = (f"{o['UltraserverCount']}x{o['UltraserverType']}" if o.get("UltraserverType")
                 else str(o["InstanceCount"]))
        lines.append(f"{o['CapacityBlockOfferingId']:<28} {o['AvailabilityZone']:<14} "
                     f"{o['StartDate']:%Y-%m-%d %H:%M} {o['EndDate']:%Y-%m-%d %H:%M} {count:>5} "
                     f"{o.get('UpfrontFee', '?'):>10} {o.get('CurrencyCode', '')}")
    first = offers[0]
    if local_zones.get(first["AvailabilityZone"]) is not None:
        lines += ["", *opt_in_hint(spec, g)]
    lines += ["", "buy one (this charges the upfront fee):",
              f"  aws ec2 purchase-capacity-block --region {spec.region} --instance-platform Linux/UNIX "
              f"--capacity-block-offering-id {first['CapacityBlockOfferingId']}",
              "then put the CapacityReservationId it returns in the spec and deploy:",
              f"  - name: {g.name}",
              f"    instance_type: {g.instance_type}",
              f"    availability_zone: {first['AvailabilityZone']}",
              "    capacity:",
              "      type: capacity-block",
              "      reservation_id: cr-...        # from purchase-capacity-block",
              "    min_size: 0",
              "    desired_size: 0                 # raise when the block starts, lower before it ends"]
    return lines


def offering_data(o: dict) -> dict:
    """One Capacity Block offering as data (times in ISO 8601 UTC; the fee as EC2 gives it, a string)."""
    return {"id": o["CapacityBlockOfferingId"], "availability_zone": o["AvailabilityZone"],
            "start": o["StartDate"].isoformat(), "end": o["EndDate"].isoformat(),
            "instance_count": o["InstanceCount"], "ultraserver_type": o.get("UltraserverType"),
            "ultraserver_count": o.get("UltraserverCount"), "upfront_fee": o.get("UpfrontFee"),
            "currency": o.get("CurrencyCode")}
