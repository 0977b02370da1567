"""The controller holds a new or rebooted node until its two-node all-reduce with a healthy peer passes.

On the in-memory cluster (node_agent.kube.InMemoryCluster) and, for the Kubernetes calls, through the
official client against the fake API server (fake_apiserver.py). The all_reduce_perf outputs are the
recorded two-node ones of test_pair_check.py (their format's source is cited there).
"""

from __future__ import annotations

import json

import pytest

from openpod_core import labels as L
from node_agent import pair_check as pc
from node_agent.config import ControllerConfig, GroupConfig
from node_agent.controller import Controller, Remediation
from node_agent.findings import Action
from node_agent.kube import InMemoryCluster, KubeCluster, Node, Pod, Taint
from node_agent.marking import mark, mark_healthy
from node_agent.pair_runner import FAILED_CONDITION, PAIR_CHECK, PairState
from tests.node_agent.conftest import fixture_text
from tests.node_agent.fake_apiserver import FakeApiServer
from tests.node_agent.test_controller import (  # noqa: F401 (aws, clients, recorder: fixtures)
    REGION, Clock, aws, clients, controller, fault, recorder)

IMAGE = "registry.example/nccl-tests:2.19.6-efa"
PASS = fixture_text("deep", "all_reduce_perf-2node-p5-pass.txt")
SLOW = fixture_text("deep", "all_reduce_perf-2node-p5-slow-per-iter.txt")
NS = pc.NAMESPACE


def groups(image: str | None = IMAGE) -> dict:
    return {"p5": GroupConfig(instance_type="p5.48xlarge", pair_check_image=image)}


def healthy(name: str, group: str = "p5", provider_id: str = "", **labels) -> Node:
    return Node(name, labels={L.INSTANCE_GROUP: group, L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE,
                              L.INSTANCE_TYPE: "p5.48xlarge", L.HOSTNAME: name, **labels},
                provider_id=provider_id)


def new_node(name: str, group: str = "p5") -> Node:
    """A replacement instance's node as it registers: the startup taint of its node group, no health label."""
    return Node(name, labels={L.INSTANCE_GROUP: group, L.INSTANCE_TYPE: "p5.48xlarge", L.HOSTNAME: name},
                taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)])


def in_service(n: Node) -> bool:
    """Team pods (which tolerate none of openpod's taints) can land on it."""
    return not n.unschedulable and not any(t.key.startswith(L.DOMAIN) for t in n.taints)


def state(c, name: str) -> PairState:
    return PairState.of(c.get_node(name))


def events(c, reason: str, node: str | None = None) -> list[str]:
    return [e.message for e in c.events if e.reason == reason and (node is None or e.node == node)]


def metric(ctl, result: str) -> float:
    return ctl.metrics.registry.get_sample_value("openpod_pair_checks_total", {"group": "p5", "result": result}) or 0


@pytest.fixture
def world():
    """Two healthy p5 nodes (node-1 runs a training pod, node-0 is idle) and a replacement that just joined."""
    c, clock = InMemoryCluster(), Clock()
    for i in range(2):
        c.add_node(healthy(f"node-{i}"))
    c.add_pod(Pod("team-a", "trainer-0", "node-1", {"job": "llm"}, "Job"))
    c.add_node(new_node("node-new"))
    ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=clock)
    return c, clock, ctl


def deep_check_passes(c, ctl, name="node-new"):
    ctl.reconcile_once()                              # the controller sees the new node: held
    mark_healthy(c, name, "deep health check passed")  # its agent's single-node check passes
    ctl.reconcile_once()                              # the pair check starts


