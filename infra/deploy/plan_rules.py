"""What CloudFormation and the services do to a change, beyond the provider schemas' createOnlyProperties.

Three tables and the service rules ``openpod plan`` applies after the schema diff. Each row names the
fact (``openpod_core.facts``) that holds its source, so the plan can cite it:

- ``UPDATE_REQUIRES``: a property whose documented "Update requires" the schema under-reports: a change
  replaces the resource (``replace``) or makes the update fail (``fail``);
- ``IDENTITY``: properties that fix a physical name or a key the service keeps unique; creating a
  resource (added, or a replacement) while a live one has the same identity fails (CloudFormation
  creates first and deletes the old resources last);
- ``service_failures``: rules of EKS, EC2 and FSx that fail an update CloudFormation itself accepts
  (cluster subnets outside the VPC or AZs it was created in, a subnet re-addressed onto a live range, a
  node-group version change combined with anything else, a capacity-block group upgraded while running,
  a smaller file system, a skipped or backward Kubernetes version).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Callable

from openpod_core.facts.register import fact


@dataclass(frozen=True)
class PropertyRule:
    """A property's documented update behaviour, where the schema's createOnlyProperties do not say it."""

    type: str
    pointer: str          # JSON pointer into the resource, as in the schemas
    verdict: str          # "replace" | "fail"
    fact: str             # key in openpod_core.facts: the source


UPDATE_REQUIRES: tuple[PropertyRule, ...] = (
    PropertyRule("AWS::FSx::FileSystem", "/properties/LustreConfiguration/DeploymentType", "replace",
                 "cfn.fsx.lustre-deployment-type"),
    # FSx takes EFA only at creation (CreateFileSystem has it, UpdateFileSystem does not).
    PropertyRule("AWS::FSx::FileSystem", "/properties/LustreConfiguration/EfaEnabled", "replace",
                 "fsx.lustre.efa-create-only"),
    PropertyRule("AWS::KMS::Key", "/properties/KeySpec", "fail", "cfn.kms.key-spec"),
    PropertyRule("AWS::KMS::Key", "/properties/KeyUsage", "fail", "cfn.kms.key-spec"),
)

# Resource type -> the properties that identify it in its service: a custom physical name (fact
# cfn.custom-name-replacement) or a key the service keeps unique (fact eks.unique-per-cluster). A resource
# created - added, or the new copy of a replaced one - while a live resource has the same identity collides
# with it: CloudFormation deletes the old ones only after the update (fact cfn.replacement-creates-first).
IDENTITY: dict[str, tuple[tuple[str, ...], str]] = {
    "AWS::EKS::Cluster": (("Name",), "cfn.custom-name-replacement"),
    "AWS::EKS::Nodegroup": (("ClusterName", "NodegroupName"), "cfn.custom-name-replacement"),
    "AWS::Logs::LogGroup": (("LogGroupName",), "cfn.custom-name-replacement"),
    "AWS::S3::Bucket": (("BucketName",), "cfn.custom-name-replacement"),
    "AWS::IAM::Role": (("RoleName",), "cfn.custom-name-replacement"),
    "AWS::EC2::LaunchTemplate": (("LaunchTemplateName",), "cfn.custom-name-replacement"),
    "AWS::KMS::Alias": (("AliasName",), "cfn.custom-name-replacement"),
    "AWS::EKS::AccessEntry": (("ClusterName", "PrincipalArn"), "eks.unique-per-cluster"),
    "AWS::EKS::Addon": (("ClusterName", "AddonName"), "eks.unique-per-cluster"),
    "AWS::EKS::PodIdentityAssociation": (("ClusterName", "Namespace", "ServiceAccount"), "eks.unique-per-cluster"),
}


def cite(key: str) -> str:
    """``[fact key: source]`` for a plan line."""
    return f"[{key}: {fact(key).source}]"


def property_rules(type_: str) -> list[PropertyRule]:
    return [r for r in UPDATE_REQUIRES if r.type == type_]


def identity(type_: str, props: dict) -> tuple | None:
    """What identifies a resource of ``type_`` in its service (``IDENTITY``), or None (none, or not all set)."""
    keys = IDENTITY.get(type_, ((), ""))[0]
    values = tuple(props.get(k) for k in keys)
    if not keys or any(v is None for v in values):
        return None
    return (type_, json.dumps(values, sort_keys=True))


def collision(type_: str, props: dict, live: dict[tuple, str]) -> str | None:
    """Why creating a resource with ``props`` fails on a live resource with the same identity, or None.

    ``live`` maps the identity of every resource of the deployed template (all live while the update
    creates) to its logical id; ``props`` has references to replaced resources marked as new."""
    key = identity(type_, props)
    if key is None or key not in live:
        return None
    keys, fact_key = IDENTITY[type_]
    shown = ", ".join(f"{k} {props[k]!r}" for k in keys)
    return (f"{shown} is taken by the live {live[key]} until CloudFormation deletes it after the update: "
            f"the new resource collides with it; give it another name (or none), or remove the old one in an "
            f"earlier deploy {cite(fact_key)} {cite('cfn.replacement-creates-first')}")


# ------------------------------------------------------------------------------------------ service rules


@dataclass
class Context:
    """What a service rule sees: both templates' resources, the head -> base id pairing and the decisions."""

    base: dict[str, dict]
    head: dict[str, dict]
    old_of: dict[str, str]          # head logical id -> base logical id (same id unless renamed)
    replaced: set[str]              # base logical ids replaced
    changed: dict[str, list[str]]   # base logical id -> changed top-level properties (updated or replaced)

    def old(self, head_id: str) -> dict:
        return self.base.get(self.old_of.get(head_id, head_id), {})

    def is_new(self, ref) -> bool:
        """A reference that resolves to a new physical id: a replaced or added resource."""
        rid = ref.get("Ref") if isinstance(ref, dict) else None
        if rid is None:
            return False
        old = self.old_of.get(rid)
        return old is None or old in self.replaced


