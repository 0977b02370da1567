"""The instance type table: the single source of hardware facts.

Launch templates (EFA layout, RAID0 of instance-store NVMe), spec validation
(accelerators per node, UltraServer sizes), Kueue quotas, the job-submission CLI,
the node agent (expected device counts, bandwidth floors) and the generated docs
all read this table. Nothing else in the project hard-codes a hardware number.

Figures follow the EC2 accelerated-computing instance specifications. Edit here
and everything downstream follows; `python -m infra docs` regenerates the table
in ``docs/instance-types.md``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import Enum


class Accelerator(str, Enum):
    NONE = "none"
    NVIDIA = "nvidia"
    NEURON = "neuron"


class EfaLayout(str, Enum):
    """How a launch template lays EFA interfaces over network cards.

    STANDARD: card 0 device 0 is the ENA primary interface; card 0 device 1 an
        efa-only interface when card 0 takes EFA; every further EFA-capable card
        gets one efa-only interface at device 0 (EC2's recommended layout for
        multi-card instances, including P5/P5e/P5en, P6-B200, Trn1/Trn2).
    GB200: P6e-GB200 card rules (EC2 user guide, "EFA configuration for
        P6e-GB200 instances"): network card 0 takes only the ENA primary
        interface (up to 100 Gbps); odd cards 1..15 take EFA-only interfaces at
        up to 400 Gbps, even cards 2..16 ENA or EFA at up to 200 Gbps; cards
        [1,2], [3,4], ... share one physical 400 Gbps NIC and cards [1,3],
        [5,7], [9,11], [13,15] feed one GPU (400 Gbps each). EC2 recommends one
        EFA-only interface per GPU pair (NCI 1, 5, 9, 13: 4 x 400 = 1600 Gbps),
        which is what ``efa_cards`` lists.
    NONE: no EFA; one ENA primary interface.
    """

    STANDARD = "standard"
    GB200 = "gb200"
    NONE = "none"


@dataclass(frozen=True)
class UltraServer:
    """An UltraServer type: several instances joined by an accelerator fabric."""

    name: str
    instances: int


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    arch: str  # "x86_64" or "arm64"
    accelerator: Accelerator = Accelerator.NONE
    accelerator_model: str = ""
    accelerator_count: int = 0
    accelerator_memory_gib: int = 0  # per device
    network_cards: int = 1
    efa_cards: tuple[int, ...] = ()  # indices of network cards that take EFA
    efa_gbps_per_card: int = 0
    network_gbps: int = 0  # total instance bandwidth (EC2's; p6e-gb200: what its EFA interfaces carry)
    efa_layout: EfaLayout = EfaLayout.NONE
    nvme_count: int = 0
    nvme_gb: int = 0  # per device
    ultraserver: UltraServer | None = None
    # Single-node all-reduce bus bandwidth (GB/s) a healthy node must reach in
    # the deep health check; 0 = no NCCL check for this type.
    allreduce_busbw_floor_gbs: int = 0

    @property
    def efa_count(self) -> int:
        """EFA devices the node exposes (``vpc.amazonaws.com/efa``)."""
        return len(self.efa_cards)

    @property
    def efa_supported(self) -> bool:
        return self.efa_count > 0

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def is_accelerated(self) -> bool:
        return self.accelerator is not Accelerator.NONE

    @property
    def device_resource(self) -> str | None:
        """Kubernetes extended resource name of the accelerator, if any."""
        return {
            Accelerator.NVIDIA: "nvidia.com/gpu",
            Accelerator.NEURON: "aws.amazon.com/neuron",
        }.get(self.accelerator)

    @property
    def nvme_total_gb(self) -> int:
        return self.nvme_count * self.nvme_gb


def _cards(n: int) -> tuple[int, ...]:
    return tuple(range(n))


def _nv(name, model, count, mem, vcpus, ram, cards, efa, per_card, total, layout, nvme, nvme_gb,
        arch="x86_64", ultra=None, busbw=0):
    return InstanceType(
        name=name, vcpus=vcpus, memory_gib=ram, arch=arch, accelerator=Accelerator.NVIDIA,
        accelerator_model=model, accelerator_count=count, accelerator_memory_gib=mem,
        network_cards=cards, efa_cards=efa, efa_gbps_per_card=per_card, network_gbps=total,
        efa_layout=layout, nvme_count=nvme, nvme_gb=nvme_gb, ultraserver=ultra,
        allreduce_busbw_floor_gbs=busbw,
    )


def _trn(name, model, mem, cards, per_card, total, nvme, nvme_gb, ram, vcpus=128, count=16, ultra=None):
    return InstanceType(
        name=name, vcpus=vcpus, memory_gib=ram, arch="x86_64", accelerator=Accelerator.NEURON,
        accelerator_model=model, accelerator_count=count, accelerator_memory_gib=mem,
        network_cards=cards, efa_cards=_cards(cards), efa_gbps_per_card=per_card,
        network_gbps=total, efa_layout=EfaLayout.STANDARD, nvme_count=nvme, nvme_gb=nvme_gb,
        ultraserver=ultra,
    )


def _cpu(name, vcpus, ram, arch="x86_64", gbps=12, efa=False, cards=1, nvme=0, nvme_gb=0):
    return InstanceType(
        name=name, vcpus=vcpus, memory_gib=ram, arch=arch, network_cards=cards,
        efa_cards=(0,) if efa else (), efa_gbps_per_card=gbps if efa else 0, network_gbps=gbps,
        efa_layout=EfaLayout.STANDARD if efa else EfaLayout.NONE, nvme_count=nvme, nvme_gb=nvme_gb,
    )


GB200_NVL36 = UltraServer("u-p6e-gb200x36", 9)
GB200_NVL72 = UltraServer("u-p6e-gb200x72", 18)
TRN2_ULTRA = UltraServer("u-trn2x64", 4)

_S, _G, _N = EfaLayout.STANDARD, EfaLayout.GB200, EfaLayout.NONE

_TABLE: tuple[InstanceType, ...] = (
    # NVIDIA GPU instances
    _nv("p4d.24xlarge", "A100", 8, 40, 96, 1152, 4, _cards(4), 100, 400, _S, 8, 1000, busbw=180),
    _nv("p4de.24xlarge", "A100", 8, 80, 96, 1152, 4, _cards(4), 100, 400, _S, 8, 1000, busbw=180),
    # Instance store of the P rows: 3800 GB per NVMe device in DescribeInstanceTypes (facts:
    # ec2.describe-instance-types.recorded, ec2.describe-instance-types.moto); the rows once said 3840.
    _nv("p5.4xlarge", "H100", 1, 80, 16, 256, 1, _cards(1), 100, 100, _S, 1, 3800),
    _nv("p5.48xlarge", "H100", 8, 80, 192, 2048, 32, _cards(32), 100, 3200, _S, 8, 3800, busbw=380),
    _nv("p5e.48xlarge", "H200", 8, 141, 192, 2048, 32, _cards(32), 100, 3200, _S, 8, 3800, busbw=380),
    _nv("p5en.48xlarge", "H200", 8, 141, 192, 2048, 16, _cards(16), 200, 3200, _S, 8, 3800, busbw=380),
    _nv("p6-b200.48xlarge", "B200", 8, 179, 192, 2048, 8, _cards(8), 400, 3200, _S, 8, 3800, busbw=650),
    # 17 cards; one EFA-only interface per GPU on NCI 1, 5, 9, 13 (4 x 400 Gbps); 3 x 7.5 TB instance store
    # (facts: ec2.p6e-gb200.efa-layout, eks.p6e-gb200.instance-store).
    _nv("p6e-gb200.36xlarge", "GB200", 4, 185, 144, 960, 17, (1, 5, 9, 13), 400, 1600, _G, 3,
        7500, arch="arm64", ultra=GB200_NVL72, busbw=600),
    # NVIDIA G instances for inference and evaluation (PCIe GPUs, no NVLink: no NCCL bus-bandwidth floor).
    # DescribeInstanceTypes as moto records it (fact ec2.describe-instance-types.moto); GPU memory is its MiB
    # // 1024 like the rows above (L40S 45,776 MiB, A10G 22,888 MiB; EC2's pages say 48 GB and 24 GB).
    # "Up to N Gbps" types carry N. Sizes with EFA put it on every network card (g6e.24xlarge 2, g6e.48xlarge 4).
    _nv("g6e.xlarge", "L40S", 1, 44, 4, 32, 1, (), 0, 20, _N, 1, 250),
    _nv("g6e.2xlarge", "L40S", 1, 44, 8, 64, 1, (), 0, 20, _N, 1, 450),
    _nv("g6e.4xlarge", "L40S", 1, 44, 16, 128, 1, (), 0, 20, _N, 1, 600),
    _nv("g6e.8xlarge", "L40S", 1, 44, 32, 256, 1, _cards(1), 25, 25, _S, 2, 450),
    _nv("g6e.12xlarge", "L40S", 4, 44, 48, 384, 1, _cards(1), 100, 100, _S, 2, 1900),
    _nv("g6e.16xlarge", "L40S", 1, 44, 64, 512, 1, _cards(1), 35, 35, _S, 2, 950),
    _nv("g6e.24xlarge", "L40S", 4, 44, 96, 768, 2, _cards(2), 100, 200, _S, 2, 1900),
    _nv("g6e.48xlarge", "L40S", 8, 44, 192, 1536, 4, _cards(4), 100, 400, _S, 4, 1900),
    _nv("g5.xlarge", "A10G", 1, 22, 4, 16, 1, (), 0, 10, _N, 1, 250),
    _nv("g5.2xlarge", "A10G", 1, 22, 8, 32, 1, (), 0, 10, _N, 1, 450),
    _nv("g5.4xlarge", "A10G", 1, 22, 16, 64, 1, (), 0, 25, _N, 1, 600),
    _nv("g5.8xlarge", "A10G", 1, 22, 32, 128, 1, _cards(1), 25, 25, _S, 1, 900),
    _nv("g5.12xlarge", "A10G", 4, 22, 48, 192, 1, _cards(1), 40, 40, _S, 1, 3800),
    _nv("g5.16xlarge", "A10G", 1, 22, 64, 256, 1, _cards(1), 25, 25, _S, 1, 1900),
    _nv("g5.24xlarge", "A10G", 4, 22, 96, 384, 1, _cards(1), 50, 50, _S, 1, 3800),
    _nv("g5.48xlarge", "A10G", 8, 22, 192, 768, 1, _cards(1), 100, 100, _S, 2, 3800),
    # AWS Trainium instances
    InstanceType("trn1.2xlarge", vcpus=8, memory_gib=32, arch="x86_64", accelerator=Accelerator.NEURON,
                 accelerator_model="Trainium", accelerator_count=1, accelerator_memory_gib=32,
                 network_gbps=12, nvme_count=1, nvme_gb=474),
    _trn("trn1.32xlarge", "Trainium", 32, 8, 100, 800, 4, 1900, 512),
    _trn("trn1n.32xlarge", "Trainium", 32, 16, 100, 1600, 4, 1900, 512),
    _trn("trn2.48xlarge", "Trainium2", 96, 16, 200, 3200, 4, 1900, 2048, vcpus=192),
    _trn("trn2u.48xlarge", "Trainium2", 96, 16, 200, 3200, 4, 1900, 2048, vcpus=192, ultra=TRN2_ULTRA),
    # CPU instances (system groups, data preparation)
    _cpu("m6i.xlarge", 4, 16), _cpu("m6i.2xlarge", 8, 32), _cpu("m6i.4xlarge", 16, 64),
    _cpu("m7i.xlarge", 4, 16), _cpu("m7i.2xlarge", 8, 32), _cpu("m7i.4xlarge", 16, 64),
    _cpu("m7i.8xlarge", 32, 128), _cpu("c7i.4xlarge", 16, 32), _cpu("r7i.4xlarge", 16, 128),
    _cpu("m7g.xlarge", 4, 16, arch="arm64"), _cpu("m7g.2xlarge", 8, 32, arch="arm64"),
    _cpu("m7g.4xlarge", 16, 64, arch="arm64"),
    _cpu("c6in.32xlarge", 128, 256, gbps=200, efa=True, cards=2),
)

INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in _TABLE}

ULTRASERVERS: dict[str, UltraServer] = {
    u.name: u for u in (GB200_NVL36, GB200_NVL72, TRN2_ULTRA)
}


class UnknownInstanceType(KeyError):
    def __init__(self, name: str):
        self.name = name
        self.suggestions = suggest(name)
        super().__init__(name)

    def __str__(self) -> str:
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        return f"unknown instance type {self.name!r}{hint}"


def suggest(name: str, n: int = 3) -> list[str]:
    """The nearest known instance type names to ``name``."""
    return difflib.get_close_matches(name, list(INSTANCE_TYPES), n=n, cutoff=0.5)


def get(name: str) -> InstanceType:
    """Look up an instance type; raises UnknownInstanceType with suggestions."""
    try:
        return INSTANCE_TYPES[name]
    except KeyError:
        raise UnknownInstanceType(name) from None
