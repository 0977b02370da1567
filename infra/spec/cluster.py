"""The cluster spec: one YAML file that declares a whole training platform.

``load_spec(path)`` parses and validates a spec file and returns a
:class:`ClusterSpec`, or raises :class:`SpecError` carrying one
:class:`Problem` per thing that is wrong (field path + what is allowed).
Field-level rules live on the models; rules that relate several fields
(AZs, reservations, UltraServer sizes, quotas) are the ``_check_*`` functions
at the bottom, each yielding problems, so every problem is reported at once.

This module imports no CDK: the CLI, the node agent and the governance code
use it without pulling aws-cdk-lib.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openpod_core import accelerator_stack, instance_regions, instance_types, local_zones
from openpod_core.facts import value as fact_value
from openpod_core.instance_types import InstanceType
from infra.spec.pipeline import PipelineSpec
from infra.spec.queueing import QueueingSpec
from infra.spec.observability import ObservabilitySpec
from infra.spec import quota_backing

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
DEFAULT_SPEC = EXAMPLES_DIR / "default.yaml"

DNS_LABEL = r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$"
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_RESERVATION_ID = r"^cr-[0-9a-f]{8,17}$"
IAM_PRINCIPAL_ARN = r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where, and what is allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(Exception):
    """A spec that cannot be used; ``problems`` lists every reason."""

    def __init__(self, problems: list[Problem], source: str = "spec"):
        self.problems = problems
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(f"{self.source}: {p}" for p in self.problems)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# --------------------------------------------------------------------------- network


class NetworkSpec(_Model):
    vpc_cidr: str = "10.0.0.0/16"
    nat_gateways: int = Field(1, ge=1, le=6, description="1 for cost, one per AZ for resilience")
    flow_logs_retention_days: int = Field(90, ge=1)
    layout_azs: int | None = Field(
        None, ge=1, description="the number of availability_zones the subnet layout was made for: the count when "
                                "the platform was first deployed (unset: all of them). Set it to the old count "
                                "before adding an AZ, so no live subnet is re-addressed and the EKS cluster keeps "
                                "the subnets it was created with")

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 CIDR block such as 10.0.0.0/16") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"prefix /{net.prefixlen} not allowed; use /16 to /20 (EKS pods take one IP each)")
        return v


# ------------------------------------------------------------------- instance groups


class CapacityType(str, Enum):
    ON_DEMAND = "on-demand"
    RESERVATION = "reservation"
    CAPACITY_BLOCK = "capacity-block"


class Capacity(_Model):
    type: CapacityType = CapacityType.ON_DEMAND
    reservation_id: str | None = Field(None, pattern=_RESERVATION_ID)


class TaintEffect(str, Enum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Taint(_Model):
    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE


class Volume(_Model):
    """An extra EBS volume on every node of a group."""

    device_name: str = Field(pattern=r"^/dev/(sd[b-z]|xvd[b-z])$")
    size_gib: int = Field(ge=1, le=65536)
    iops: int = Field(3000, ge=3000, le=80000)
    throughput_mibps: int = Field(125, ge=125, le=2000)


class InstanceGroupSpec(_Model):
    name: str = Field(pattern=DNS_LABEL)
    instance_type: str
    min_size: int = Field(0, ge=0)
    desired_size: int = Field(0, ge=0)
    max_size: int = Field(ge=1, description="EKS managed node groups need max_size >= 1")
    hot_spares: int = Field(0, ge=0, description="nodes held out of team quotas to replace failed ones at once")
    dcgm_level: int = Field(
        2, ge=1, le=4,
        description="DCGM diagnostics level (dcgmi diag -r) of the deep health check new and rebooted NVIDIA nodes "
                    "pass before taking work: 2 (the default) takes minutes; 4 (extended, hours) is what SageMaker "
                    "HyperPod's deep health checks run - every reboot of a faulty node then keeps it out of "
                    "service that long")
    pair_check_image: str | None = Field(
        None, min_length=1,
        description="turns on the two-node all-reduce check for this group: the remediation controller holds every "
                    "new or rebooted node out of service until it all-reduces over EFA with an idle healthy peer at "
                    "the floor (docs/node-agent.md). The image runs nccl-tests built with MPI=1, Open MPI, sshd and "
                    "NCCL's EFA plugin (NVIDIA); the Neuron tools, Open MPI and sshd (Neuron); the training image "
                    "(CPU). The platform builds none of the first two, so the default is off; EFA groups only")
    availability_zone: str | None = Field(
        None, description="one of availability_zones, or a Local Zone of the region from openpod_core/local_zones.py "
                          "(e.g. us-east-1-dfw-2a for P6e-GB200 capacity blocks): the group then gets a subnet of its "
                          "own there, which the EKS cluster does not use")
    capacity: Capacity = Capacity()
    placement_group: bool | None = Field(
        None, description="cluster placement group; default on for EFA groups without a reservation"
    )
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    root_volume_gib: int = Field(200, ge=50, le=16384)
    volumes: list[Volume] = []
    local_nvme_raid0: bool = Field(True, description="assemble instance-store NVMe as RAID0 for local checkpoints")
    update_strategy: Literal["default", "minimal"] | None = Field(
        None, description="how EKS replaces nodes in an update: default launches new nodes first, minimal "
                          "terminates old ones first. Unset: minimal for a reservation or capacity block (no spare "
                          "capacity to surge into), default otherwise")

    @field_validator("instance_type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        try:
            instance_types.get(v)
        except instance_types.UnknownInstanceType as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not _LABEL_KEY.match(key):
                raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
            if not _LABEL_VALUE.match(str(value)):
                raise ValueError(f"label {key!r} value {value!r} is not a valid Kubernetes label value "
                                 "(63 chars of [A-Za-z0-9_.-], alphanumeric at both ends)")
        return v

    @property
    def type(self) -> InstanceType:
        return instance_types.get(self.instance_type)

    @property
    def uses_reservation(self) -> bool:
        return self.capacity.type is not CapacityType.ON_DEMAND

    @property
    def awaits_capacity_block(self) -> bool:
        """A capacity-block group whose block is not bought yet: declared in the spec, not created at deploy.

        Teams' quotas and Kueue flavors still name it, so jobs for it wait in their queues until the
        block id is added and the group is deployed (docs/platform.md, "Capacity Blocks").
        """
        return self.capacity.type is CapacityType.CAPACITY_BLOCK and not self.capacity.reservation_id

    @property
    def wants_placement_group(self) -> bool:
        """Cluster placement group on unless a reservation/capacity block is targeted.

        Reservations and capacity blocks already pin capacity to a spine; adding a
        placement group to them makes launches fail with insufficient capacity.
        """
        if self.placement_group is not None:
            return self.placement_group
        return self.type.efa_supported and not self.uses_reservation

    @property
    def schedulable_nodes(self) -> int:
        """Nodes teams may be given quota on: max size less the hot spares."""
        return self.max_size - self.hot_spares


# ---------------------------------------------------------------------------- storage


class FsxSpec(_Model):
    storage_capacity_gib: int = Field(1200, ge=1200)
    throughput_per_tib: Literal[125, 250, 500, 1000] = 250
    compression: Literal["LZ4", "NONE"] = "LZ4"
    metadata_iops: int | None = Field(
        None, description="PERSISTENT_2 metadata IOPS; unset = AUTOMATIC mode"
    )
    mount_path: str = Field("/fsx", pattern=r"^/[A-Za-z0-9/_-]*$")
    data_repository_path: str = Field("/datasets", pattern=r"^/[A-Za-z0-9/_-]+$",
                                      description="FSx path linked to the datasets bucket")
    availability_zone: str | None = Field(None, description="defaults to the first spec AZ")
    automatic_backup_retention_days: int = Field(
        7, ge=0, le=90, description="days FSx keeps its daily automatic backups; 0 turns them off "
                                    "(range: FSx API LustreFileSystemConfiguration)")
    export_deletions: bool = Field(
        False, description="export deletions on the data repository path to the datasets bucket; off so "
                           "that deleting files on FSx never deletes dataset objects in S3")

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, v: int) -> int:
        if v != 1200 and v % 2400:
            raise ValueError(f"{v} GiB not allowed; PERSISTENT_2 takes 1200 GiB or a multiple of 2400 GiB "
                             f"(nearest: {max(2400, round(v / 2400) * 2400)})")
        return v

    @field_validator("metadata_iops")
    @classmethod
    def _metadata(cls, v: int | None) -> int | None:
        allowed = (1500, 3000, 6000, 12000) + tuple(range(24000, 192001, 12000))
        if v is not None and v not in allowed:
            raise ValueError(f"{v} not allowed; use 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000")
        return v


class BucketSpec(_Model):
    versioned: bool = False
    transition_to_infrequent_access_days: int | None = Field(None, ge=30)
    transition_to_glacier_ir_days: int | None = Field(None, ge=1)
    expire_days: int | None = Field(None, ge=1)
    noncurrent_expire_days: int | None = Field(None, ge=1)
    object_lock_days: int | None = Field(
        None, ge=1, le=36500,
        description="S3 Object Lock default retention (days) for every new object version: no version can be "
                    "deleted or overwritten before then, whoever asks (deletes add delete markers; the "
                    "versions stay). Needs versioned: true; off by default")
    object_lock_mode: Literal["governance", "compliance"] = Field(
        "governance", description="governance: principals with s3:BypassGovernanceRetention may shorten it; "
                                  "compliance: nobody can, not even the account root")


class BucketsSpec(_Model):
    datasets: BucketSpec = BucketSpec(versioned=True, noncurrent_expire_days=30)
    checkpoints: BucketSpec = BucketSpec(
        versioned=True, transition_to_infrequent_access_days=30, transition_to_glacier_ir_days=90,
        noncurrent_expire_days=30,
    )
    logs: BucketSpec = BucketSpec(versioned=True, transition_to_infrequent_access_days=30, expire_days=365,
                                  noncurrent_expire_days=30)
    abort_incomplete_multipart_days: int = Field(7, ge=1)


class StorageSpec(_Model):
    fsx: FsxSpec = FsxSpec()
    buckets: BucketsSpec = BucketsSpec()


# -------------------------------------------------------------------------------- EKS

# Pinned by default; a spec may pin its own. Versions are EKS add-on versions
# (``aws eks describe-addon-versions``) and Helm chart versions. The add-on pins are rows of the facts register
# (openpod_core/facts.py, eks.addon.*: the EKS user guide's latest version per Kubernetes version).
DEFAULT_ADDONS: dict[str, str] = {
    "vpc-cni": fact_value("eks.addon.vpc-cni"),
    "coredns": fact_value("eks.addon.coredns.1.34"),
    "kube-proxy": fact_value("eks.addon.kube-proxy.1.34"),
    "eks-pod-identity-agent": "v1.3.9-eksbuild.3",  # unverified: see openpod_core.facts.UNVERIFIED
    "aws-fsx-csi-driver": fact_value("eks.addon.aws-fsx-csi-driver"),
}
# kube-proxy runs the cluster's own minor version, and CoreDNS's latest add-on differs by Kubernetes version, so
# both defaults follow eks.version (the DEFAULT_ADDONS entries are the 1.34 rows).
KUBE_PROXY_ADDON: dict[str, str] = {v: fact_value(f"eks.addon.kube-proxy.{v}") for v in ("1.32", "1.33", "1.34")}
COREDNS_ADDON: dict[str, str] = {v: fact_value(f"eks.addon.coredns.{v}") for v in ("1.32", "1.33", "1.34")}
DEFAULT_CHARTS: dict[str, str] = {
    "aws-efa-k8s-device-plugin": "v0.5.14",
    "nvidia-device-plugin": "0.17.4",
    # The newest version whose values were read (facts: chart.neuron-helm-chart.device-plugin-affinity); 1.3.0's
    # were never found.
    "neuron-helm-chart": "1.1.2",
    "nvidia-dra-driver-gpu": "25.12.0",  # facts: chart.nvidia-dra-driver-gpu
    "kueue": "0.19.2",
    "jobset": "0.12.0",
    "prometheus-node-exporter": "4.56.1",
    "kube-state-metrics": "8.4.0",
    "dcgm-exporter": "4.8.2",
}


class AccessEntry(_Model):
    principal_arn: str = Field(pattern=IAM_PRINCIPAL_ARN)
    access: Literal["cluster-admin", "admin", "edit", "view"] = "view"
    namespaces: list[str] = Field([], description="empty = whole cluster")


EksVersion = Literal["1.32", "1.33", "1.34"]
EKS_VERSIONS: tuple[str, ...] = EksVersion.__args__


class EksSpec(_Model):
    version: EksVersion = Field("1.34", description="Kubernetes minor version; P6e-GB200 groups need >= 1.33 "
                                                     "(DRA, for NVIDIA's IMEX ComputeDomains)")
    endpoint_public: bool = Field(False, description="private endpoint only unless set")
    endpoint_public_cidrs: list[str] = Field(
        [], validate_default=True,
        description="IPv4 CIDRs allowed to reach the public endpoint; required with endpoint_public")
    access_entries: list[AccessEntry] = []
    addons: dict[str, str] = {}
    charts: dict[str, str] = {}
    log_retention_days: int = Field(90, ge=1)

    @field_validator("addons", "charts")
    @classmethod
    def _known_names(cls, v: dict[str, str], info) -> dict[str, str]:
        what, known = ("add-on", DEFAULT_ADDONS) if info.field_name == "addons" else ("chart", DEFAULT_CHARTS)
        unknown = sorted(set(v) - set(known))
        if unknown:
            raise ValueError(f"unknown {what} {', '.join(unknown)}; allowed: {', '.join(known)}")
        return v

    @field_validator("addons")
    @classmethod
    def _kube_proxy_matches(cls, v: dict[str, str], info) -> dict[str, str]:
        version = info.data.get("version")
        pinned = v.get("kube-proxy")
        if version and pinned and not pinned.startswith(f"v{version}."):
            raise ValueError(f"kube-proxy {pinned} does not match eks.version {version}; kube-proxy runs the "
                             f"cluster's minor version (e.g. {KUBE_PROXY_ADDON.get(version, 'v' + version + '.x')}), "
                             "or leave it unset to follow eks.version")
        return v

    @field_validator("endpoint_public_cidrs")
    @classmethod
    def _public_cidrs(cls, v: list[str], info) -> list[str]:
        public = info.data.get("endpoint_public", False)
        if public and not v:
            raise ValueError("a public endpoint needs the CIDRs allowed to reach it; allowed: IPv4 CIDRs such as "
                             "203.0.113.0/24 (0.0.0.0/0 only when listed explicitly)")
        if v and not public:
            raise ValueError("set only with endpoint_public: true (the endpoint is private otherwise)")
        for cidr in v:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError:
                raise ValueError(f"{cidr} is not an IPv4 network; allowed: CIDRs like 203.0.113.0/24 "
                                 "with no host bits set") from None
        return v

    @property
    def addon_versions(self) -> dict[str, str]:
        return {**DEFAULT_ADDONS, "coredns": COREDNS_ADDON[self.version], "kube-proxy": KUBE_PROXY_ADDON[self.version],
                **self.addons}

    @property
    def chart_versions(self) -> dict[str, str]:
        return {**DEFAULT_CHARTS, **self.charts}


# ------------------------------------------------------------------- task governance


class GroupQuota(_Model):
    """A team's share of one instance group, in whole nodes.

    Quotas are nodes so they read like the capacity a platform team bought;
    the Kueue builders turn them into accelerators, CPU, memory and EFA devices.
    """

    nodes: int = Field(ge=0, description="nominal quota: nodes the team is guaranteed")
    borrowing_limit: int | None = Field(
        None, ge=0, description="nodes it may borrow from idle quota of other teams; unset = no limit, 0 = never")
    lending_limit: int | None = Field(
        None, ge=0, description="nodes of its idle quota other teams may borrow; unset = all, 0 = never lend")


class PreemptionSpec(_Model):
    """Kueue ClusterQueue preemption rules of one team."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        "Any", description="take back lent quota from borrowers (Any: whatever their priority)")
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        "LowerPriority", description="a job preempts the team's own lower-priority jobs")
    borrow_within_cohort: Literal["Never", "LowerPriority"] = Field(
        "Never", description="while borrowing, preempt lower-priority jobs of other teams")


