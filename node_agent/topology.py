"""UltraServer labels on plain EKS: one value per NVLink domain, never one spanning two.

HyperPod labels its UltraServer nodes ``topology.k8s.aws/ultraserver-id``; plain EKS does not (it sets
``topology.k8s.aws/zone-id`` and, on supported types, the ``network-node-layer-N`` labels), so Kueue's
UltraServer topology (``infra/governance/queues.py``) would have no domains. The key stays HyperPod's, so job
manifests written for HyperPod place the same way. Two sources fill it:

* NVIDIA UltraServers (GB200 NVL72): each node's detector reads its GPUs' fabric registration from NVML - the
  NVLink domain's cluster UUID and the partition (clique) id, valid once Fabric Manager registered the GPU - and
  labels its own node ``<clusterUUID>.<cliqueId>``, the value NVIDIA's GPU feature discovery publishes as
  ``nvidia.com/gpu.clique`` (NVIDIA/k8s-device-plugin@v0.17.4 internal/lm/imex.go:29-80 getFabricIDs: every
  fabric-attached GPU must agree, else no label; internal/resource/nvml-device.go:105-119). The value is per
  instance and per NVLink partition, so a domain never covers two UltraServers.
* Other UltraServer types (Trn2): EC2 gives no per-UltraServer id. ``DescribeInstanceTopology`` names the
  instance's ``CapacityBlockId``, "only supported for UltraServer instances and identifies instances within the
  UltraServer domain" (facts: ``ec2.instance-topology.capacity-block-id``), but a Capacity Block can hold several
  UltraServers (``CapacityBlockOffering.UltraserverCount``; botocore 1.44.8 ec2 service-2.json). The controller
  labels a node with its block id only while the block holds no more nodes than one UltraServer; once it sees
  more, it removes the label from the block's nodes and reports it (log + node Event): no label means Kueue
  admits no job that requires the domain, instead of placing one across UltraServers.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable, Protocol

from openpod_core import instance_types
from openpod_core.instance_types import Accelerator
from openpod_core import labels as L
from node_agent.kube import Cluster, Node

log = logging.getLogger("node_agent.topology")

# DescribeInstanceTopology InstanceIds: "Maximum 100 explicitly specified instance IDs" (botocore 1.44.5
# ec2/2016-11-15/service-2.json, DescribeInstanceTopologyRequest; checked 2026-11-23).
MAX_IDS_PER_CALL = 100
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
COARSE_EVENT = "UltraServerLabelCoarse"                   # Event reason
COARSE_ANNOTATION = f"{L.DOMAIN}/ultraserver-label-coarse"  # the block last reported, so it is reported once


class TopologyCloud(Protocol):
    def instance_topology(self, instance_ids: list[str]) -> list[dict]:
        """``DescribeInstanceTopology(InstanceIds=...)["Instances"]``, all pages."""


def ultraserver_type(node: Node):
    """The node's UltraServer type (``openpod_core.instance_types.UltraServer``), or None."""
    name = node.labels.get(L.INSTANCE_TYPE)
    try:
        return instance_types.get(name).ultraserver if name else None
    except instance_types.UnknownInstanceType:
        return None


def ultraserver_ids(instances: Iterable[dict]) -> dict[str, str]:
    """Instance id -> UltraServer domain id, for the instances whose topology names one (``CapacityBlockId``)."""
    out = {}
    for i in instances:
        block = i.get("CapacityBlockId")
        if block and i.get("InstanceId"):
            out[i["InstanceId"]] = block
    return out


def nvlink_domain(gpus) -> str | None:
    """``<clusterUUID>.<cliqueId>`` when every fabric-registered GPU of the node agrees on both; else None
    (no registered GPU, or GPUs in different domains or partitions: no label rather than a wrong one)."""
    ids = {(g.fabric_cluster_uuid, g.fabric_clique_id) for g in gpus
           if g.fabric_cluster_uuid and g.fabric_clique_id is not None}
    if len(ids) != 1:
        if len(ids) > 1:
            log.warning("GPUs of this node report different NVLink domains %s: no UltraServer label", sorted(ids))
        return None
    ((cluster_uuid, clique),) = ids
    if cluster_uuid == "00000000-0000-0000-0000-000000000000":
        return None
    value = f"{cluster_uuid}.{clique}"
    return value if _LABEL_VALUE.match(value) else None


