"""UltraServer labels on plain EKS, from EC2's instance topology.

HyperPod labels its UltraServer nodes ``topology.k8s.aws/ultraserver-id``; plain EKS does not (it sets
``topology.k8s.aws/zone-id`` and, on supported types, the ``network-node-layer-N`` labels), so Kueue's
UltraServer topology (``infra/governance/queues.py``) would have no domains. The remediation controller,
which already holds EC2 read access, fills the gap: for every node of an UltraServer instance type without the
label it calls ``DescribeInstanceTopology`` and labels the node with the instance's ``CapacityBlockId`` - the
field EC2 documents as "only supported for UltraServer instances and identifies instances within the
UltraServer domain" (facts: ``ec2.instance-topology.capacity-block-id``). The key stays HyperPod's, so job
manifests written for HyperPod place the same way.

A Capacity Block can hold more than one UltraServer (``CapacityBlockOffering.UltraserverCount``); its id is
then coarser than one NVLink domain. The controller reports that (log + node Event) when it sees more nodes
with one block id than one UltraServer has.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable, Protocol

from openpod_core import instance_types
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


def label_ultraservers(cluster: Cluster, cloud: TopologyCloud, nodes: list[Node], *, recheck: bool = False) -> int:
    """Label the UltraServer nodes of ``nodes`` that lack ``labels.ULTRASERVER_ID`` (all of them with
    ``recheck``); returns how many labels were written. Nodes EC2 names no block for yet (not running) are
    left for the next pass."""
    members = [n for n in nodes if ultraserver_type(n) and n.instance_id]
    todo = sorted((n for n in members if recheck or L.ULTRASERVER_ID not in n.labels), key=lambda n: n.instance_id)
    found: dict[str, str] = {}
    ids = [n.instance_id for n in todo]
    for start in range(0, len(ids), MAX_IDS_PER_CALL):
        found.update(ultraserver_ids(cloud.instance_topology(ids[start:start + MAX_IDS_PER_CALL])))
    written = 0
    for n in todo:
        value = found.get(n.instance_id)
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
    _report_coarse_blocks(cluster, members)
    return written


def _report_coarse_blocks(cluster: Cluster, members: list[Node]) -> None:
    by_block: dict[str, list[Node]] = {}
    for n in members:
        if L.ULTRASERVER_ID in n.labels:
            by_block.setdefault(n.labels[L.ULTRASERVER_ID], []).append(n)
    for block, group in sorted(by_block.items()):
        size = ultraserver_type(group[0]).instances
        if len(group) > size:
            msg = (f"capacity block {block} holds {len(group)} nodes, more than one UltraServer "
                   f"({ultraserver_type(group[0]).name}: {size}); {L.ULTRASERVER_ID}={block} spans several "
                   "NVLink domains, so a job required in one 'ultraserver' domain may cross UltraServers")
            log.warning("%s", msg)
            first = min(group, key=lambda n: n.name)
            if first.annotations.get(COARSE_ANNOTATION) != block:
                cluster.create_event(first.name, COARSE_EVENT, msg)
                cluster.patch_node(first.name, annotations={COARSE_ANNOTATION: block})
                first.annotations[COARSE_ANNOTATION] = block