class TeamSpec(_Model):
    name: str = Field(pattern=DNS_LABEL, description="also the team's namespace")
    quotas: dict[str, GroupQuota] = Field({}, description="instance group name -> quota")
    fair_sharing_weight: float = Field(1.0, gt=0, le=1000)
    preemption: PreemptionSpec = PreemptionSpec()
    users: list[Annotated[str, Field(pattern=IAM_PRINCIPAL_ARN)]] = Field(
        [], description="IAM role or user ARNs allowed to submit: each gets an EKS access entry in the team's "
                        "Kubernetes group `openpod:team:<team>`")
    allowed_priorities: list[str] | None = Field(
        None, description="priority classes the team's jobs may use (enforced at admission); "
                          "default: every priority but `inference`")


class PrioritySpec(_Model):
    name: str = Field(pattern=DNS_LABEL)
    value: int = Field(ge=0, le=1_000_000_000)
    description: str = Field("", max_length=2048)


DEFAULT_PRIORITIES: tuple[PrioritySpec, ...] = (
    PrioritySpec(name="inference", value=100, description="serving; never preempted by lower-priority jobs of "
                 "its team, nor by other teams while its team does not borrow"),
    PrioritySpec(name="experimentation", value=80, description="interactive experiments"),
    PrioritySpec(name="training", value=70, description="long training runs"),
    PrioritySpec(name="fine-tuning", value=50, description="fine-tuning and batch work"),
)

