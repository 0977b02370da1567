"""UltraServer labels on plain EKS: one NVLink domain per value. GB200 nodes label themselves from their GPUs'
fabric registration (NVML); Trn2 UltraServer nodes get their Capacity Block id from the controller
(DescribeInstanceTopology) only while the block holds one UltraServer.

EKS itself sets no UltraServer label on plain EKS nodes (docs/platform.md, "UltraServer topology"); Kueue's
UltraServer topology (infra/governance/queues.py) needs one per node to have domains at all. The recorded
response (fixtures/topology/README.md) stands in for EC2: moto does not implement the call.
"""

from __future__ import annotations

import json

import pytest
from pathlib import Path

from openpod_core import labels as L
from node_agent.kube import InMemoryCluster, Node
from node_agent.topology import MAX_IDS_PER_CALL, label_ultraservers, ultraserver_ids
from tests.http_reply import reply

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "topology" /
                       "describe-instance-topology-ultraservers.json").read_text())


class RecordedEc2:
    """Answers DescribeInstanceTopology from the recorded response, as EC2 does: only the asked instances."""

    def __init__(self, response=RECORDED):
        self.instances = {i["InstanceId"]: i for i in response["Instances"]}
        self.calls: list[list[str]] = []

    def instance_topology(self, instance_ids: list[str]) -> list[dict]:
        self.calls.append(list(instance_ids))
        return [self.instances[i] for i in instance_ids if i in self.instances]


def node(name: str, instance_id: str, itype: str, **labels) -> Node:
    return Node(name, labels={L.INSTANCE_TYPE: itype, **labels}, provider_id=f"aws:///us-east-1b/{instance_id}")


def cluster(*nodes: Node) -> InMemoryCluster:
    c = InMemoryCluster()
    for n in nodes:
        c.add_node(n)
    return c


def test_the_ultraserver_id_is_the_capacity_block_of_ultraserver_instances_only():
    ids = ultraserver_ids(RECORDED["Instances"])
    assert ids == {"i-0a00000000000gb01": "cb-0123456789abcdef0", "i-0a00000000000gb02": "cb-0123456789abcdef0",
                   "i-0a00000000000gb03": "cb-0fedcba9876543210", "i-0a0000000000trn01": "cb-0aaaabbbbccccdddd"}


def test_the_controller_labels_trn2u_nodes_from_ec2_and_leaves_gb200_to_the_detector():
    """GB200 nodes get their NVLink domain from their own GPUs (the detector, below): a Capacity Block id can
    cover several UltraServers."""
    c = cluster(node("gb-1", "i-0a00000000000gb01", "p6e-gb200.36xlarge"),
                node("trn-1", "i-0a0000000000trn01", "trn2u.48xlarge"),
                node("p5-1", "i-0a00000000000p501", "p5.48xlarge"))
    ec2 = RecordedEc2()
    assert label_ultraservers(c, ec2, c.list_nodes()) == 1
    got = {n.name: n.labels.get(L.ULTRASERVER_ID) for n in c.list_nodes()}
    assert got == {"gb-1": None, "trn-1": "cb-0aaaabbbbccccdddd", "p5-1": None}
    assert ec2.calls == [["i-0a0000000000trn01"]]


def _trn(n: int, block: str | None) -> dict:
    i = {"InstanceId": f"i-{n:017x}", "InstanceType": "trn2u.48xlarge"}
    return {**i, "CapacityBlockId": block} if block else i


def test_labelled_nodes_are_not_asked_again_and_a_node_not_yet_running_is_retried():
    c = cluster(node("trn-1", f"i-{1:017x}", "trn2u.48xlarge"), node("trn-2", f"i-{2:017x}", "trn2u.48xlarge"))
    ec2 = RecordedEc2({"Instances": [_trn(1, "cb-0aaaabbbbccccdddd"), _trn(2, None)]})
    assert label_ultraservers(c, ec2, c.list_nodes()) == 1
    assert L.ULTRASERVER_ID not in c.get_node("trn-2").labels          # no CapacityBlockId yet: no label
    assert label_ultraservers(c, ec2, c.list_nodes()) == 0
    assert ec2.calls[1] == [f"i-{2:017x}"]                              # only the unlabelled one, again


def test_a_wrong_label_is_corrected():
    c = cluster(node("trn-1", "i-0a0000000000trn01", "trn2u.48xlarge", **{L.ULTRASERVER_ID: "cb-stale"}))
    assert label_ultraservers(c, RecordedEc2(), c.list_nodes(), recheck=True) == 1
    assert c.get_node("trn-1").labels[L.ULTRASERVER_ID] == "cb-0aaaabbbbccccdddd"


