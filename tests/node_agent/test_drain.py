"""The node agent's drain path for a whole instance group (``openpod drain``), before a node group upgrade.

Runs on the in-memory Kubernetes boundary (node_agent.kube.InMemoryCluster), which
keeps the Eviction API's semantics: 429 while a PodDisruptionBudget forbids it.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from infra.cli import drain as drain_cmd
from infra.cli.main import main
from node_agent.drain import DRAINED_BY, drain_group, uncordon_group
from node_agent.kube import InMemoryCluster, Node, Pod
from openpod_core import labels as L
from tests.conftest import EXAMPLES

SPEC = ["--spec", str(EXAMPLES / "default.yaml")]


def cluster() -> InMemoryCluster:
    c = InMemoryCluster()
    for name, group in (("p5-a", "p5"), ("p5-b", "p5"), ("p5-c", "p5"), ("cpu-a", "system")):
        c.add_node(Node(name, labels={L.INSTANCE_GROUP: group}))
    c.add_pod(Pod("research", "llama-0", "p5-a", labels={"job": "llama"}, owner_kind="Job"))
    c.add_pod(Pod("research", "llama-1", "p5-b", labels={"job": "llama"}, owner_kind="Job"))
    c.add_pod(Pod("kube-system", "efa-plugin-x", "p5-a", owner_kind="DaemonSet"))
    c.add_pod(Pod("research", "notebook", "cpu-a", owner_kind="ReplicaSet"))
    return c


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_a_group_is_cordoned_then_emptied_with_budgets_honoured_and_nothing_else_touched():
    c, clock, lines = cluster(), Clock(), []
    pdb = c.add_pdb("research", {"job": "llama"}, disruptions_allowed=1)

    def sleep(s):  # the first pod has gone; its budget allows one more disruption a little later
        clock.sleep(s)
        pdb.disruptions_allowed = 1

    result = drain_group(c, "p5", timeout_s=60, poll_s=5, progress=lines.append, clock=clock, sleep=sleep)
    assert result.done and result.nodes == ["p5-a", "p5-b", "p5-c"]
    assert all(c.nodes[n].unschedulable and c.nodes[n].annotations[DRAINED_BY] == "openpod-drain"
               for n in result.nodes)
    assert c.evictions == [("research", "llama-0"), ("research", "llama-1")]  # one at a time: the budget
    assert ("kube-system", "efa-plugin-x") in c.pods                          # DaemonSet pods stay
    assert not c.nodes["cpu-a"].unschedulable and ("research", "notebook") in c.pods
    assert lines[0] == "cordoned 3 node(s) of group p5" and lines[-1] == "group p5 drained in 5s"
    assert "1 pod(s) still on 1 node(s)" in lines[1]


def test_a_budget_that_never_allows_it_times_out_naming_the_pod():
    c, clock = cluster(), Clock()
    c.add_pdb("research", {"job": "llama"}, disruptions_allowed=0)
    result = drain_group(c, "p5", timeout_s=30, poll_s=10, clock=clock, sleep=clock.sleep)
    assert not result.done and result.seconds == 30
    assert result.remaining == {"p5-a": ["research/llama-0"], "p5-b": ["research/llama-1"], "p5-c": []}


def test_undo_uncordons_only_what_the_drain_cordoned():
    c = cluster()
    c.patch_node("p5-c", unschedulable=True)  # cordoned by the remediation controller: not ours
    drain_group(c, "p5", timeout_s=1, poll_s=1, clock=Clock(), sleep=lambda s: None)
    assert DRAINED_BY not in c.nodes["p5-c"].annotations
    assert uncordon_group(c, "p5") == ["p5-a", "p5-b"]
    assert not c.nodes["p5-a"].unschedulable and DRAINED_BY not in c.nodes["p5-a"].annotations
    assert c.nodes["p5-c"].unschedulable


@pytest.fixture
def fake_cluster(monkeypatch):
    c = cluster()
    monkeypatch.setattr(drain_cmd, "connect", lambda kubeconfig, context: c)
    return c


def test_cli_drains_and_says_what_to_do_next(fake_cluster):
    r = CliRunner().invoke(main, ["drain", *SPEC, "--group", "p5", "--poll", "0.01"])
    assert r.exit_code == 0, r.output
    assert "group p5: 3 node(s) cordoned and empty; deploy the node group update now" in r.stdout
    assert "cordoned 3 node(s) of group p5" in r.stderr


def test_cli_exits_1_listing_what_is_left_when_the_timeout_passes(fake_cluster):
    fake_cluster.add_pdb("research", {"job": "llama"}, disruptions_allowed=0)
    r = CliRunner().invoke(main, ["drain", *SPEC, "--group", "p5", "--timeout", "1", "--poll", "0.5"])
    assert r.exit_code == 1
    assert "error: p5-a: still running research/llama-0" in r.stderr
    assert "not drained within 1s" in r.stderr and "--undo" in r.stderr
    undo = CliRunner().invoke(main, ["drain", *SPEC, "--group", "p5", "--undo"])
    assert undo.exit_code == 0 and "uncordoned 3 node(s) of group p5" in undo.stdout


@pytest.mark.parametrize("args, message", [
    (["--group", "nope"], "--group 'nope' is not an instance group of this spec; groups are: "),
    (["--group", "p5", "--timeout", "0"], "--timeout must be > 0 seconds, got 0"),
])
def test_cli_bad_input_is_one_clear_line(fake_cluster, args, message):
    r = CliRunner().invoke(main, ["drain", *SPEC, *args])
    assert r.exit_code == 2 and message in r.stderr and "Traceback" not in r.output
