"""Partial failure: cloud/API errors back off, a vanished instance ends in a terminal state, a fault during a
pending reboot escalates, and a node cannot be rebooted forever."""

from __future__ import annotations

import random

from node_agent.controller import Remediation
from node_agent.findings import Action
from node_agent.marking import REMEDIATION, mark, mark_healthy
from node_agent.kube import Pod
from tests.node_agent.test_controller import (  # noqa: F401
    REGION, Clock, aws, clients, cluster_for, controller, fault, health, recorder)


class Flaky:
    """A cloud whose calls fail (throttled) the first ``n`` times."""

    def __init__(self, real, n):
        self.real, self.n, self.calls = real, n, 0

    def reboot(self, iid):
        self.calls += 1
        if self.calls <= self.n:
            raise RuntimeError("RequestLimitExceeded: Request limit exceeded.")
        self.real.reboot(iid)

    def mark_unhealthy(self, iid):
        self.calls += 1
        if self.calls <= self.n:
            raise RuntimeError("Throttling: Rate exceeded")
        self.real.mark_unhealthy(iid)


def test_cloud_errors_back_off_capped_and_jittered_then_succeed(aws, moto_endpoint, recorder):
    """Old code retried every failing node on every poll (10 s), forever at the same pace: an Event and an API
    call per poll per node during an AWS throttling episode."""
    make, _, _ = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock, retry_base_seconds=10, retry_max_seconds=120)
    ctl.rng = random.Random(7)
    ctl.cloud = Flaky(ctl.cloud, 6)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    attempts_at = []
    for _ in range(200):  # 2000 s of 10 s polls
        before = ctl.cloud.calls
        ctl.reconcile_once()
        if ctl.cloud.calls > before:
            attempts_at.append(clock.t)
        if recorder():
            break
        clock.t += 10
    gaps = [b - a for a, b in zip(attempts_at, attempts_at[1:])]
    assert len(attempts_at) == 7 and recorder() == [ids[0]]
    assert all(b >= a for a, b in zip(gaps[:3], gaps[1:4]))  # growing ...
    assert max(gaps) <= 120 + 10 and max(gaps) >= 60  # ... up to the cap (one poll of slack)
    errors = [e for e in c.events if e.reason == "RemediationError"]
    assert len(errors) == 6 and "next attempt in" in errors[-1].message
    assert ctl.metrics.errors.labels("p5")._value.get() == 6


def test_a_node_whose_instance_is_gone_reaches_a_terminal_state_and_frees_its_slot(aws, moto_endpoint, recorder):
    """Old code: a node whose EC2 instance no longer exists failed its reboot on every poll, forever, holding one
    of the group's remediation slots (here the only one), so no other node was ever remediated."""
    make, ec2, _ = aws
    _, ids = make(3)
    c = cluster_for(["i-0000000000000dead"] + ids[1:])
    clock = Clock()
    ctl = controller(c, moto_endpoint, clock, budget_max_nodes=1, budget_max_percent=100)
    mark(c, "node-0", fault(Action.REBOOT), now=clock.t - 60)
    mark(c, "node-1", fault(Action.REBOOT), now=clock.t)
    for _ in range(5):
        ctl.reconcile_once()
        clock.t += 30
    n = c.get_node("node-0")
    r = Remediation.of(n)
    assert r.phase == "failed" and "i-0000000000000dead" in r.failure
    assert n.unschedulable  # stays out of service: an operator decides
    cond = n.condition("RemediationFailed")
    assert cond.status == "True" and cond.reason == "InstanceNotFound"
    assert sum(e.reason == "RemediationFailed" for e in c.events if e.node == "node-0") == 1  # no hot loop
    assert ctl.metrics.failed.labels("p5", "InstanceNotFound")._value.get() == 1
    assert ctl.metrics.failed_nodes.labels("p5")._value.get() == 1
    assert ctl.metrics.registry.get_sample_value("openpod_remediation_duration_seconds_count",
                                                 {"group": "p5", "action": "reboot", "outcome": "failed"}) == 1
    assert [i for i in recorder() if i != "i-0000000000000dead"] == [ids[1]]  # the slot went to node-1


def test_a_node_without_a_provider_id_is_terminal_too(aws, moto_endpoint):
    c, clock = cluster_for(["i-1"]), Clock()
    n = c.nodes["node-0"]
    n.provider_id = ""
    ctl = controller(c, moto_endpoint, clock)
    mark(c, "node-0", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock())
    for _ in range(3):
        ctl.reconcile_once()
    assert Remediation.of(c.get_node("node-0")).phase == "failed"
    assert sum(e.reason == "RemediationFailed" for e in c.events) == 1
    # An operator fixes what was wrong and removes the remediation annotation: it is tried again.
    make, _, asg = aws
    _, ids = make(1)
    n.provider_id = f"aws:///{REGION}a/{ids[0]}"
    c.patch_node("node-0", annotations={REMEDIATION: None})
    ctl.reconcile_once()
    n = c.get_node("node-0")
    assert n.condition("RemediationFailed").status == "False" and Remediation.of(n).phase == "replacing"
    assert health(asg, ids)[ids[0]] == "UNHEALTHY"


def test_a_replace_class_fault_during_a_pending_reboot_replaces_without_rebooting(aws, moto_endpoint, recorder):
    """Old code rebooted anyway (the drain had started for a reboot) and only replaced after the reboot and
    the post-reboot check: an hour of a broken node and a useless reboot."""
    make, _, asg = aws
    _, ids = make(3)
    c, clock = cluster_for(ids), Clock()
    c.add_pod(Pod("serving", "api-0", "node-0", {"app": "api"}, "ReplicaSet"))
    c.add_pdb("serving", {"app": "api"}, disruptions_allowed=0)  # the drain waits
    ctl = controller(c, moto_endpoint, clock, drain_timeout_seconds=600)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    assert Remediation.of(c.get_node("node-0")).phase == "draining"
    clock.t += 60
    assert mark(c, "node-0", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock())
    clock.t += 600
    ctl.reconcile_once()
    r = Remediation.of(c.get_node("node-0"))
    assert r.action == "replace" and r.escalated
    assert recorder() == [] and health(asg, ids)[ids[0]] == "UNHEALTHY"


def test_reboots_per_node_are_capped_in_a_window_then_replace(aws, moto_endpoint, recorder):
    """Old code rebooted a node for a different fault class every time: host, then GPU, then NVLink, then host
    again... a flapping node was rebooted without end."""
    make, _, asg = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock, reboot_cap=3, reboot_cap_window_seconds=7 * 86400)
    for name in ("host-hard-lockup", "gpu-fell-off-bus", "nvlink-error", "efa-device-error"):
        mark(c, "node-0", fault(Action.REBOOT, name), now=clock())
        ctl.reconcile_once()
        if Remediation.of(c.get_node("node-0")).phase == "awaiting-health":
            clock.t += 300
            mark_healthy(c, "node-0", "ok")
            ctl.reconcile_once()
        clock.t += 86400
    assert recorder() == [ids[0]] * 3
    r = Remediation.of(c.get_node("node-0"))
    assert r.action == "replace" and health(asg, ids)[ids[0]] == "UNHEALTHY"
    assert any("3 reboots" in e.message for e in c.events if e.reason == "RemediationEscalated")
