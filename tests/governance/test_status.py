"""``openpod status`` (issue 40 item 5): groups, nodes, health labels, hot spares and queue use, read through the
kubernetes client from the API-server stand-in the remediation controller tests use
(tests/node_agent/fake_apiserver.py), holding Nodes as the node groups and the node agent label and taint them and
Kueue v0.19.2 ClusterQueues / LocalQueues with status, each checked against the CRD's schema."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from infra.cli.main import main
from infra.governance import all_objects
from infra.spec.loading import load_spec
from node_agent.kube import Taint
from openpod_core import labels as L
from tests.conftest import EXAMPLES, free_port, write_kubeconfig
from tests.governance import k8s_schema
from tests.node_agent.fake_apiserver import FakeApiServer

SPEC = str(EXAMPLES / "default.yaml")
RECORDED = json.loads(Path(__file__).with_name("fixtures").joinpath("live_cluster.json").read_text())
KUEUE = ("kueue.x-k8s.io", "v1beta2")
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
NOT_READY = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
             "message": "Kubelet stopped posting node status."}
NOSCHED = "NoSchedule"


def _node_labels(group: str, itype: str, health: str | None = L.HEALTH_SCHEDULABLE, **extra) -> dict:
    """The labels the node groups set at launch (platform_constructs: the instance group's labels) and, when
    ``health``, the node agent's health label."""
    accel = {"p5.48xlarge": ("nvidia", "true"), "trn2.48xlarge": ("neuron", "true"),
             "p6e-gb200.36xlarge": ("nvidia", "true")}.get(itype, ("none", "false"))
    out = {L.INSTANCE_GROUP: group, L.INSTANCE_TYPE: itype, L.ACCELERATOR: accel[0], L.EFA: accel[1], **extra}
    if health:
        out[L.HEALTH_STATUS] = health
    return out


def local_queues() -> list[dict]:
    """The platform's LocalQueues (as the spec makes them) with the status Kueue's LocalQueue reconciler writes."""
    spec = load_spec(SPEC)
    out = []
    counts = {"research": (1, 2, 2), "product": (3, 1, 1)}   # pending, reserving, admitted
    for o in all_objects(spec):
        if o["kind"] == "LocalQueue":
            o = copy.deepcopy(o)
            pending, reserving, admitted = counts[o["metadata"]["namespace"]]
            o["metadata"].update(uid=f"uid-lq-{o['metadata']['name']}", creationTimestamp="2026-11-20T08:00:00Z")
            o["status"] = {"pendingWorkloads": pending, "reservingWorkloads": reserving,
                           "admittedWorkloads": admitted,
                           "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                           "message": "Can submit new workloads to localQueue",
                                           "lastTransitionTime": "2026-11-20T08:00:01Z"}]}
            out.append(o)
    return out


def cluster_queues() -> list[dict]:
    return [o for o in RECORDED["objects"] if o["kind"] == "ClusterQueue"]


@pytest.mark.skipif(not k8s_schema.schemas_present(), reason=k8s_schema.SKIP_REASON)
def test_the_stand_in_queues_are_valid_kueue_objects_with_status():
    for o in [*cluster_queues(), *local_queues()]:
        assert o.get("status"), o["metadata"]["name"]
        assert k8s_schema.validate(o) == []


def populate(api: FakeApiServer, kueue: bool = True) -> None:
    api.add_node("sys-a", _node_labels("system", "m7i.2xlarge", health=None), conditions=[READY],
                 taints=[Taint(L.SYSTEM_TAINT, L.SYSTEM_TAINT_VALUE, NOSCHED)])
    api.add_node("sys-b", _node_labels("system", "m7i.2xlarge", health=None), conditions=[READY],
                 taints=[Taint(L.SYSTEM_TAINT, L.SYSTEM_TAINT_VALUE, NOSCHED)])
    api.add_node("p5-a", _node_labels("p5", "p5.48xlarge"), conditions=[READY, {
        "type": L.HEALTH_CONDITION, "status": "True", "reason": "Healthy"}])
    api.add_node("p5-b", _node_labels("p5", "p5.48xlarge", L.HEALTH_PENDING_REPLACEMENT), conditions=[READY, {
        "type": L.HEALTH_CONDITION, "status": "False", "reason": "Xid79"}], unschedulable=True,
        taints=[Taint(L.UNHEALTHY_TAINT, "true", NOSCHED)])
    api.add_node("p5-c", _node_labels("p5", "p5.48xlarge", **{L.HOT_SPARE: "true"}), conditions=[READY],
                 taints=[Taint(L.HOT_SPARE_TAINT, "true", NOSCHED)])
    api.add_node("p5-d", _node_labels("p5", "p5.48xlarge", health=None), conditions=[READY],
                 taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE, NOSCHED)])
    api.add_node("trn2-a", _node_labels("trn2", "trn2.48xlarge"), conditions=[READY],
                 taints=[Taint(L.PAIR_CHECK_TAINT, "failed", NOSCHED)])
    api.add_node("trn2-b", _node_labels("trn2", "trn2.48xlarge", L.HEALTH_PENDING_REBOOT), conditions=[NOT_READY])
    api.add_node("gb200-a", _node_labels("gb200", "p6e-gb200.36xlarge", health=None), conditions=[READY])
    api.add_node("stray", {L.INSTANCE_TYPE: "m5.large"}, conditions=[READY])
    if kueue:
        for o in cluster_queues():
            api.add_custom(*KUEUE, "clusterqueues", o)
        for o in local_queues():
            api.add_custom(*KUEUE, "localqueues", o)


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def cluster(tmp_path):
    with FakeApiServer() as api:
        yield api, write_kubeconfig(tmp_path / "kubeconfig", api.url, "t")