# Namespaces a team may not take: Kubernetes' own and the platform's controllers.
RESERVED_NAMESPACES = frozenset({"default", "kueue-system", "jobset-system", "openpod-system"})


# ------------------------------------------------------------------------------ root


class ClusterSpec(_Model):
    name: str = Field(pattern=DNS_LABEL)
    region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
    account: str | None = Field(None, pattern=r"^\d{12}$")
    availability_zones: list[str] = Field(min_length=2, max_length=6)
    network: NetworkSpec = NetworkSpec()
    instance_groups: list[InstanceGroupSpec] = Field(min_length=1)
    storage: StorageSpec = StorageSpec()
    eks: EksSpec = EksSpec()
    teams: list[TeamSpec] = []
    priorities: list[PrioritySpec] = list(DEFAULT_PRIORITIES)
    pipeline: PipelineSpec | None = None
    queueing: QueueingSpec = QueueingSpec()
    observability: ObservabilitySpec = ObservabilitySpec()

    def group(self, name: str) -> InstanceGroupSpec:
        for g in self.instance_groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def team(self, name: str) -> TeamSpec:
        for t in self.teams:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def accelerated_groups(self) -> list[InstanceGroupSpec]:
        return [g for g in self.instance_groups if g.type.is_accelerated]

    def group_az(self, group: InstanceGroupSpec) -> str:
        """The AZ a group launches in (its own, else the spec's first); may be a Local Zone."""
        return group.availability_zone or self.availability_zones[0]

    @property
    def local_zones(self) -> list[str]:
        """The Local Zones instance groups launch in (node-group-only subnets), in first-use order."""
        out: list[str] = []
        for g in self.instance_groups:
            if g.availability_zone and g.availability_zone not in self.availability_zones \
                    and g.availability_zone not in out:
                out.append(g.availability_zone)
        return out