# ------------------------------------------------------------------------------ in memory
def test_a_replaced_node_that_passes_its_deep_check_is_held_until_the_pair_check_passes(world):
    c, clock, ctl = world
    deep_check_passes(c, ctl)
    n = c.get_node("node-new")
    assert not in_service(n) and n.has_taint(L.PAIR_CHECK_TAINT)  # old code: in service right here
    s = state(c, "node-new")
    assert s.phase == "running" and s.peer == "node-0"  # the idle peer, not node-1 (busy with training)
    job = c.objects[("Job", NS, s.job)]
    affinity = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    pinned = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
    assert pinned["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["node-new", "node-0"]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    assert {"key": L.PAIR_CHECK_TAINT, "operator": "Exists", "effect": "NoSchedule"} in \
        job["spec"]["template"]["spec"]["tolerations"]
    secret = c.objects[("Secret", NS, f"{s.job}-ssh")]  # owned by the Job: collected with it
    assert secret["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]

    clock.t += 600
    ctl.reconcile_once()
    assert not in_service(c.get_node("node-new"))  # still running: still held

    c.set_job(NS, s.job, pod_phase="Succeeded", log=PASS)
    ctl.reconcile_once()
    n = c.get_node("node-new")
    assert in_service(n) and state(c, "node-new").phase == "passed"
    assert "362.0 GB/s >= floor 200.0" in state(c, "node-new").result
    assert not c.objects  # Job, Secret and Service gone: the peer's GPUs are free again
    assert events(c, "PairCheckPassed", "node-new") and metric(ctl, "passed") == 1


def test_a_failing_pair_check_keeps_the_node_out_with_the_reason(world):
    c, clock, ctl = world
    deep_check_passes(c, ctl)
    s = state(c, "node-new")
    c.set_job(NS, s.job, pod_phase="Succeeded", log=SLOW)
    ctl.reconcile_once()
    for _ in range(3):  # and it stays out
        clock.t += 3600
        ctl.reconcile_once()
    n = c.get_node("node-new")
    assert not in_service(n)
    assert [t.value for t in n.taints if t.key == L.PAIR_CHECK_TAINT] == ["failed"]
    assert state(c, "node-new").phase == "failed" and state(c, "node-new").result.startswith("BelowFloor")
    cond = n.condition(FAILED_CONDITION)
    assert cond.status == "True" and cond.reason == "BelowFloor"
    assert "121.0" in cond.message and "node-0" in cond.message
    assert len(events(c, "PairCheckFailed", "node-new")) == 1 and metric(ctl, "BelowFloor") == 1
    assert not c.objects


def test_a_hung_pair_check_times_out(world):
    c, clock, ctl = world
    deep_check_passes(c, ctl)
    s = state(c, "node-new")
    c.set_job(NS, s.job, pod_phase="Running")  # mpirun never returns; the Job's own deadline did not fire either
    clock.t += ctl.config.pair_check_timeout_seconds
    ctl.reconcile_once()
    assert state(c, "node-new").phase == "running"
    clock.t += 301
    ctl.reconcile_once()
    n = c.get_node("node-new")
    assert not in_service(n) and state(c, "node-new").result.startswith("TimedOut")
    assert n.condition(FAILED_CONDITION).reason == "TimedOut" and metric(ctl, "TimedOut") == 1
    assert not c.objects  # the hung Job is deleted


def test_the_jobs_own_deadline_is_a_timeout(world):
    c, clock, ctl = world
    deep_check_passes(c, ctl)
    s = state(c, "node-new")
    c.set_job(NS, s.job, pod_phase="Running", failed="DeadlineExceeded")
    ctl.reconcile_once()
    assert state(c, "node-new").result.startswith("TimedOut")
    assert c.get_node("node-new").condition(FAILED_CONDITION).reason == "TimedOut"


def test_a_check_whose_pods_never_got_a_node_is_run_again_not_failed(world):
    c, clock, ctl = world
    deep_check_passes(c, ctl)
    first = state(c, "node-new").job
    c.set_job(NS, first, pod_phase="Running", failed="DeadlineExceeded", unscheduled=1)  # the peer got busy
    ctl.reconcile_once()
    n = c.get_node("node-new")
    assert not in_service(n) and n.condition(FAILED_CONDITION) is None
    assert state(c, "node-new").phase == "held" and events(c, "PairCheckRetry", "node-new")
    assert metric(ctl, "NotScheduled") == 1 and not c.objects
    clock.t += 10
    ctl.reconcile_once()
    assert state(c, "node-new").phase == "running" and state(c, "node-new").job != first


def test_unparsable_output_fails_the_check(world):
    c, clock, ctl = world
    deep_check_passes(c, ctl)
    c.set_job(NS, state(c, "node-new").job, pod_phase="Failed", log="ssh: connect to host pair-x-1: refused\n")
    ctl.reconcile_once()
    assert state(c, "node-new").result.startswith("NoResult") and not in_service(c.get_node("node-new"))


def test_one_pair_check_at_a_time_per_group(world):
    c, clock, ctl = world
    c.add_node(new_node("node-new2"))
    c.add_node(healthy("node-2"))
    ctl.reconcile_once()
    mark_healthy(c, "node-new", "ok")
    mark_healthy(c, "node-new2", "ok")
    ctl.reconcile_once()
    running = [n for n in ("node-new", "node-new2") if state(c, n).phase == "running"]
    assert len(running) == 1 and len([k for k in c.objects if k[0] == "Job"]) == 1
    first, second = running[0], ({"node-new", "node-new2"} - set(running)).pop()
    assert state(c, second).phase == "held" and not in_service(c.get_node(second))
    c.set_job(NS, state(c, first).job, pod_phase="Succeeded", log=PASS)
    ctl.reconcile_once()
    assert state(c, first).phase == "passed" and state(c, second).phase == "running"


def test_a_node_still_in_its_deep_check_is_not_paired(world):
    c, clock, ctl = world
    ctl.reconcile_once()
    ctl.reconcile_once()
    assert state(c, "node-new").phase == "held" and not c.objects


def test_without_a_pair_check_image_a_new_node_is_not_held():
    c = InMemoryCluster()
    c.add_node(healthy("node-0"))
    c.add_node(new_node("node-new"))
    ctl = Controller(c, None, ControllerConfig(groups=groups(None)), clock=Clock())
    ctl.reconcile_once()
    mark_healthy(c, "node-new", "ok")
    ctl.reconcile_once()
    assert in_service(c.get_node("node-new")) and PAIR_CHECK not in c.get_node("node-new").annotations


def test_no_idle_peer_holds_the_node_and_says_why_once(world):
    c, clock, ctl = world
    c.add_pod(Pod("team-b", "trainer-1", "node-0", {}, "Job"))  # now both peers run work
    deep_check_passes(c, ctl)
    ctl.reconcile_once()
    assert state(c, "node-new").phase == "held" and not c.objects
    assert len(events(c, "PairCheckWaiting", "node-new")) == 1


def test_a_group_of_one_releases_its_node_with_an_event():
    c = InMemoryCluster()
    c.add_node(new_node("node-new"))
    ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=Clock())
    deep_check_passes(c, ctl)
    ctl.reconcile_once()
    assert in_service(c.get_node("node-new")) and events(c, "PairCheckSkipped", "node-new")


def test_removing_the_annotation_runs_the_check_again(world):
    c, clock, ctl = world
    deep_check_passes(c, ctl)
    c.set_job(NS, state(c, "node-new").job, pod_phase="Succeeded", log=SLOW)
    ctl.reconcile_once()
    c.patch_node("node-new", annotations={PAIR_CHECK: None})  # kubectl annotate node node-new openpod.io/pair-check-
    ctl.reconcile_once()
    ctl.reconcile_once()
    s = state(c, "node-new")
    assert s.phase == "running"
    c.set_job(NS, s.job, pod_phase="Succeeded", log=PASS)
    ctl.reconcile_once()
    n = c.get_node("node-new")
    assert in_service(n) and n.condition(FAILED_CONDITION).status == "False"


def test_an_unreadable_annotation_is_checked_again_and_blocks_nothing(world):
    c, clock, ctl = world
    c.add_node(new_node("node-new2"))
    ctl.reconcile_once()
    c.patch_node("node-new", annotations={PAIR_CHECK: "{hand-edited"})
    mark_healthy(c, "node-new", "ok")
    ctl.reconcile_once()  # no exception: the group's pass goes on
    assert state(c, "node-new").phase == "running" and state(c, "node-new2").phase == "held"


# -------------------------------------------------------------- with remediations (moto)
def cluster_with(ids) -> InMemoryCluster:
    c = InMemoryCluster()
    for i, iid in enumerate(ids):
        c.add_node(healthy(f"node-{i}", provider_id=f"aws:///{REGION}a/{iid}"))
    return c


def test_a_rebooted_node_is_held_until_its_pair_check_passes(aws, moto_endpoint, recorder):
    make, _, _ = aws
    _, ids = make(3)
    c, clock = cluster_with(ids), Clock()
    ctl = controller(c, moto_endpoint, clock, groups=groups())
    mark(c, "node-1", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    assert recorder() == [ids[1]]
    clock.t += 300
    mark_healthy(c, "node-1", "deep health check passed")
    ctl.reconcile_once()
    n = c.get_node("node-1")
    assert Remediation.of(n) is None and not n.unschedulable  # the remediation is over ...
    assert not in_service(n) and state(c, "node-1").why == "rebooted"  # ... but it is held for the pair check
    ctl.reconcile_once()
    s = state(c, "node-1")
    assert s.phase == "running"
    c.set_job(NS, s.job, pod_phase="Succeeded", log=PASS)
    ctl.reconcile_once()
    assert in_service(c.get_node("node-1"))


class BrokenJobs(InMemoryCluster):
    """The API answers every Job read with an error (e.g. the batch API unavailable)."""

    def job_state(self, namespace, name):
        raise RuntimeError("batch/v1 jobs: 503 Service Unavailable")


@pytest.mark.parametrize("broken", [False, True], ids=["hung", "api-error"])
def test_another_nodes_remediation_proceeds_during_a_pair_check(aws, moto_endpoint, recorder, broken):
    make, _, _ = aws
    _, ids = make(3)
    c, clock = cluster_with(ids), Clock()
    if broken:
        old, c = c, BrokenJobs()
        for n in old.nodes.values():
            c.add_node(n)
    c.add_node(new_node("node-new"))
    ctl = controller(c, moto_endpoint, clock, groups=groups())
    deep_check_passes(c, ctl)
    s = state(c, "node-new")
    assert s.phase == "running"
    if not broken:
        c.set_job(NS, s.job, pod_phase="Running")  # hung
    mark(c, "node-2", fault(Action.REBOOT), now=clock())
    for _ in range(2):
        clock.t += 60
        ctl.reconcile_once()
    assert recorder() == [ids[2]]  # node-2 rebooted while node-new's check hangs or errors
    assert Remediation.of(c.get_node("node-2")).phase == "awaiting-health"
    assert not in_service(c.get_node("node-new"))
    if broken:
        assert any("503" in m for m in events(c, "RemediationError", "node-new"))


# ------------------------------------------------------------------- through the HTTP API
def test_the_pair_check_through_the_kubernetes_api():
    with FakeApiServer() as api:
        api.add_node("node-0", {L.INSTANCE_GROUP: "p5", L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE, L.HOSTNAME: "node-0"})
        api.add_node("node-new", {L.INSTANCE_GROUP: "p5", L.HOSTNAME: "node-new"},
                     taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)])
        c, clock = KubeCluster(api.client()), Clock()
        ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=clock)
        deep_check_passes(c, ctl)
        n = c.get_node("node-new")
        assert not in_service(n) and not n.has_taint(L.STARTUP_TAINT)
        s = PairState.of(n)
        assert s.phase == "running" and s.created
        job = api.objects[("Job", NS, s.job)]
        owned = {k[0] for k, o in api.objects.items()
                 if o["metadata"].get("ownerReferences", [{}])[0].get("uid") == job["metadata"]["uid"]}
        assert owned == {"Secret", "Service"}
        assert ("POST", f"/apis/batch/v1/namespaces/{NS}/jobs") in api.requests

        ctl.reconcile_once()  # no pod yet: nothing decided
        assert PairState.of(c.get_node("node-new")).phase == "running"
        api.run_job_pod(NS, s.job, "Succeeded", log=SLOW)
        ctl.reconcile_once()
        n = c.get_node("node-new")
        assert not in_service(n) and n.condition(FAILED_CONDITION).reason == "BelowFloor"
        assert not api.objects and not [p for (ns, _), p in api.pods.items() if ns == NS]  # collected
        assert ("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/{s.job}") in api.requests
        assert any(e["reason"] == "PairCheckFailed" for e in api.events)