def _props(r: dict) -> dict:
    return r.get("Properties", {})


def _subnet_zone(res: dict[str, dict], ref) -> str | None:
    rid = ref.get("Ref") if isinstance(ref, dict) else None
    r = res.get(rid or "", {})
    return _props(r).get("AvailabilityZone") if r.get("Type") == "AWS::EC2::Subnet" else None


def _cluster_subnets(ctx: Context, lid: str) -> list[str]:
    h, b = ctx.head[lid], ctx.old(lid)
    hs = _props(h).get("ResourcesVpcConfig", {}).get("SubnetIds", [])
    bs = _props(b).get("ResourcesVpcConfig", {}).get("SubnetIds", [])
    if not isinstance(hs, list) or not isinstance(bs, list) or hs == bs and not any(map(ctx.is_new, hs)):
        return []
    out = []
    new_vpc = [s for s in hs if ctx.is_new(s) and _vpc_is_new(ctx, s)]
    if new_vpc:
        out.append("the cluster's subnets move to a new VPC; EKS keeps a cluster in the VPC it was created in "
                   f"(a new cluster is needed) {cite('eks.cluster.subnet-update')}")
    old_zones = {_subnet_zone(ctx.base, s) for s in bs} - {None}
    new_zones = {_subnet_zone(ctx.head, s) for s in hs} - {None}
    if old_zones and new_zones and old_zones != new_zones:
        out.append(f"the cluster's subnets change Availability Zones {sorted(old_zones)} -> {sorted(new_zones)}; "
                   f"EKS accepts only subnets in the AZs given at creation {cite('eks.cluster.subnet-update')}")
    return out


def _vpc_is_new(ctx: Context, subnet_ref) -> bool:
    sub = ctx.head.get(subnet_ref.get("Ref", ""), {})
    return ctx.is_new(_props(sub).get("VpcId"))


def _subnet_overlap(ctx: Context, lid: str) -> list[str]:
    old_id = ctx.old_of.get(lid, lid)
    if old_id not in ctx.replaced:
        return []
    h = ctx.head[lid]
    if ctx.is_new(_props(h).get("VpcId")):
        return []      # a new VPC: no live subnet to collide with
    try:
        new = ipaddress.ip_network(_props(h).get("CidrBlock"))
    except (TypeError, ValueError):
        return []
    vpc = _props(ctx.base.get(old_id, {})).get("VpcId")
    live = []
    for bid, b in ctx.base.items():
        if b.get("Type") != "AWS::EC2::Subnet" or _props(b).get("VpcId") != vpc:
            continue
        try:
            cidr = ipaddress.ip_network(_props(b).get("CidrBlock"))
        except (TypeError, ValueError):
            continue
        if new.overlaps(cidr):
            live.append(f"{bid} {cidr}")
    if not live:
        return []
    return [f"the new subnet {new} overlaps live subnet(s) {', '.join(live)}, which are deleted only after it is "
            f"created {cite('ec2.subnet.cidr-conflict')} {cite('cfn.replacement-creates-first')}"]


