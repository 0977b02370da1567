"""Capacity: UltraServer Capacity Blocks, capacity-block node groups, quota codes, the Dallas Local Zone."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "ec2.ultraservers.capacity-blocks-only", "p6e-gb200 and trn2u come only as UltraServer Capacity Blocks",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-ultraservers.html", "2026-11-23",
        "no on-demand or ODCR offering was found for either type; the spec refuses other capacity types for them",
    ),
    Fact(
        "eks.capacity-block-mng", "capacity-block node groups: custom launch template with MarketType "
        "capacity-block, the block's CapacityReservationId and the InstanceType; desired size 0 for upgrades",
        "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html", "2026-11-23",
        "self-managed groups created before the block is active also start at desired 0 "
        "(https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html)",
    ),
    Fact(
        "eks.p6e-gb200", "P6e-GB200 on EKS: capacity blocks only, custom launch template, desired size 0 before a "
        "node-group upgrade, Kubernetes >= 1.33 and NVIDIA's DRA driver (IMEX ComputeDomains) for cross-node NVLink",
        "https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html", "2026-11-23",
        "the platform installs the DRA driver (ComputeDomains only) when a group has such a type, refuses "
        "eks.version < 1.33 for it, and openpod submit gives each multi-node job a ComputeDomain "
        "(platform_constructs/device_plugins.py, openpod_core/accelerator_stack.py, "
        "infra/governance/compute_domain.py)",
    ),
    Fact(
        "ec2.quota-codes.on-demand-vcpus", "P L-417A185B, Trn L-2C3B7624, G and VT L-DB2E81BA, "
        "Standard L-1216C47A (Running On-Demand <family> instances, vCPUs)",
        "https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html", "2026-11-23",
        "used by openpod preflight (infra/deploy/preflight.py)",
    ),
    Fact(
        "ec2.capacity-blocks.max-instances", "64",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html", "2026-11-25",
        "each Capacity Block can have up to 64 instances, and up to 256 instances across Capacity Blocks (same "
        "sentence on ec2-capacity-blocks.html). A capacity-block group launches into one block (capacity."
        "reservation_id), so infra/spec/rules.py refuses max_size over 64 for it; UltraServer blocks are sold by the "
        "UltraServer and are not held to it here (see the unverified list)",
    ),
    Fact(
        "ec2.p6e-gb200.local-zone", "P6e-GB200 UltraServer Capacity Blocks need the Dallas Local Zone opt-in",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html", "2026-11-23",
        "so cfn-lint's per-region instance-type lists (E3628) do not know p6e-gb200.36xlarge. examples/large.yaml "
        "places its gb200 group in us-east-1-dfw-2a (openpod_core/local_zones.py); examples/default.yaml "
        "(us-east-2) declares one in us-east-2b that no block can serve, and `openpod validate` warns so "
        "(infra/spec/warnings.py, from the zones' offers in openpod_core/local_zones.py; a Region cannot have both: "
        "Trn2 is not sold in us-east-1, fact ec2.instance-type-offerings.moto)",
    ),
)