def test_a_job_deadline_through_the_kubernetes_api():
    with FakeApiServer() as api:
        api.add_node("node-0", {L.INSTANCE_GROUP: "p5", L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE})
        api.add_node("node-new", {L.INSTANCE_GROUP: "p5"}, taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)])
        c = KubeCluster(api.client())
        ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=Clock())
        deep_check_passes(c, ctl)
        job = PairState.of(c.get_node("node-new")).job
        api.run_job_pod(NS, job, "Pending")  # on node-new, its containers never started
        api.run_job_pod(NS, job, "Running", index=1, node="node-0")
        api.fail_job(NS, job, "DeadlineExceeded")
        ctl.reconcile_once()
        n = c.get_node("node-new")
        assert n.condition(FAILED_CONDITION).reason == "TimedOut" and "Pending" in n.condition(FAILED_CONDITION).message
        assert json.loads(n.annotations[PAIR_CHECK])["phase"] == "failed"


def test_an_unscheduled_peer_pod_through_the_kubernetes_api_is_a_retry():
    with FakeApiServer() as api:
        api.add_node("node-0", {L.INSTANCE_GROUP: "p5", L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE})
        api.add_node("node-new", {L.INSTANCE_GROUP: "p5"}, taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)])
        c = KubeCluster(api.client())
        ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=Clock())
        deep_check_passes(c, ctl)
        job = PairState.of(c.get_node("node-new")).job
        api.run_job_pod(NS, job, "Running")
        api.run_job_pod(NS, job, "Pending", index=1, node="")  # no node took the peer's pod
        api.fail_job(NS, job, "DeadlineExceeded")
        ctl.reconcile_once()
        n = c.get_node("node-new")
        assert PairState.of(n).phase == "held" and n.condition(FAILED_CONDITION) is None
        assert any(e["reason"] == "PairCheckRetry" for e in api.events)