def test_calls_are_batched_at_the_apis_limit():
    response = {"Instances": [_trn(n, f"cb-{n // 4:017x}") for n in range(250)]}   # one UltraServer per block
    c = cluster(*(node(f"trn-{n}", f"i-{n:017x}", "trn2u.48xlarge") for n in range(250)))
    ec2 = RecordedEc2(response)
    assert label_ultraservers(c, ec2, c.list_nodes()) == 250
    assert [len(x) for x in ec2.calls] == [MAX_IDS_PER_CALL, MAX_IDS_PER_CALL, 50]


def test_a_block_larger_than_one_ultraserver_gets_no_label_and_is_reported(caplog):
    """A Capacity Block may hold several UltraServers (CapacityBlockOffering.UltraserverCount): its id would be a
    domain spanning NVLink domains, so no node keeps it - including those labelled while fewer were up."""
    response = {"Instances": [_trn(n, "cb-0123456789abcdef0") for n in range(5)]}
    c = cluster(*(node(f"trn-{n}", f"i-{n:017x}", "trn2u.48xlarge") for n in range(4)))
    assert label_ultraservers(c, RecordedEc2(response), c.list_nodes()) == 4      # one UltraServer's worth
    c.add_node(node("trn-4", f"i-{4:017x}", "trn2u.48xlarge"))
    label_ultraservers(c, RecordedEc2(response), c.list_nodes())
    assert all(L.ULTRASERVER_ID not in n.labels for n in c.list_nodes())
    assert any("cb-0123456789abcdef0" in r.getMessage() and "5 nodes" in r.getMessage() and ": 4)" in r.getMessage()
               for r in caplog.records)
    assert any(e.reason == "UltraServerLabelCoarse" and e.node == "trn-0" for e in c.events)


def _gpus(cluster_uuid: str, cliques: list[int]):
    from node_agent.gpu import GpuState

    return [GpuState(index=i, fabric_state="Completed", fabric_status="Success", fabric_cluster_uuid=cluster_uuid,
                     fabric_clique_id=q) for i, q in enumerate(cliques)]


def test_the_nvlink_domain_is_the_gpus_cluster_uuid_and_clique_as_gfd_publishes_it():
    from node_agent.gpu import GpuState
    from node_agent.topology import nvlink_domain

    u = "9f3c2a1e-0b7d-4c55-8e21-6d0a4b1c2f33"
    assert nvlink_domain(_gpus(u, [7, 7, 7, 7])) == f"{u}.7"
    assert nvlink_domain(_gpus(u, [7, 7, 8, 7])) is None          # GPUs disagree: no label rather than a wrong one
    assert nvlink_domain(_gpus(u, [])) is None
    assert nvlink_domain([GpuState(index=0, fabric_state="In Progress")]) is None  # not registered yet


def test_the_detector_labels_its_own_gb200_node_from_nvml_fabric_info():
    """The real nvidia-ml-py over the libnvidia-ml stand-in (tests/node_agent/nvml_lib.py), whose
    nvmlDeviceGetGpuFabricInfo fills c_nvmlGpuFabricInfo_t (nvidia-ml-py 13.615.71 pynvml.py:7198-7204: clusterUuid
    16 x uint8, status, cliqueId, state): two nodes of one NVL72 and one of another get two different values."""
    import uuid as uuid_mod

    from node_agent import gpu
    from node_agent.detector import Detector
    from openpod_core import instance_types

    from tests.node_agent.nvml_lib import LibNvml, loaded

    rack_a, rack_b = uuid_mod.uuid4().bytes, uuid_mod.uuid4().bytes
    c = cluster(Node("a1"), Node("a2"), Node("b1"))
    for name, rack in (("a1", rack_a), ("a2", rack_a), ("b1", rack_b)):
        with loaded(LibNvml(gpus=4, fabric_clique=(rack, 32766))) as nvml:
            d = Detector(c, name, instance_types.get("p6e-gb200.36xlarge"),
                         gpu_source_factory=lambda nvml=nvml: gpu.NvmlSource(nvml=nvml))
            d.poll_gpu()
    values = {n.name: n.labels.get(L.ULTRASERVER_ID) for n in c.list_nodes()}
    assert values["a1"] == values["a2"] == f"{uuid_mod.UUID(bytes=rack_a)}.32766"
    assert values["b1"] == f"{uuid_mod.UUID(bytes=rack_b)}.32766"


class RecordedCloud(RecordedEc2):
    """The controller's cloud: EC2's topology from the recording; remediation calls are not expected here."""

    def reboot(self, instance_id: str) -> None:
        raise AssertionError("no reboot expected")

    def mark_unhealthy(self, instance_id: str) -> None:
        raise AssertionError("no replacement expected")