def label_own_nvlink_domain(cluster: Cluster, node_name: str, gpus, current: str | None) -> str | None:
    """The detector's step: label its own node with ``nvlink_domain`` when that differs from ``current`` (what it
    last wrote); returns the value now on the node as far as it knows."""
    value = nvlink_domain(gpus)
    if value is None or value == current:
        return current
    cluster.patch_node(node_name, labels={L.ULTRASERVER_ID: value})
    log.info("node %s: NVLink domain %s", node_name, value)
    return value


def _from_ec2(node: Node) -> bool:
    """UltraServer nodes the controller labels from EC2: those without an NVIDIA fabric the detector reads."""
    t = ultraserver_type(node)
    return bool(t) and instance_types.get(node.labels[L.INSTANCE_TYPE]).accelerator is not Accelerator.NVIDIA


def label_ultraservers(cluster: Cluster, cloud: TopologyCloud, nodes: list[Node], *, recheck: bool = False) -> int:
    """Label the (non-NVIDIA) UltraServer nodes of ``nodes`` that lack ``labels.ULTRASERVER_ID`` (all of them with
    ``recheck``); returns how many labels were written. Nodes EC2 names no block for yet (not running) are
    left for the next pass; blocks holding more nodes than one UltraServer lose their labels."""
    members = [n for n in nodes if _from_ec2(n) and n.instance_id]
    todo = sorted((n for n in members if recheck or L.ULTRASERVER_ID not in n.labels), key=lambda n: n.instance_id)
    found: dict[str, str] = {}
    ids = [n.instance_id for n in todo]
    for start in range(0, len(ids), MAX_IDS_PER_CALL):
        found.update(ultraserver_ids(cloud.instance_topology(ids[start:start + MAX_IDS_PER_CALL])))
    block_of = {n.name: found.get(n.instance_id) or n.labels.get(L.ULTRASERVER_ID) for n in members}
    block_size: dict[str, int] = {}
    for block in block_of.values():
        if block:
            block_size[block] = block_size.get(block, 0) + 1
    written = 0
    for n in todo:
        value = found.get(n.instance_id)
        if value is not None and block_size.get(value, 0) > ultraserver_type(n).instances:
            continue  # coarser than one NVLink domain: _report_coarse_blocks removes and reports
        if value is None:
            log.info("node %s (%s): EC2 reports no UltraServer domain yet; retrying next pass", n.name, n.instance_id)
            continue
        if not _LABEL_VALUE.match(value):
            log.error("node %s: UltraServer id %r is not a valid label value; not labelled", n.name, value)
            continue
        if n.labels.get(L.ULTRASERVER_ID) != value:
            cluster.patch_node(n.name, labels={L.ULTRASERVER_ID: value})
            n.labels[L.ULTRASERVER_ID] = value
            written += 1
    _report_coarse_blocks(cluster, members, block_of)
    return written


def _report_coarse_blocks(cluster: Cluster, members: list[Node], block_of: dict[str, str | None]) -> None:
    by_block: dict[str, list[Node]] = {}
    for n in members:
        if block_of.get(n.name):
            by_block.setdefault(block_of[n.name], []).append(n)
    for block, group in sorted(by_block.items()):
        size = ultraserver_type(group[0]).instances
        if len(group) > size:
            msg = (f"capacity block {block} holds {len(group)} nodes, more than one UltraServer "
                   f"({ultraserver_type(group[0]).name}: {size}); {L.ULTRASERVER_ID}={block} would span several "
                   "NVLink domains, so its nodes carry no UltraServer label (jobs requiring one domain wait)")
            log.warning("%s", msg)
            for n in group:  # never a domain spanning UltraServers: no label, no placement in one
                if L.ULTRASERVER_ID in n.labels:
                    cluster.patch_node(n.name, labels={L.ULTRASERVER_ID: None})
                    n.labels.pop(L.ULTRASERVER_ID, None)
            first = min(group, key=lambda n: n.name)
            if first.annotations.get(COARSE_ANNOTATION) != block:
                cluster.create_event(first.name, COARSE_EVENT, msg)
                cluster.patch_node(first.name, annotations={COARSE_ANNOTATION: block})
                first.annotations[COARSE_ANNOTATION] = block