def test_a_job_whose_pods_were_never_created_through_the_kubernetes_api_is_a_retry():
    with FakeApiServer() as api:
        api.add_node("node-0", {L.INSTANCE_GROUP: "p5", L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE})
        api.add_node("node-new", {L.INSTANCE_GROUP: "p5"}, taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)])
        c, clock = KubeCluster(api.client()), Clock()
        ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=clock)
        deep_check_passes(c, ctl)
        clock.t += ctl.config.pair_check_timeout_seconds + 301  # no pod ever appeared (a quota, an admission hook)
        ctl.reconcile_once()
        n = c.get_node("node-new")
        assert PairState.of(n).phase == "held" and n.condition(FAILED_CONDITION) is None


def test_a_group_whose_nodes_all_join_at_once_checks_them_against_each_other():
    # At cluster creation (or a scale-up from zero) every node is held: with only healthy nodes as peers none
    # could ever be checked, and the whole group stayed out of service.
    c, clock = InMemoryCluster(), Clock()
    names = ["node-a", "node-b", "node-c"]
    for name in names:
        c.add_node(new_node(name))
    ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=clock)
    ctl.reconcile_once()
    for name in names:
        mark_healthy(c, name, "deep health check passed")
    for _ in range(len(names)):
        ctl.reconcile_once()                                   # one check starts (one per group at a time)
        (running,) = [n for n in names if state(c, n).phase == "running"]
        c.set_job(NS, state(c, running).job, pod_phase="Succeeded", log=PASS)
        ctl.reconcile_once()                                   # it passes: that node is in service
        assert in_service(c.get_node(running))
    assert all(in_service(c.get_node(n)) and state(c, n).phase == "passed" for n in names)
    assert state(c, "node-a").peer == "node-b"                 # the first check paired two held nodes


