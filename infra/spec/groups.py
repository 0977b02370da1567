"""``instance_groups:``: one EKS managed node group each - its instance type, sizes, capacity (on-demand,
reservation, capacity block), placement, labels, taints and volumes."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field, field_validator

from infra.spec.base import DNS_LABEL, LABEL_KEY, LABEL_VALUE, RESERVATION_ID, SpecModel
from openpod_core import instance_types
from openpod_core.instance_types import InstanceType


class CapacityType(str, Enum):
    ON_DEMAND = "on-demand"
    RESERVATION = "reservation"
    CAPACITY_BLOCK = "capacity-block"
    SPOT = "spot"


class Capacity(SpecModel):
    type: CapacityType = CapacityType.ON_DEMAND
    reservation_id: str | None = Field(None, pattern=RESERVATION_ID)
    spot_instance_types: list[str] = Field(
        [], description="spot only: more instance types the group may launch besides instance_type, for Spot "
                        "capacity from several pools (EKS recommends several; up to 20 in all). Each must match "
                        "instance_type's accelerators, accelerator memory, EFA and CPU architecture, so every node "
                        "of the group offers jobs the same resources")

    @field_validator("spot_instance_types")
    @classmethod
    def _known_types(cls, v: list[str]) -> list[str]:
        for name in v:
            try:
                instance_types.get(name)
            except instance_types.UnknownInstanceType as e:
                raise ValueError(str(e)) from None
        return v


class TaintEffect(str, Enum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Taint(SpecModel):
    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE


class Volume(SpecModel):
    """An extra EBS volume on every node of a group."""

    device_name: str = Field(pattern=r"^/dev/(sd[b-z]|xvd[b-z])$")
    size_gib: int = Field(ge=1, le=65536)
    iops: int = Field(3000, ge=3000, le=80000)
    throughput_mibps: int = Field(125, ge=125, le=2000)


class InstanceGroupSpec(SpecModel):
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
            if not LABEL_KEY.match(key):
                raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
            if not LABEL_VALUE.match(str(value)):
                raise ValueError(f"label {key!r} value {value!r} is not a valid Kubernetes label value "
                                 "(63 chars of [A-Za-z0-9_.-], alphanumeric at both ends)")
        return v

    @property
    def type(self) -> InstanceType:
        return instance_types.get(self.instance_type)

    @property
    def uses_reservation(self) -> bool:
        return self.capacity.type in (CapacityType.RESERVATION, CapacityType.CAPACITY_BLOCK)

    @property
    def instance_types(self) -> list[str]:
        """Every type the group may launch: ``instance_type`` first, then a spot group's alternatives."""
        return [self.instance_type, *(t for t in self.capacity.spot_instance_types if t != self.instance_type)]

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