def _launch_template_changed(ctx: Context, lid: str) -> bool:
    lt = _props(ctx.head[lid]).get("LaunchTemplate", {}).get("Id")
    rid = lt.get("Ref") if isinstance(lt, dict) else None
    return bool(rid) and bool(ctx.changed.get(ctx.old_of.get(rid, rid)))


def _reserved(ctx: Context, res: dict[str, dict], nodegroup: dict) -> bool:
    """A node group on a capacity block or an ODCR (named in its launch template)."""
    if _props(nodegroup).get("CapacityType") == "CAPACITY_BLOCK":
        return True
    lt = _props(nodegroup).get("LaunchTemplate", {}).get("Id")
    data = _props(res.get(lt.get("Ref", "") if isinstance(lt, dict) else "", {})).get("LaunchTemplateData", {})
    return bool(data.get("CapacityReservationSpecification"))


def _nodegroup(ctx: Context, lid: str) -> list[str]:
    old_id = ctx.old_of.get(lid, lid)
    if old_id in ctx.replaced:
        b = ctx.old(lid)
        if _reserved(ctx, ctx.base, b) and (_props(b).get("ScalingConfig", {}).get("DesiredSize") or 0) > 0:
            return ["a reserved group replaced while it runs: the new group is created first and the reservation "
                    "or block has no room for it; deploy desired_size 0 first "
                    f"{cite('cfn.replacement-creates-first')} {cite('eks.capacity-block-mng')}"]
        return []
    h, b = _props(ctx.head[lid]), _props(ctx.old(lid))
    out = []
    version = h.get("Version") != b.get("Version") or h.get("ReleaseVersion") != b.get("ReleaseVersion")
    others = [p for p in ctx.changed.get(old_id, []) if p not in ("Version", "ReleaseVersion", "LaunchTemplate")]
    lt = _launch_template_changed(ctx, lid)
    if version and (others or lt):
        what = ", ".join(others + (["a new launch template version"] if lt else []))
        out.append(f"a Kubernetes version update combined with {what}: EKS takes a version update alone; deploy "
                   f"the version first, the rest next {cite('eks.nodegroup.version-update-alone')}")
    if (h.get("CapacityType") == "CAPACITY_BLOCK" and (version or lt)
            and (b.get("ScalingConfig", {}).get("DesiredSize") or 0) > 0):
        out.append("a capacity-block group updated while it runs: EKS upgrades it only at desired size 0; "
                   f"deploy desired_size 0 first {cite('eks.capacity-block-mng')}")
    return out


def _file_system(ctx: Context, lid: str) -> list[str]:
    if ctx.old_of.get(lid, lid) in ctx.replaced:
        return []
    b, h = _props(ctx.old(lid)), _props(ctx.head[lid])
    out = []
    old, new = b.get("StorageCapacity"), h.get("StorageCapacity")
    if isinstance(old, int) and isinstance(new, int) and new < old:
        out.append(f"storage capacity {old} -> {new} GiB: FSx for Lustre only grows "
                   f"{cite('fsx.lustre.storage-capacity-increase-only')}")
    meta = [p.get("LustreConfiguration", {}).get("MetadataConfiguration", {}) for p in (b, h)]
    iops = [m.get("Iops") for m in meta]
    if all(isinstance(v, int) for v in iops) and iops[1] < iops[0]:
        out.append(f"metadata IOPS {iops[0]} -> {iops[1]}: FSx takes only as many or more "
                   f"{cite('fsx.lustre.metadata-iops-increase-only')}")
    automatic = automatic_metadata_iops(old) if isinstance(old, int) else AUTOMATIC_METADATA_IOPS_MIN
    if (meta[0].get("Mode") == "USER_PROVISIONED" and meta[1].get("Mode") == "AUTOMATIC"
            and isinstance(iops[0], int) and iops[0] > automatic):
        out.append(f"metadata IOPS {iops[0]} (user-provisioned) -> automatic: FSx refuses the switch while the "
                   f"current IOPS exceed what automatic mode provisions for the file system's capacity ({automatic} "
                   f"at {old} GiB; it never lowers metadata IOPS); keep metadata_iops, or grow the capacity first "
                   f"{cite('fsx.lustre.metadata-automatic-switch')} {cite('fsx.lustre.metadata-automatic-iops')}")
    return out