# -------------------------------------------------------------------- cross-field rules


def _dupes(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return sorted({i for i in items if i in seen or seen.add(i)})  # type: ignore[func-returns-value]


def _check_azs(spec: ClusterSpec) -> Iterator[Problem]:
    for i, az in enumerate(spec.availability_zones):
        if not az.startswith(spec.region) or not re.fullmatch(r"[a-z]", az[len(spec.region):]):
            yield Problem(f"availability_zones[{i}]", f"{az!r} is not an AZ of region {spec.region} "
                                                      f"(expected e.g. {spec.region}a)")
    for d in _dupes(spec.availability_zones):
        yield Problem("availability_zones", f"{d!r} listed twice")
    n = spec.network.layout_azs
    if n is not None and not 2 <= n <= len(spec.availability_zones):
        yield Problem("network.layout_azs", f"{n} must be 2..{len(spec.availability_zones)}: the number of the "
                                            "first availability_zones the subnet layout was made for")
    if spec.storage.fsx.availability_zone and spec.storage.fsx.availability_zone not in spec.availability_zones:
        yield Problem("storage.fsx.availability_zone", f"{spec.storage.fsx.availability_zone!r} is not one of "
                                                       f"availability_zones ({', '.join(spec.availability_zones)})")


def _check_groups(spec: ClusterSpec) -> Iterator[Problem]:
    for d in _dupes([g.name for g in spec.instance_groups]):
        yield Problem("instance_groups", f"duplicate group name {d!r}; names must be unique")
    if not any(not g.type.is_accelerated and g.min_size >= 1 for g in spec.instance_groups):
        yield Problem("instance_groups", "needs a CPU system group with min_size >= 1 "
                                         "(CoreDNS, Kueue and the remediation controller run there)")
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
            if not _LABEL_KEY.match(t.key):
                yield Problem(f"{at}.taints[{j}].key", f"{t.key!r} is not a valid taint key")


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
        if t.name in RESERVED_NAMESPACES or t.name.startswith("kube-"):
            yield Problem(f"{team_at}.name", f"{t.name!r} is reserved (the team name is its namespace); "
                                             f"not allowed: {', '.join(sorted(RESERVED_NAMESPACES))}, kube-*")
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


# ---------------------------------------------------------------------------- loading


def _loc(loc: tuple[Any, ...], data: Any) -> str:
    """Render a pydantic error location as ``instance_groups[1] (p5).instance_type``."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            name = node[part].get("name") if isinstance(node, list) and part < len(node) and isinstance(
                node[part], dict) else None
            out += f"[{part}]" + (f" ({name})" if name else "")
        else:
            out += f".{part}" if out else str(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return out


_PATTERN_HELP = {
    DNS_LABEL: "lowercase letters, digits and '-', starting with a letter, at most 32 characters",
    _RESERVATION_ID: "a capacity reservation id such as cr-0123456789abcdef0",
    IAM_PRINCIPAL_ARN: "an IAM role or user ARN such as arn:aws:iam::111122223333:role/ml-researchers "
                       "(not a Kubernetes group or an assumed-role session)",
}


def _all_fields(model: type[BaseModel] = None, seen: set | None = None) -> set[str]:
    """Every field name of the spec models (for 'did you mean' on unknown fields)."""
    model = model or ClusterSpec
    seen = set() if seen is None else seen
    for name, f in model.model_fields.items():
        seen.add(name)
        for t in getattr(f.annotation, "__args__", ()) + (f.annotation,):
            if isinstance(t, type) and issubclass(t, BaseModel) and t is not model:
                _all_fields(t, seen)
    return seen


def _message(err: dict[str, Any]) -> str:
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    kind = err["type"]
    if kind == "extra_forbidden":
        field = str(err["loc"][-1])
        near = difflib.get_close_matches(field, sorted(_all_fields()), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        return f"unknown field{hint} (fields are listed in docs/spec.md)"
    if kind == "string_pattern_mismatch":
        pattern = (err.get("ctx") or {}).get("pattern", "")
        return f"{err['input']!r} not allowed; use {_PATTERN_HELP.get(pattern, 'a value matching ' + pattern)}"
    if kind == "missing":
        return "required field missing"
    if kind in ("enum", "literal_error"):
        return f"{err.get('input')!r} not allowed; {msg[0].lower()}{msg[1:]}"
    if "input" in err and kind not in ("value_error",) and not isinstance(err["input"], (dict, list)):
        return f"{msg} (got {err['input']!r})"
    return msg


def parse_spec(data: Any, source: str = "spec") -> ClusterSpec:
    """Validate already-parsed YAML; raise SpecError with every problem.

    Field errors do not hide the cross-field rules: the entries with field errors are left out (a bad field
    with a default falls back to it, a bad list entry is dropped) and the rules run on the rest; their problems
    that only come from leaving something out (a name that was dropped) are not reported.
    """
    if not isinstance(data, dict):
        raise SpecError([Problem("", "a spec is a YAML mapping with name, region, availability_zones, "
                                     "instance_groups, ...")], source)
    from infra.spec.loading import pruned

    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as e:
        problems = [Problem(_loc(err["loc"], data), _message(err)) for err in e.errors()]
        partial, dropped = pruned(data, e.errors(), ClusterSpec)
        if partial is not None:
            seen = {str(p) for p in problems}
            problems += [p for check in CHECKS for p in check(partial)
                         if str(p) not in seen and not _from_dropped(p, dropped)]
        raise SpecError(problems, source) from None
    problems = [p for check in CHECKS for p in check(spec)]
    if problems:
        raise SpecError(problems, source)
    return spec


def _from_dropped(p: Problem, dropped: set[str]) -> bool:
    """A cross-field problem that only exists because an entry with field errors was left out."""
    if dropped and p.message.startswith("needs a CPU system group"):
        return True
    return any(f"'{n}'" in p.message or f"({n})" in p.path or p.path.endswith(f".quotas.{n}")
               or f".quotas.{n}." in p.path or f"group {n}" in p.message for n in dropped)


def load_spec(path: str | Path | None = None) -> ClusterSpec:
    """Read and validate a spec file (the embedded example when ``path`` is None: a library default; the CLIs
    never pass None). Text only (UTF-8), at most ``spec_loading.MAX_SPEC_BYTES``, no duplicate keys."""
    from infra.spec.loading import read_yaml

    path = Path(path) if path else DEFAULT_SPEC
    source = str(path)
    data, problem = read_yaml(path)
    if problem is not None:
        raise SpecError([Problem("", problem)], source)
    return parse_spec(data, source)