def test_status_as_data(cluster):
    api, cfg = cluster
    populate(api)
    result = run("status", "--spec", SPEC, "--kubeconfig", str(cfg), "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    groups = {g["name"]: g for g in data["groups"]}
    assert set(groups) == {"system", "p5", "trn2", "gb200", "-"}
    p5 = groups["p5"]
    assert (p5["nodes"], p5["ready"], p5["schedulable"], p5["hot_spares"], p5["hot_spares_wanted"],
            p5["checking"], p5["pending_replacement"], p5["other"]) == (4, 4, 1, 1, 1, 1, 1, 0)
    trn2 = groups["trn2"]
    assert (trn2["nodes"], trn2["ready"], trn2["checking"], trn2["pending_reboot"], trn2["other"]) == (2, 1, 1, 0, 1)
    assert (groups["gb200"]["nodes"], groups["gb200"]["other"], groups["gb200"]["max_size"]) == (1, 1, 18)
    assert (groups["system"]["nodes"], groups["system"]["schedulable"]) == (2, 2)
    assert groups["-"]["nodes"] == 1
    nodes = {n["name"]: n for n in data["nodes"]}
    assert nodes["p5-b"]["state"] == L.HEALTH_PENDING_REPLACEMENT and nodes["p5-b"]["cordoned"]
    assert nodes["p5-b"]["accelerator_healthy"] == "False"
    assert nodes["p5-b"]["taints"] == [f"{L.UNHEALTHY_TAINT}=true:NoSchedule"]
    assert nodes["p5-c"]["state"] == "HotSpare" and nodes["p5-c"]["hot_spare"]
    assert nodes["p5-d"]["state"] == "HealthCheck" and nodes["p5-d"]["health"] is None
    assert nodes["trn2-a"]["state"] == "PairCheck(failed)"
    assert nodes["trn2-b"]["state"] == "NotReady" and nodes["trn2-b"]["health"] == L.HEALTH_PENDING_REBOOT
    assert nodes["sys-a"]["state"] == "Ready"           # the agent does not watch the system group
    assert nodes["gb200-a"]["state"] == "Unlabelled"    # it watches this one but has not labelled it
    assert nodes["stray"]["group"] == "-" and nodes["stray"]["state"] == "Ready"
    usage = {(u["team"], u["group"]): u for u in data["queues"]}
    assert usage[("research", "p5")]["nominal_nodes"] == 2
    lqs = {q["namespace"]: q for q in data["local_queues"]}
    assert (lqs["research"]["pending"], lqs["research"]["reserving"], lqs["research"]["admitted"]) == (1, 2, 2)
    assert lqs["product"]["cluster_queue"] == "product"
    assert data["queue_error"] is None
    # what was read: the Nodes and the two Kueue lists, through the kubernetes client, nothing written
    assert {("GET", "/api/v1/nodes"), ("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"),
            ("GET", "/apis/kueue.x-k8s.io/v1beta2/localqueues")} <= set(api.requests)
    assert {m for m, _ in api.requests} == {"GET"}


def test_status_table(cluster):
    api, cfg = cluster
    populate(api)
    result = run("status", "--spec", SPEC, "--kubeconfig", str(cfg))
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    assert rows["GROUP"][:3] == ["GROUP", "TYPE", "NODES"]
    assert rows["p5"][:3] == ["p5", "p5.48xlarge", "4"] and "1/1" in rows["p5"]
    assert rows["p5-b"][4] == L.HEALTH_PENDING_REPLACEMENT and "unhealthy=true:NoSchedule" in rows["p5-b"]
    assert rows["trn2-a"][4] == "PairCheck(failed)"
    assert any(r[:2] == ["research", "p5"] for r in (line.split() for line in result.stdout.splitlines()))
    assert rows["NAMESPACE"][:2] == ["NAMESPACE", "LOCAL"]


def test_a_cluster_without_kueue_still_shows_its_nodes(cluster):
    api, cfg = cluster
    populate(api, kueue=False)
    result = run("status", "--spec", SPEC, "--kubeconfig", str(cfg), "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["nodes"]) == 10 and data["queues"] is None
    assert "404" in data["queue_error"]
    table = run("status", "--spec", SPEC, "--kubeconfig", str(cfg)).stdout
    assert "queues: not read (the API server refused to list ClusterQueues (404 Not Found))" in table


def test_an_empty_cluster(cluster):
    api, cfg = cluster
    api.add_custom(*KUEUE, "clusterqueues")
    api.add_custom(*KUEUE, "localqueues")
    result = run("status", "--spec", SPEC, "--kubeconfig", str(cfg))
    assert result.exit_code == 0, result.output
    assert "no nodes" in result.stdout


def test_an_unreachable_cluster_is_one_error_line(tmp_path):
    cfg = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}", "t")
    result = run("status", "--spec", SPEC, "--kubeconfig", str(cfg))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the cluster API server"), lines


def test_no_kubeconfig_is_one_error_line(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = run("status", "--spec", SPEC, "--kubeconfig", str(tmp_path / "missing"))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines


def test_a_bad_output_format_is_one_line():
    result = run("status", "--spec", SPEC, "-o", "xml")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == ["error: -o/--output 'xml': choose one of table, json, yaml"]