# The smallest metadata IOPS FSx provisions (and accepts) for an SSD file system (fact
# fsx.lustre.metadata-automatic-switch): what the rule assumes automatic mode gives when the capacity is unknown.
AUTOMATIC_METADATA_IOPS_MIN = 1500


def automatic_metadata_iops(capacity_gib: int) -> int:
    """The metadata IOPS automatic mode provisions for an SSD file system of this capacity (fact
    fsx.lustre.metadata-automatic-iops): 1500 at 1200 GiB, 3000 at 2400, 6000 at 4800-9600, 12000 at
    12000-45600, then 12000 per 24000 GiB."""
    if capacity_gib >= 48000:
        return 12000 * (capacity_gib // 24000)
    for upto, iops in ((1200, 1500), (2400, 3000), (9600, 6000)):
        if capacity_gib <= upto:
            return iops
    return 12000


def _path_overlap(a: str, b: str) -> bool:
    """Two file system paths where one is the other or inside it (/ns1 and /ns1/ns2)."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _repo_overlap(a, b) -> bool:
    """Two DataRepositoryPath values naming the same S3 bucket/prefix (or one inside the other)."""
    if isinstance(a, str) and isinstance(b, str):
        return _path_overlap(a, b)
    return a == b   # the same expression (e.g. s3://<the same bucket>/)


def _data_repository(ctx: Context, lid: str) -> list[str]:
    """A replaced association is created while the live ones (its old copy among them) still exist: FSx
    refuses one whose file system path or S3 path overlaps another on the same file system."""
    old_id = ctx.old_of.get(lid, lid)
    if old_id not in ctx.replaced:
        return []
    h = _props(ctx.head[lid])
    fs = h.get("FileSystemId")
    if ctx.is_new(fs):
        return []   # a new file system: nothing live on it
    out = []
    for bid, b in ctx.base.items():
        if b.get("Type") != "AWS::FSx::DataRepositoryAssociation" or _props(b).get("FileSystemId") != fs:
            continue
        bp = _props(b)
        same_dir = isinstance(h.get("FileSystemPath"), str) and isinstance(bp.get("FileSystemPath"), str) \
            and _path_overlap(h["FileSystemPath"], bp["FileSystemPath"])
        same_repo = _repo_overlap(h.get("DataRepositoryPath"), bp.get("DataRepositoryPath"))
        if same_dir or same_repo:
            what = " and ".join(w for w, held in (("file system path", same_dir), ("S3 path", same_repo)) if held)
            out.append(f"the new association's {what} overlaps the live {bid}, which CloudFormation deletes only "
                       "after creating the new one; FSx allows one association per directory and per S3 "
                       "prefix: remove the association in one deploy, add it at the new path in the next "
                       f"{cite('fsx.dra.unique-paths')} {cite('cfn.replacement-creates-first')}")
    return out


def _cluster_version(ctx: Context, lid: str) -> list[str]:
    old, new = _props(ctx.old(lid)).get("Version"), _props(ctx.head[lid]).get("Version")
    if not old or not new or old == new or not all(isinstance(v, str) for v in (old, new)):
        return []
    (om, on), (nm, nn) = (tuple(int(x) for x in v.split(".")[:2]) for v in (old, new))
    if (nm, nn) < (om, on):
        return [f"Kubernetes {old} -> {new}: EKS cannot downgrade a cluster {cite('eks.cluster.version-steps')}"]
    if nm == om and nn - on > 1:
        return [f"Kubernetes {old} -> {new}: EKS moves one minor version at a time; deploy {om}.{on + 1} first "
                f"{cite('eks.cluster.version-steps')}"]
    return []


SERVICE_RULES: dict[str, tuple[Callable[[Context, str], list[str]], ...]] = {
    "AWS::EKS::Cluster": (_cluster_subnets, _cluster_version),
    "AWS::EC2::Subnet": (_subnet_overlap,),
    "AWS::EKS::Nodegroup": (_nodegroup,),
    "AWS::FSx::FileSystem": (_file_system,),
    "AWS::FSx::DataRepositoryAssociation": (_data_repository,),
}


def service_failures(ctx: Context, head_id: str) -> list[str]:
    """Why the services refuse the change of ``head_id`` (a resource on both sides), each with its source."""
    out: list[str] = []
    for rule in SERVICE_RULES.get(ctx.head[head_id].get("Type", ""), ()):
        out += rule(ctx, head_id)
    return out
