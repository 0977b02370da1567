"""Two controller replicas, one Lease (coordination.k8s.io/v1), one HTTP API with resourceVersion semantics.

The electors run on a simulated clock shared by both "processes"; every Lease and
Node operation goes over HTTP to tests/node_agent/fake_apiserver.py through the
official kubernetes client; AWS is moto in server mode.
"""

from __future__ import annotations

import json

import pytest

from openpod_core import labels as L
from node_agent.controller import Remediation
from node_agent.findings import Action
from node_agent.kube import KubeCluster
from node_agent.leader import LeaseElector
from node_agent.marking import REMEDIATION, mark, mark_healthy
from tests.node_agent.fake_apiserver import FakeApiServer
from tests.node_agent.test_controller import (  # noqa: F401
    REGION, Clock, aws, clients, controller, fault, health, recorder)

LEASE = dict(name="node-remediation", namespace="openpod-system", lease_duration=15, renew_deadline=10,
             retry_period=2)


@pytest.fixture
def api():
    with FakeApiServer() as a:
        yield a


def elector(api, who, clock):
    return LeaseElector(api.client(), identity=who, clock=clock, **LEASE)


def test_one_holder_and_failover_only_after_the_lease_runs_out(api):
    clock = Clock()
    a, b = elector(api, "ctl-a", clock), elector(api, "ctl-b", clock)
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader()
    lease = api.leases[("openpod-system", "node-remediation")]
    assert lease["spec"]["holderIdentity"] == "ctl-a" and lease["spec"]["leaseDurationSeconds"] == 15
    for _ in range(5):  # a renews every retry period; b keeps observing a live lease
        clock.t += 2
        assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    # a stops renewing (hung, partitioned). It stops acting at its renew deadline ...
    clock.t += 10.5
    assert not a.is_leader()
    assert not b.try_acquire_or_renew()  # ... b still waits: 15 s since it last saw the record change
    clock.t += 5
    assert b.try_acquire_or_renew() and b.is_leader()
    spec = api.leases[("openpod-system", "node-remediation")]["spec"]
    assert spec["holderIdentity"] == "ctl-b" and spec["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew() and not a.is_leader()  # a, back, sees b's fresh record


def test_two_candidates_racing_for_an_expired_lease_one_wins(api):
    """Both read the expired lease; both write. The resourceVersion on the replace lets exactly one through."""
    clock = Clock()
    old = elector(api, "ctl-old", clock)
    assert old.try_acquire_or_renew()
    a, b = elector(api, "ctl-a", clock), elector(api, "ctl-b", clock)
    assert not a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    clock.t += 16
    read = b.api.read_namespaced_lease

    def read_then_lose_the_race(*args, **kw):
        lease = read(*args, **kw)
        assert a.try_acquire_or_renew()  # a writes between b's read and b's write
        return lease

    b.api.read_namespaced_lease = read_then_lose_the_race
    assert not b.try_acquire_or_renew() and not b.is_leader()
    assert a.is_leader() and api.conflicts == 1


def test_a_release_hands_over_at_once(api):
    clock = Clock()
    a, b = elector(api, "ctl-a", clock), elector(api, "ctl-b", clock)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader() and b.try_acquire_or_renew()


def test_bad_timings_are_refused():
    with pytest.raises(ValueError, match="lease_duration"):
        LeaseElector(None, name="x", namespace="y", identity="z", lease_duration=10, renew_deadline=10)


class CallLog:
    """The cloud as one replica sees it: every call recorded with who made it."""

    def __init__(self, real, who, log):
        self.real, self.who, self.log = real, who, log

    def reboot(self, iid):
        self.log.append((self.who, "reboot", iid))
        self.real.reboot(iid)

    def mark_unhealthy(self, iid):
        self.log.append((self.who, "replace", iid))
        self.real.mark_unhealthy(iid)


@pytest.mark.slow
def test_fault_storm_with_two_replicas_each_node_once_budget_held_and_failover(api, aws, moto_endpoint, recorder):
    make, _, asg = aws
    _, ids = make(40)
    for i, iid in enumerate(ids):
        api.add_node(f"node-{i}", {L.INSTANCE_GROUP: "p5", L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE},
                     provider_id=f"aws:///{REGION}a/{iid}")
    detector = KubeCluster(api.client())
    clock, calls = Clock(), []
    replicas = []
    for who in ("ctl-a", "ctl-b"):
        ctl = controller(KubeCluster(api.client()), moto_endpoint, clock, budget_max_nodes=3, budget_max_percent=10,
                         poll_seconds=2)
        ctl.cloud = CallLog(ctl.cloud, who, calls)
        ctl.elector = elector(api, who, clock)
        replicas.append(ctl)
    a, b = replicas
    reboot_nodes = {f"node-{i}" for i in range(0, 30, 3)}  # 10 reboots, 20 replacements
    for i in range(30):
        name = f"node-{i}"
        action = Action.REBOOT if name in reboot_nodes else Action.REPLACE
        mark(detector, name, fault(action, "gpu-fell-off-bus" if action is Action.REBOOT else "gpu-row-remap-failure"),
             now=clock() + i)

    max_in_flight, a_alive, failover_at, HANG = 0, True, None, 4
    for step in range(200):
        clock.t += 2
        if step == HANG:
            a_alive = False  # ctl-a hangs: its elector no longer renews; its reconcile loop still ticks
        if a_alive:
            a.elector.try_acquire_or_renew()
        b.elector.try_acquire_or_renew()
        if b.elector.is_leader() and failover_at is None:
            failover_at = step
        a.tick()
        b.tick()
        max_in_flight = max(max_in_flight, sum(REMEDIATION in n.annotations for n in detector.list_nodes()))
        # The world: Auto Scaling replaces what was marked Unhealthy (the old node object goes away); a rebooted
        # node comes back and its agent's deep check passes.
        nodes = {n.name: n for n in detector.list_nodes()}
        unhealthy = {iid for iid, s in health(asg, ids).items() if s == "UNHEALTHY"}
        for name, n in nodes.items():
            if n.instance_id in unhealthy:
                api.remove_node(name)
            elif (r := Remediation.of(n)) and r.phase == "awaiting-health" and n.has_taint(L.STARTUP_TAINT):
                mark_healthy(detector, name, "deep health check passed")
        assert not (a.elector.is_leader() and b.elector.is_leader())
        if not any(REMEDIATION in n.annotations or n.labels.get(L.HEALTH_STATUS) != L.HEALTH_SCHEDULABLE
                   for n in detector.list_nodes()):
            break
    else:
        pytest.fail("the storm did not finish")

    assert max_in_flight == 3  # min(3 nodes, 10% of 40 = 4), with two replicas
    replaced = [iid for _, what, iid in calls if what == "replace"]
    rebooted = [iid for _, what, iid in calls if what == "reboot"]
    want_replaced = {ids[i] for i in range(30) if f"node-{i}" not in reboot_nodes}
    assert sorted(replaced) == sorted(want_replaced)  # each exactly once
    assert sorted(rebooted) == sorted(ids[int(n.split("-")[1])] for n in reboot_nodes)
    assert sorted(recorder()) == sorted(rebooted)  # as moto saw them
    # ctl-a acted only while it led; ctl-b took over once a's lease ran out, and finished the storm.
    assert failover_at is not None and HANG < failover_at <= HANG + 15 // 2 + 1
    firsts = {who: next(i for i, c in enumerate(calls) if c[0] == who) for who in ("ctl-a", "ctl-b")}
    assert firsts["ctl-a"] < firsts["ctl-b"]
    assert all(c[0] == "ctl-b" for c in calls[firsts["ctl-b"]:])
    assert b.elector.transitions == 1 and a.metrics.leader._value.get() == 0
    events = [e for e in api.events if e["reason"] == "NodeReplacing"]
    assert len(events) == 20


class ActsFirst(KubeCluster):
    """Replica b's API view: right before b's first node write, replica a runs a whole pass (b decided on a list
    read before it)."""

    def __init__(self, api_client, other):
        super().__init__(api_client)
        self.other = other

    def patch_node(self, name, **kw):
        other, self.other = self.other, None
        if other is not None:
            other()
        return super().patch_node(name, **kw)


@pytest.mark.parametrize("with_lease", [True, False])
def test_two_replicas_in_the_same_moment_reboot_a_node_once(api, aws, moto_endpoint, recorder, with_lease):
    """The old controller had no election and wrote without preconditions: two replicas that listed the same
    waiting node both cordoned, drained and rebooted it (recorder: two RebootInstances), each holding a slot.
    Now only the Lease holder acts; and even without a Lease (one replica's election disabled by mistake) the
    resourceVersion precondition makes the late replica re-read and see the remediation already under way."""
    make, _, _ = aws
    _, ids = make(3)
    for i, iid in enumerate(ids):
        api.add_node(f"node-{i}", {L.INSTANCE_GROUP: "p5", L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE},
                     provider_id=f"aws:///{REGION}a/{iid}")
    clock = Clock()
    a = controller(KubeCluster(api.client()), moto_endpoint, clock)
    b = controller(ActsFirst(api.client(), a.tick), moto_endpoint, clock)
    if with_lease:
        a.elector, b.elector = elector(api, "ctl-a", clock), elector(api, "ctl-b", clock)
        assert a.elector.try_acquire_or_renew() and not b.elector.try_acquire_or_renew()
    mark(KubeCluster(api.client()), "node-1", fault(Action.REBOOT), now=clock())
    assert b.tick() is not with_lease  # the standby does nothing at all
    a.tick()
    assert recorder() == [ids[1]]
    assert len(json.loads(KubeCluster(api.client()).get_node("node-1").annotations[f"{L.DOMAIN}/reboot-history"])) == 1


@pytest.mark.slow
def test_two_replicas_in_real_threads_never_act_at_once(api, aws, moto_endpoint):
    """The same, in real time: two controller processes' run() loops and their lease threads, concurrently,
    against one API (short lease timings). Every cloud call is checked at the moment it is made: the caller holds
    the lease and the other replica does not. The leader is then stopped (it releases the lease) and the other
    finishes the storm."""
    import threading
    import time

    make, _, asg = aws
    _, ids = make(16)
    for i, iid in enumerate(ids):
        api.add_node(f"node-{i}", {L.INSTANCE_GROUP: "p5", L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE},
                     provider_id=f"aws:///{REGION}a/{iid}")
    detector = KubeCluster(api.client())
    calls, overlaps = [], []
    replicas, stops = {}, {}

    class Checked(CallLog):
        def _check(self):
            me, other = replicas[self.who], replicas["ctl-b" if self.who == "ctl-a" else "ctl-a"]
            if not me.elector.is_leader() or other.elector.is_leader():
                overlaps.append(self.who)

        def mark_unhealthy(self, iid):
            self._check()
            super().mark_unhealthy(iid)

    for who in ("ctl-a", "ctl-b"):
        ctl = controller(KubeCluster(api.client()), moto_endpoint, time.time, budget_max_nodes=2,
                         budget_max_percent=100, poll_seconds=0.1)
        ctl.config.leader_election.retry_period_seconds = 0.2
        ctl.cloud = Checked(ctl.cloud, who, calls)
        ctl.elector = LeaseElector(api.client(), identity=who, name="node-remediation", namespace="openpod-system",
                                   lease_duration=3, renew_deadline=2, retry_period=0.2)
        replicas[who], stops[who] = ctl, threading.Event()
    threads = [threading.Thread(target=replicas[w].run, args=(stops[w],), daemon=True) for w in replicas]
    for t in threads:
        t.start()
    for i in range(12):
        mark(detector, f"node-{i}", fault(Action.REPLACE, "gpu-row-remap-failure"))

    def world_until(done, timeout):
        end, max_in_flight = time.time() + timeout, 0
        while time.time() < end:
            nodes = detector.list_nodes()
            max_in_flight = max(max_in_flight, sum(REMEDIATION in n.annotations for n in nodes))
            unhealthy = {iid for iid, s in health(asg, ids).items() if s == "UNHEALTHY"}
            for n in nodes:
                if n.instance_id in unhealthy:
                    api.remove_node(n.name)
            if done():
                return max_in_flight
            time.sleep(0.1)
        pytest.fail("timed out")

    try:
        max1 = world_until(lambda: len(calls) >= 6, 60)
        first = next(w for w in replicas if replicas[w].elector.is_leader())
        stops[first].set()  # a clean stop: the lease is released, the other replica takes over at once
        threads[list(replicas).index(first)].join(10)
        max2 = world_until(lambda: len({c[2] for c in calls}) == 12, 60)
    finally:
        for s in stops.values():
            s.set()
        for t in threads:
            t.join(10)
    assert overlaps == []
    assert sorted(c[2] for c in calls) == sorted(ids[:12])  # each node replaced exactly once
    assert max(max1, max2) <= 2
    second = "ctl-b" if first == "ctl-a" else "ctl-a"
    assert {c[0] for c in calls[:6]} == {first} and calls[-1][0] == second


def test_the_controller_process_takes_the_lease_and_releases_it_on_sigterm(api, tmp_path):
    """`python -m node_agent controller` as the Deployment runs it (POD_NAME from the downward API, kubeconfig in
    place of the in-cluster config): it creates and holds the Lease, and gives it up when the pod is stopped."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT, free_port, write_kubeconfig

    cfg = tmp_path / "controller.yaml"
    cfg.write_text(f"region: {REGION}\nmetrics_port: {free_port()}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "POD_NAME": "node-remediation-7d9f-abcde",
           "KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", api.url, "t")),
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true"}
    p = subprocess.Popen([sys.executable, "-m", "node_agent", "controller", "--config", str(cfg)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    key = ("openpod-system", "node-remediation")
    try:
        deadline = time.time() + 30
        while time.time() < deadline and key not in api.leases:
            time.sleep(0.1)
        assert api.leases[key]["spec"]["holderIdentity"] == "node-remediation-7d9f-abcde"
        assert api.leases[key]["spec"]["leaseDurationSeconds"] == 15
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, out
    assert not api.leases[key]["spec"].get("holderIdentity")  # released: the other replica takes over at once


# ------------------------------------------------------------- every write goes through the guard
class _Recorder:
    """A Cluster / Cloud that records every call made on it (and answers reads with nothing)."""

    def __init__(self):
        self.calls: list[str] = []

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args, **kw):
            self.calls.append(name)
        return call


def _standby_controller(api):
    """A controller whose lease was taken and then ran out (a replica that stopped being leader)."""
    from node_agent.controller import Controller

    clock = Clock()
    ctl = Controller(_Recorder(), _Recorder(), clock=clock, elector=elector(api, "ctl-a", clock))
    assert ctl.elector.try_acquire_or_renew()
    clock.t += LEASE["renew_deadline"] + 1
    return ctl


def test_every_cluster_and_cloud_write_of_a_replica_that_is_not_leader_is_refused(api):
    """Writes go through one guarded door: every method of the Cluster and Cloud protocols other than the named
    reads refuses to run (NotLeader) when the lease has run out, so a write added later cannot forget the check.
    On the old code the guard was called by hand at some writes: events, conditions, evictions went through."""
    from node_agent.cloud import READS as CLOUD_READS, Cloud
    from node_agent.controller import NotLeader
    from node_agent.kube import READS as CLUSTER_READS, Cluster

    ctl = _standby_controller(api)
    writes = {"cluster": sorted(set(m for m in vars(Cluster) if not m.startswith("_")) - CLUSTER_READS),
              "cloud": sorted(set(m for m in vars(Cloud) if not m.startswith("_")) - CLOUD_READS)}
    assert {"patch_node", "create_event", "set_condition", "evict_pod", "create_job", "create_object",
            "delete_job"} <= set(writes["cluster"])
    assert {"reboot", "mark_unhealthy"} <= set(writes["cloud"])
    for side, methods in writes.items():
        target = getattr(ctl, side)
        for m in methods:
            with pytest.raises(NotLeader):
                getattr(target, m)("x")
    assert ctl.cluster.list_nodes() is None and ctl.cloud.instance_topology([]) is None  # reads pass
    assert ctl.cluster._inner.calls == ["list_nodes"] and ctl.cloud._inner.calls == ["instance_topology"]


def test_a_lease_lost_during_the_topology_call_writes_no_ultraserver_label(api):
    """topology.label_ultraservers wrote node labels without the guard, and the pass swallowed its errors. A
    slow DescribeInstanceTopology (EC2 throttling and botocore's retries) outlasting the renew deadline let a
    replica that was no longer leader label nodes. Now the label write is refused and the pass stops. Failed on
    the old code: the label was written."""
    from node_agent.controller import Controller
    from node_agent.kube import InMemoryCluster
    from tests.node_agent.test_topology import RecordedCloud, node

    clock = Clock()
    c = InMemoryCluster()
    c.add_node(node("gb-1", "i-0a00000000000gb01", "p6e-gb200.36xlarge", **{L.INSTANCE_GROUP: "gb200"}))

    class SlowEc2(RecordedCloud):
        def instance_topology(self, instance_ids):
            clock.t += LEASE["renew_deadline"] + 1  # the lease thread could not renew meanwhile
            return super().instance_topology(instance_ids)

    ctl = Controller(c, SlowEc2(), clock=clock, elector=elector(api, "ctl-a", clock))
    assert ctl.elector.try_acquire_or_renew()
    assert ctl.tick()
    assert L.ULTRASERVER_ID not in c.get_node("gb-1").labels
    assert c.events == []