class CountingCluster(InMemoryCluster):
    """Counts the list calls the controller makes (each one is an API request on a real cluster)."""

    def __init__(self):
        super().__init__()
        self.calls: dict[str, int] = {}

    def list_nodes(self, selector=None):
        key = "list_nodes(group)" if selector else "list_nodes"
        self.calls[key] = self.calls.get(key, 0) + 1
        return super().list_nodes(selector)

    def list_pods_on_node(self, name):
        self.calls["list_pods_on_node"] = self.calls.get("list_pods_on_node", 0) + 1
        return super().list_pods_on_node(name)


def test_the_peer_search_lists_the_group_and_its_pods_once_per_pass():
    """20 busy healthy nodes and 5 held nodes waiting for a peer: one pass lists the group's nodes once and each
    busy node's pods once. The old code searched again for every held node: 5 node lists and 100 pod lists."""
    c, clock = CountingCluster(), Clock()
    for i in range(20):
        c.add_node(healthy(f"busy-{i:02d}"))
        c.add_pod(Pod("team-a", f"trainer-{i}", f"busy-{i:02d}", {"job": "llm"}, "Job"))
    for i in range(5):
        c.add_node(new_node(f"new-{i}"))
    ctl = Controller(c, None, ControllerConfig(groups=groups()), clock=clock)
    ctl.reconcile_once()
    for i in range(5):
        mark_healthy(c, f"new-{i}", "deep health check passed")
    c.calls.clear()
    ctl.reconcile_once()
    assert all(state(c, f"new-{i}").phase == "held" for i in range(5))
    assert len(events(c, "PairCheckWaiting")) == 5  # each was looked at
    assert c.calls == {"list_nodes": 1, "list_nodes(group)": 1, "list_pods_on_node": 20}
