"""What one node of an instance group offers to jobs, in Kubernetes resource names.

Team quotas (nodes x this) and the pods ``submit`` builds (one pod per node)
are both computed here, so a job that asks for N whole nodes always fits both
the nodes and the quota.

Headroom: a node's allocatable CPU and memory is its capacity minus kubelet
reservations, and daemonsets (VPC CNI, kube-proxy, EFA and accelerator device
plugins, FSx CSI node, the node health agent, log shipping) take a share of
that. Quotas therefore hold back, per node, the larger of a fixed floor and a
fraction of the capacity:

* CPU: max(2 vCPU, 8 % of vCPUs), rounded up to whole vCPUs;
* memory: max(6 GiB, 8 % of memory), rounded up to whole GiB.

On a p5.48xlarge that leaves 176 of 192 vCPUs and 1884 of 2048 GiB to jobs.
Accelerators, EFA devices are not shared with daemonsets and count in full.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from openpod_core import labels
from openpod_core.instance_types import Accelerator, InstanceType

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neuron"
EFA = labels.EFA_RESOURCE
HUGEPAGES = labels.HUGEPAGES_RESOURCE

CPU_HEADROOM_MIN = 2
MEMORY_HEADROOM_MIN_GIB = 6
HEADROOM_FRACTION = 0.08

# Order of covered resources in every ClusterQueue (Kueue wants one order).
RESOURCE_ORDER = (CPU, MEMORY, GPU, NEURON, EFA)

# Logical NeuronCores torchrun starts one process for, per Neuron device
# (Trainium2 defaults to logical NeuronCore size 2: 8 physical = 4 logical).
NEURON_CORES_PER_DEVICE = {"Trainium": 2, "Trainium2": 4}


def cpu_headroom(t: InstanceType) -> int:
    return max(CPU_HEADROOM_MIN, math.ceil(t.vcpus * HEADROOM_FRACTION))


def memory_headroom_gib(t: InstanceType) -> int:
    return max(MEMORY_HEADROOM_MIN_GIB, math.ceil(t.memory_gib * HEADROOM_FRACTION))


@dataclass(frozen=True)
class NodeShare:
    """Resources of one node (or a fraction of one) as integers: vCPU, GiB, devices."""

    cpu: int
    memory_gib: int
    accelerators: int = 0
    efa: int = 0

    def quantities(self, t: InstanceType) -> dict[str, int]:
        """Resource name -> amount, for the resources this type has."""
        out = {CPU: self.cpu, MEMORY: self.memory_gib}
        if t.device_resource:
            out[t.device_resource] = self.accelerators
        if t.efa_supported:
            out[EFA] = self.efa
        return out


def node_share(t: InstanceType) -> NodeShare:
    """What one whole node gives to jobs (capacity less headroom)."""
    return NodeShare(
        cpu=t.vcpus - cpu_headroom(t),
        memory_gib=t.memory_gib - memory_headroom_gib(t),
        accelerators=t.accelerator_count,
        efa=t.efa_count,
    )


def pod_share(t: InstanceType, accelerators: int) -> NodeShare:
    """What a pod using ``accelerators`` of a node's devices asks for.

    A whole node gets all of it; a fraction gets CPU, memory and EFA devices in
    proportion (at least one EFA device on EFA types).
    """
    whole = node_share(t)
    if not t.is_accelerated or accelerators >= t.accelerator_count:
        return whole
    frac = accelerators / t.accelerator_count
    efa = max(1, math.floor(whole.efa * frac)) if whole.efa else 0
    return NodeShare(cpu=max(1, math.floor(whole.cpu * frac)),
                     memory_gib=max(1, math.floor(whole.memory_gib * frac)),
                     accelerators=accelerators, efa=efa)


def hugepages_share_mi(t: InstanceType, accelerators: int) -> int:
    """2 MiB hugepages (MiB) a pod using ``accelerators`` of an EFA node's devices may request: the
    node's preallocated ``labels.EFA_HUGEPAGES_MI`` in proportion, whole pages, rounded down, so the
    part-node pods that fill a node fit its hugepages exactly like its devices (a pod asking for all of
    them would take the whole node while its quota charge is a fraction of one). 0 on non-EFA types."""
    if not t.efa_supported:
        return 0
    if not t.is_accelerated or accelerators >= t.accelerator_count:
        return labels.EFA_HUGEPAGES_MI
    pages = labels.EFA_HUGEPAGES_MI // labels.HUGEPAGE_SIZE_MI * accelerators // t.accelerator_count
    return pages * labels.HUGEPAGE_SIZE_MI


def quantity(resource: str, amount: int) -> str:
    """Kubernetes quantity string for an integer amount of ``resource``."""
    return f"{amount}Gi" if resource == MEMORY else str(amount)


def processes_per_node(t: InstanceType, accelerators: int) -> int:
    """torchrun --nproc-per-node: one per GPU, one per logical NeuronCore, 1 on CPU nodes."""
    if t.accelerator is Accelerator.NVIDIA:
        return accelerators
    if t.accelerator is Accelerator.NEURON:
        return accelerators * NEURON_CORES_PER_DEVICE.get(t.accelerator_model, 2)
    return 1
