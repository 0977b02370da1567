"""The supported device stack per accelerator family on EKS AL2023: which node software each family needs.

One path per family (sources in the facts register, ``openpod facts``):

- NVIDIA (P5/P5en/...): driver, container toolkit and fabric manager from the EKS-optimized AL2023 NVIDIA AMI;
  NVIDIA's device plugin advertises ``nvidia.com/gpu`` (placement pinned to ``openpod.io/accelerator=nvidia``,
  no NFD/GFD needed).
- NVIDIA with multi-node NVLink (P6e-GB200 UltraServers): the same, plus NVIDIA's DRA driver with only its
  ComputeDomain half on (IMEX channels across the UltraServer's nodes); GPUs stay with the device plugin,
  as the EKS guide recommends (facts: ``eks.p6e-gb200``, ``chart.nvidia-dra-driver-gpu``). Needs Kubernetes
  >= 1.33 (DRA).
- Neuron (Trn2/Trn2u): the Neuron driver from the EKS-optimized AL2023 Neuron AMI; the Neuron Helm chart's
  device plugin advertises ``aws.amazon.com/neuron`` / ``neuroncore``.
- EFA on every EFA type: the EFA device plugin (``vpc.amazonaws.com/efa``).

CDK-free, so the spec model and the constructs share it.
"""

from __future__ import annotations

from openpod_core.instance_types import Accelerator, InstanceType

# facts: eks.p6e-gb200 - "Amazon EKS supports P6e-GB200 UltraServers for Kubernetes versions 1.33 and above".
MULTI_NODE_NVLINK_MIN_KUBERNETES = "1.33"


def multi_node_nvlink(t: InstanceType) -> bool:
    """NVIDIA GPUs joined across instances by NVLink (an NVIDIA UltraServer): IMEX ComputeDomains apply."""
    return t.accelerator is Accelerator.NVIDIA and t.ultraserver is not None


def min_kubernetes(t: InstanceType) -> str | None:
    """The lowest Kubernetes minor version (``"1.33"``) the type's device stack runs on; None = any EKS version."""
    return MULTI_NODE_NVLINK_MIN_KUBERNETES if multi_node_nvlink(t) else None


def _minor(v: str) -> tuple[int, int]:
    major, minor = v.split(".")[:2]
    return int(major), int(minor)


def kubernetes_supports(t: InstanceType, version: str) -> bool:
    need = min_kubernetes(t)
    return need is None or _minor(version) >= _minor(need)
