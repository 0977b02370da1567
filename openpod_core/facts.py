"""The facts register: every external fact the platform relies on, with its source and the date it was checked.

A fact is a value someone else decides - a library's installed file name, a version
pin, an image path, a hardware figure. Code that depends on one reads it from
here, tests check the code against it, and ``docs/facts.md`` renders the table,
so a reader can audit each value against its source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """One external fact: ``key`` names it, ``source`` is a URL or ``owner/repo@tag:path[:line]``."""

    key: str
    value: str
    source: str
    checked: str  # ISO date the value was last compared with its source
    note: str = ""


FACTS: tuple[Fact, ...] = (
    # ------------------------------------------------------------------ training image: NCCL over EFA
    Fact(
        "aws-ofi-nccl.version", "1.14.0",
        "https://github.com/aws/aws-ofi-nccl/releases/tag/v1.14.0", "2026-11-23",
        "the EFA network plugin for NCCL the training image builds from source",
    ),
    Fact(
        "aws-ofi-nccl.nccl-plugin-library", "libnccl-net.so",
        "aws/aws-ofi-nccl@v1.14.0:src/Makefile.am:68 (lib_LTLIBRARIES = libnccl-net.la)", "2026-11-23",
        "the file `make install` puts in <prefix>/lib for NVIDIA builds; v1.15.0 renamed it libnccl-net-ofi.so "
        "and adds a libnccl-net.so symlink (aws/aws-ofi-nccl@v1.15.0:src/Makefile.am:68,75-77)",
    ),
    Fact(
        "nccl.version", "2.26.2-1+cuda12.8",
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/ (libnccl2 package)", "2026-11-23",
        "pinned to the CUDA 12.8 base image's major.minor",
    ),
    Fact(
        "nccl.net-plugin-env", "NCCL_NET_PLUGIN is dlopen()ed as given first, then as libnccl-net-<value>.so; "
        "when neither loads NCCL logs at INFO level and falls back to its internal IB/socket transports",
        "NVIDIA/nccl@v2.26.2-1:src/plugin/plugin_open.cc:64-96 and src/plugin/net.cc:70", "2026-11-23",
        "a wrong plugin path is silent at the default NCCL_DEBUG level: the image must name a file that exists",
    ),
    Fact(
        "cuda-image.nccl-held", "apt-mark hold libnccl2",
        "gitlab.com/nvidia/container-images/cuda: dist/<distro>/<version>/runtime/Dockerfile", "2026-11-23",
        "NVIDIA's CUDA images hold libnccl2, so installing another version with apt-get -y needs "
        "--allow-change-held-packages",
    ),
    # ------------------------------------------------------------------ device plugins
    Fact(
        "chart.nvidia-device-plugin.default-affinity", "requires feature.node.kubernetes.io/pci-10de.present, "
        "feature.node.kubernetes.io/cpu-model.vendor_id=NVIDIA or nvidia.com/gpu.present=true",
        "NVIDIA/k8s-device-plugin@v0.17.4:deployments/helm/nvidia-device-plugin/values.yaml:63-84", "2026-11-23",
        "labels only NFD/GFD set; the platform overrides the affinity with openpod.io/accelerator=nvidia",
    ),
    Fact(
        "chart.aws-efa-k8s-device-plugin.instance-types", "required affinity on node.kubernetes.io/instance-type "
        "from supportedInstanceLabels; the v0.5.14 list lacks p5.4xlarge",
        "aws/eks-charts@3795d77:stable/aws-efa-k8s-device-plugin/values.yaml:10-168 (chart v0.5.14), "
        "templates/daemonset.yaml:47-61", "2026-11-23",
        "the platform passes every EFA type of its instance table instead",
    ),
    # ------------------------------------------------------------------ capacity
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
        "the DRA driver is not installed yet (open item)",
    ),
    Fact(
        "ec2.quota-codes.on-demand-vcpus", "P L-417A185B, Trn L-2C3B7624, G and VT L-DB2E81BA, "
        "Standard L-1216C47A (Running On-Demand <family> instances, vCPUs)",
        "https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html", "2026-11-23",
        "used by openpod preflight (infra/preflight.py)",
    ),
    Fact(
        "ec2.p6e-gb200.local-zone", "P6e-GB200 UltraServer Capacity Blocks need the Dallas Local Zone opt-in",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html", "2026-11-23",
        "so cfn-lint's per-region instance-type lists (E3628) do not know p6e-gb200.36xlarge; the examples' "
        "regular-AZ placement of the gb200 group is not yet checked against this",
    ),
    Fact(
        "hyperpod.deep-health-check.dcgm-level", "4",
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-deep-health-checks.html",
        "2026-11-23",
        "HyperPod's instance-level deep health check runs DCGM diagnostics at level 4; the default of the spec's "
        "instance_groups[].dcgm_level (infra/spec.py)",
    ),
)

# Facts the code relies on whose source has not been found or read yet: shown in docs/facts.md so nobody
# mistakes them for checked ones. Each says what the code assumes today.
UNVERIFIED: tuple[tuple[str, str], ...] = (
    ("p6e-gb200 instance-store NVMe", "the instance table says 4 x 7500 GB; issue 8 quotes the EKS guide as 3 x 7.5 TB"),
    ("p6e-gb200 EFA layout and bandwidth", "the table says 16 x 100 Gbps, efa-only on cards 1-16; public sources "
                                           "say 3200 Gbps total and 4 EFA devices per node on EKS"),
    ("aws-fsx-csi-driver add-on version", "pinned v1.7.0-eksbuild.1; no public listing of that string was found"),
    ("EKS add-on pins", "real versions, not checked as current for eks.version; `openpod preflight` checks them "
                        "against describe-addon-versions before a deploy"),
)

_BY_KEY = {f.key: f for f in FACTS}
assert len(_BY_KEY) == len(FACTS), "duplicate fact keys"


def fact(key: str) -> Fact:
    """The fact named ``key``; KeyError names the known keys' prefix when it is missing."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no fact {key!r} in openpod_core.facts (known: {', '.join(sorted(_BY_KEY))})") from None


def value(key: str) -> str:
    """Shorthand for ``fact(key).value``."""
    return fact(key).value