def test_a_controller_pass_labels_the_ultraserver_nodes():
    from node_agent.controller import Controller

    c = cluster(node("gb-1", "i-0a00000000000gb01", "p6e-gb200.36xlarge", **{L.INSTANCE_GROUP: "gb200"}),
                node("trn-1", "i-0a0000000000trn01", "trn2u.48xlarge", **{L.INSTANCE_GROUP: "trn2u"}))
    Controller(c, RecordedCloud()).reconcile_once()
    assert L.ULTRASERVER_ID not in c.get_node("gb-1").labels             # the detector's, from its GPUs
    assert c.get_node("trn-1").labels[L.ULTRASERVER_ID] == "cb-0aaaabbbbccccdddd"


def test_an_ec2_failure_does_not_stop_the_remediation_pass(caplog):
    from node_agent.controller import Controller

    class Down(RecordedCloud):
        def instance_topology(self, instance_ids):
            raise RuntimeError("Throttling")

    c = cluster(node("trn-1", "i-0a0000000000trn01", "trn2u.48xlarge", **{L.INSTANCE_GROUP: "trn2u"}))
    Controller(c, Down()).reconcile_once()
    assert L.ULTRASERVER_ID not in c.get_node("trn-1").labels
    assert any("UltraServer labels" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ AwsCloud over HTTP, EC2's wire format
def _xml(instances: list[dict], next_token: str | None) -> bytes:
    """A DescribeInstanceTopology response body in EC2's query-protocol XML (element names: the API reference's
    InstanceTopology members, instanceSet/nextToken from botocore's DescribeInstanceTopologyResult)."""
    items = []
    for i in instances:
        nodes = "".join(f"<item>{n}</item>" for n in i.get("NetworkNodes", []))
        block = f"<capacityBlockId>{i['CapacityBlockId']}</capacityBlockId>" if "CapacityBlockId" in i else ""
        items.append(f"<item><instanceId>{i['InstanceId']}</instanceId><instanceType>{i['InstanceType']}"
                     f"</instanceType><networkNodeSet>{nodes}</networkNodeSet><availabilityZone>"
                     f"{i['AvailabilityZone']}</availabilityZone><zoneId>{i['ZoneId']}</zoneId>{block}</item>")
    token = f"<nextToken>{next_token}</nextToken>" if next_token else ""
    return (f'<?xml version="1.0" encoding="UTF-8"?><DescribeInstanceTopologyResponse '
            f'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>req-1</requestId>'
            f'<instanceSet>{"".join(items)}</instanceSet>{token}</DescribeInstanceTopologyResponse>').encode()


@pytest.fixture
def ec2_server():
    """An HTTP server answering DescribeInstanceTopology from the recording in two pages; records each request."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs

    requests: list[dict] = []
    instances = RECORDED["Instances"]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            q = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            requests.append(q)
            asked = [v[0] for k, v in sorted(q.items()) if k.startswith("InstanceId.")]
            found = [i for i in instances if i["InstanceId"] in asked]
            page, token = (found[2:], None) if q.get("NextToken") == ["page-2"] else (found[:2], "page-2")
            reply(self, 200, _xml(page, token), "text/xml")

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", requests
    server.shutdown()


def _aws_cloud(endpoint):
    import boto3

    from node_agent.cloud import AwsCloud

    s = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    return AwsCloud(region="us-east-1", endpoint_url=endpoint, session=s)


def test_aws_cloud_asks_ec2_for_the_given_instances_and_follows_pages(ec2_server):
    endpoint, requests = ec2_server
    ids = ["i-0a00000000000gb01", "i-0a00000000000gb02", "i-0a00000000000gb03", "i-0a0000000000trn01"]
    got = _aws_cloud(endpoint).instance_topology(ids)
    assert [i["InstanceId"] for i in got] == ids
    assert [r["Action"] for r in requests] == [["DescribeInstanceTopology"]] * 2
    assert all("MaxResults" not in r for r in requests)     # not allowed together with InstanceIds
    assert requests[1]["NextToken"] == ["page-2"]


def _botocore_knows_capacity_block_id() -> bool:
    import botocore.session

    shape = botocore.session.get_session().get_service_model("ec2").shape_for("InstanceTopology")
    return "CapacityBlockId" in shape.members


@pytest.mark.skipif(not _botocore_knows_capacity_block_id(),
                    reason="this botocore's EC2 model predates InstanceTopology.CapacityBlockId (the agent extra "
                           "requires boto3 >= 1.40, where it is present)")
def test_aws_cloud_reads_the_capacity_block_over_the_wire(ec2_server):
    endpoint, _ = ec2_server
    ids = ["i-0a00000000000gb01", "i-0a00000000000gb02", "i-0a00000000000gb03", "i-0a0000000000trn01"]
    got = ultraserver_ids(_aws_cloud(endpoint).instance_topology(ids))
    assert got["i-0a00000000000gb03"] == "cb-0fedcba9876543210" and len(got) == 4
