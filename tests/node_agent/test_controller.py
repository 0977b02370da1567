"""Remediation against moto in server mode (EC2 + Auto Scaling over HTTP) and the Kubernetes boundary.

Each test builds a real Auto Scaling group in moto (launch template, instances
tagged eks:cluster-name), mirrors its instances as nodes in the in-memory
cluster, and checks what happened in AWS with describe calls (and moto's
request recorder for RebootInstances, whose effect describe cannot show).
"""

from __future__ import annotations

import base64
import json
import uuid
from urllib.parse import parse_qs

import boto3
import pytest
import requests

from openpod_core import labels as L
from node_agent.cloud import AwsCloud
from node_agent.config import ControllerConfig, GroupConfig
from node_agent.controller import Controller, Remediation
from node_agent.findings import Action, Finding, Severity
from node_agent.kube import InMemoryCluster, Node, Pod, Taint
from node_agent.marking import FAULT, REMEDIATION, mark, mark_healthy

REGION = "us-east-2"
CLUSTER = "openpod-dev"


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def session():
    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)


@pytest.fixture(scope="module")
def clients(moto_endpoint):
    s = session()
    ec2 = s.client("ec2", endpoint_url=moto_endpoint)
    image = ec2.describe_images(Owners=["amazon"], MaxResults=5)["Images"][0]["ImageId"]
    return ec2, s.client("autoscaling", endpoint_url=moto_endpoint), image


@pytest.fixture
def aws(clients):
    """``make(n)`` builds a fresh ASG of n instances; also returns the ec2 and autoscaling clients."""
    ec2, asg, image = clients

    def make(n: int, group: str = "p5"):
        name = f"eks-{group}-{uuid.uuid4().hex[:8]}"
        lt = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
            "ImageId": image, "InstanceType": "p5.48xlarge"})["LaunchTemplate"]["LaunchTemplateId"]
        asg.create_auto_scaling_group(
            AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateId": lt, "Version": "$Latest"},
            MinSize=n, MaxSize=n, DesiredCapacity=n, AvailabilityZones=[f"{REGION}a"],
            Tags=[{"Key": "eks:cluster-name", "Value": CLUSTER, "PropagateAtLaunch": True},
                  {"Key": "eks:nodegroup-name", "Value": group, "PropagateAtLaunch": True}])
        ids = [i["InstanceId"] for i in asg.describe_auto_scaling_groups(
            AutoScalingGroupNames=[name])["AutoScalingGroups"][0]["Instances"]]
        return name, sorted(ids)

    return make, ec2, asg


def health(asg, ids):
    out = asg.describe_auto_scaling_instances(InstanceIds=ids)["AutoScalingInstances"]
    return {i["InstanceId"]: i["HealthStatus"].upper() for i in out}


@pytest.fixture
def recorder(moto_endpoint, tmp_path):
    """moto's request recorder, writing to a temp file: proof that RebootInstances reached the server."""
    from moto.moto_api import recorder as rec

    rec._location = str(tmp_path / "moto_recording")
    requests.post(f"{moto_endpoint}/moto-api/recorder/reset-recording")
    requests.post(f"{moto_endpoint}/moto-api/recorder/start-recording")

    def reboots() -> list[str]:
        text = requests.get(f"{moto_endpoint}/moto-api/recorder/download-recording").text
        out = []
        for line in filter(None, text.splitlines()):
            e = json.loads(line)
            body = base64.b64decode(e["body"]).decode() if e.get("body_encoded") else (e.get("body") or "")
            q = parse_qs(body)
            if q.get("Action") == ["RebootInstances"]:
                out += [v[0] for k, v in q.items() if k.startswith("InstanceId")]
        return out

    yield reboots
    requests.post(f"{moto_endpoint}/moto-api/recorder/stop-recording")


def cluster_for(ids, group="p5", spares=()):
    c = InMemoryCluster()
    for i, iid in enumerate(ids):
        labels = {L.INSTANCE_GROUP: group, L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE}
        taints = []
        if i in spares:
            labels[L.HOT_SPARE] = "true"
            taints = [Taint(L.HOT_SPARE_TAINT, "true")]
        c.add_node(Node(f"node-{i}", labels=labels, taints=taints, provider_id=f"aws:///{REGION}a/{iid}"))
    return c


def fault(action: Action, name="gpu-fell-off-bus") -> Finding:
    return Finding(rule="xid-79", fault=name, severity=Severity.CRITICAL, action=action,
                   evidence=f"NVRM: Xid (PCI:0000:53:00): 79, pid=1, {name}", source="test")


_CLOUD = {}


def controller(c, moto_endpoint, clock, **cfg):
    """A controller process: fresh state, sharing only the cluster (and, for speed, the boto3 clients)."""
    config = ControllerConfig(region=REGION, **cfg)
    if moto_endpoint not in _CLOUD:
        _CLOUD[moto_endpoint] = AwsCloud(region=REGION, endpoint_url=moto_endpoint, session=session())
    return Controller(c, _CLOUD[moto_endpoint], config, clock=clock)


def test_reboot_then_recover_then_escalate_to_replace(aws, moto_endpoint, recorder):
    make, ec2, asg = aws
    name, ids = make(4)
    c, clock = cluster_for(ids), Clock()
    c.add_pod(Pod("team-a", "trainer-0", "node-1", {"job": "llm"}, "Job"))
    c.add_pod(Pod("kube-system", "aws-node-x", "node-1", {}, "DaemonSet"))
    ctl = controller(c, moto_endpoint, clock)

    mark(c, "node-1", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    n = c.get_node("node-1")
    assert n.unschedulable and c.evictions == [("team-a", "trainer-0")]  # DaemonSet pods stay
    assert Remediation.of(n).phase == "awaiting-health"
    assert n.has_taint(L.STARTUP_TAINT) and FAULT not in n.annotations
    assert recorder() == [ids[1]]
    assert set(health(asg, ids).values()) == {"HEALTHY"}
    assert ec2.describe_instances(InstanceIds=[ids[1]])["Reservations"][0]["Instances"][0]["State"]["Name"] == "running"

    # The node comes back and its agent's deep check passes.
    clock.t += 300
    mark_healthy(c, "node-1", "deep health check passed")
    ctl.reconcile_once()
    n = c.get_node("node-1")
    assert not n.unschedulable and REMEDIATION not in n.annotations and not n.has_taint(L.UNHEALTHY_TAINT)
    assert n.labels[L.HEALTH_STATUS] == L.HEALTH_SCHEDULABLE

    # Same fault again within the window: replaced, not rebooted again.
    clock.t += 3600
    mark(c, "node-1", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    n = c.get_node("node-1")
    assert Remediation.of(n).action == "replace" and Remediation.of(n).escalated
    assert n.labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT
    assert health(asg, ids)[ids[1]] == "UNHEALTHY"
    assert recorder() == [ids[1]]  # no second reboot
    assert "RemediationEscalated" in [e.reason for e in c.events]


def test_reboot_outside_the_window_is_a_reboot_again(aws, moto_endpoint, recorder):
    make, _, asg = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock, escalation_window_seconds=3600)
    for _ in range(2):
        mark(c, "node-0", fault(Action.REBOOT), now=clock())
        ctl.reconcile_once()
        mark_healthy(c, "node-0", "ok")
        ctl.reconcile_once()
        clock.t += 7200
    assert recorder() == [ids[0], ids[0]]
    assert set(health(asg, ids).values()) == {"HEALTHY"}


def test_failed_deep_check_after_reboot_escalates(aws, moto_endpoint, recorder):
    make, _, asg = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    mark(c, "node-0", fault(Action.REPLACE, "gpu-diagnostic-failed"), now=clock())  # deep check failed
    ctl.reconcile_once()
    assert health(asg, ids)[ids[0]] == "UNHEALTHY"


def test_budget_holds_under_50_simultaneous_faults(aws, moto_endpoint):
    make, _, asg = aws
    _, ids = make(60)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock, budget_max_nodes=3, budget_max_percent=10)
    for i in range(50):
        mark(c, f"node-{i}", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock() + i)
    for _ in range(3):
        ctl.reconcile_once()
        clock.t += 1
    states = health(asg, ids)
    assert sum(s == "UNHEALTHY" for s in states.values()) == 3  # min(3 nodes, 10% of 60 = 6)
    assert [states[ids[i]] for i in range(3)] == ["UNHEALTHY"] * 3  # oldest faults first
    assert ctl.metrics.budget_blocked.labels("p5")._value.get() == 47
    assert sum(e.reason == "RemediationBudgetExhausted" for e in c.events) == 47  # one alert per waiting node
    cordoned = [n for n in c.list_nodes() if n.unschedulable]
    assert len(cordoned) == 3  # waiting nodes are not drained either

    # The group replaces the first three: their node objects go away, three more may start.
    for i in range(3):
        c.remove_node(f"node-{i}")
    ctl.reconcile_once()
    assert sum(s == "UNHEALTHY" for s in health(asg, ids).values()) == 6
    assert ctl.metrics.budget_blocked.labels("p5")._value.get() == 44


def test_small_group_budget_is_at_least_one():
    ctl = Controller(InMemoryCluster(), cloud=None, config=ControllerConfig(budget_max_nodes=2, budget_max_percent=10))
    assert [ctl.budget(n) for n in (1, 4, 10, 19, 20, 500)] == [1, 1, 1, 1, 2, 2]


def test_drain_respects_pdbs_until_the_deadline(aws, moto_endpoint, recorder):
    make, _, _ = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    c.add_pod(Pod("serving", "api-0", "node-0", {"app": "api"}, "ReplicaSet"))
    c.add_pod(Pod("serving", "api-1", "node-0", {"app": "api"}, "ReplicaSet"))
    pdb = c.add_pdb("serving", {"app": "api"}, disruptions_allowed=1)
    ctl = controller(c, moto_endpoint, clock, drain_timeout_seconds=600)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    assert len(c.evictions) == 1 and Remediation.of(c.get_node("node-0")).phase == "draining"
    clock.t += 300
    ctl.reconcile_once()  # still blocked (429), before the deadline: wait
    assert recorder() == [] and Remediation.of(c.get_node("node-0")).phase == "draining"
    clock.t += 301
    ctl.reconcile_once()  # deadline passed: act anyway, and say so
    assert recorder() == [ids[0]]
    ev = [e for e in c.events if e.reason == "DrainDeadlineExceeded"]
    assert ev and "serving/api-" in ev[0].message
    assert pdb.disruptions_allowed == 0 and len(c.evictions) == 1


def test_blocked_eviction_is_retried_when_the_budget_allows(aws, moto_endpoint, recorder):
    make, _, _ = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    c.add_pod(Pod("serving", "api-0", "node-0", {"app": "api"}, "ReplicaSet"))
    pdb = c.add_pdb("serving", {"app": "api"}, disruptions_allowed=0)
    ctl = controller(c, moto_endpoint, clock)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    assert c.evictions == [] and recorder() == []
    pdb.disruptions_allowed = 1  # another replica became ready elsewhere
    clock.t += 10
    ctl.reconcile_once()
    assert c.evictions == [("serving", "api-0")] and recorder() == [ids[0]]


class CrashAfterCall:
    """A cloud whose process 'dies' right after the AWS call succeeded (before state is saved)."""

    def __init__(self, real):
        self.real = real

    def reboot(self, iid):
        self.real.reboot(iid)
        raise SystemExit("controller killed")

    def mark_unhealthy(self, iid):
        self.real.mark_unhealthy(iid)
        raise SystemExit("controller killed")


def test_restart_mid_replacement_is_idempotent_and_uses_one_spare(aws, moto_endpoint):
    make, _, asg = aws
    _, ids = make(5)
    c, clock = cluster_for(ids, spares=(3, 4)), Clock()
    cfg = dict(groups={"p5": GroupConfig(hot_spares=2)})
    first = controller(c, moto_endpoint, clock, **cfg)
    first.cloud = CrashAfterCall(first.cloud)
    mark(c, "node-0", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock())
    with pytest.raises(SystemExit):
        first.reconcile_once()
    r = Remediation.of(c.get_node("node-0"))
    assert (r.phase, r.sent, r.spare) == ("replacing", False, "node-3")  # intent saved, outcome not
    assert health(asg, ids)[ids[0]] == "UNHEALTHY"

    clock.t += 5
    second = controller(c, moto_endpoint, clock, **cfg)  # a new process: no memory but the annotations
    second.reconcile_once()
    second.reconcile_once()
    r = Remediation.of(c.get_node("node-0"))
    assert (r.phase, r.sent, r.spare) == ("replacing", True, "node-3")
    spare = c.get_node("node-3")
    assert L.HOT_SPARE not in spare.labels and not spare.has_taint(L.HOT_SPARE_TAINT)
    assert c.get_node("node-4").labels[L.HOT_SPARE] == "true"  # the second spare is still held
    assert sum(e.reason == "HotSparePromoted" for e in c.events) == 1
    assert list(health(asg, ids).values()).count("UNHEALTHY") == 1
    assert sum(e.reason == "NodeReplacing" for e in c.events) == 1


def test_restart_mid_drain_keeps_the_original_deadline(aws, moto_endpoint, recorder):
    make, _, _ = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    c.add_pod(Pod("serving", "api-0", "node-0", {"app": "api"}, "ReplicaSet"))
    c.add_pdb("serving", {"app": "api"}, disruptions_allowed=0)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    controller(c, moto_endpoint, clock, drain_timeout_seconds=600).reconcile_once()
    deadline = Remediation.of(c.get_node("node-0")).drain_deadline
    clock.t += 599
    controller(c, moto_endpoint, clock, drain_timeout_seconds=600).reconcile_once()  # restarted
    assert Remediation.of(c.get_node("node-0")).drain_deadline == deadline and recorder() == []
    clock.t += 2
    controller(c, moto_endpoint, clock, drain_timeout_seconds=600).reconcile_once()
    assert recorder() == [ids[0]]


def test_restart_mid_reboot_does_not_double_count_history(aws, moto_endpoint, recorder):
    make, _, _ = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    first = controller(c, moto_endpoint, clock)
    first.cloud = CrashAfterCall(first.cloud)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    with pytest.raises(SystemExit):
        first.reconcile_once()
    controller(c, moto_endpoint, clock).reconcile_once()
    n = c.get_node("node-0")
    assert Remediation.of(n).phase == "awaiting-health"
    assert len(json.loads(n.annotations[f"{L.DOMAIN}/reboot-history"])) == 1
    assert recorder() == [ids[0], ids[0]]  # at-least-once: the unconfirmed reboot is sent again


def test_new_nodes_refill_the_spare_pool(aws, moto_endpoint):
    make, _, _ = aws
    _, ids = make(3)
    c, clock = cluster_for(ids[:2]), Clock()
    c.add_node(Node("node-new", labels={L.INSTANCE_GROUP: "p5"}, taints=[Taint(L.STARTUP_TAINT, "pending")],
                    provider_id=f"aws:///{REGION}a/{ids[2]}"))
    ctl = controller(c, moto_endpoint, clock, groups={"p5": GroupConfig(hot_spares=1)})
    ctl.reconcile_once()
    n = c.get_node("node-new")
    assert n.labels[L.HOT_SPARE] == "true" and n.has_taint(L.HOT_SPARE_TAINT)
    assert all(L.HOT_SPARE not in c.get_node(f"node-{i}").labels for i in range(2))  # busy nodes never taken
    ctl.reconcile_once()
    assert sum(e.reason == "HotSpareReserved" for e in c.events) == 1


class FailsFor:
    """A cloud whose calls for one instance fail with a (non-terminal) AWS error."""

    def __init__(self, real, iid):
        self.real, self.iid = real, iid

    def reboot(self, iid):
        self.real.reboot(iid)

    def mark_unhealthy(self, iid):
        if iid == self.iid:
            raise RuntimeError("ServiceUnavailable: Auto Scaling is unavailable")
        self.real.mark_unhealthy(iid)


def test_a_failing_replace_never_blocks_another_nodes_reboot(aws, moto_endpoint, recorder):
    """Old code: the replace of node-0 (an Auto Scaling error) raised out of reconcile_once,
    so node-1's reboot, next in the same group, never happened."""
    make, _, asg = aws
    _, ids = make(4)
    c = cluster_for(ids)
    mark(c, "node-0", fault(Action.REPLACE, "gpu-row-remap-failure"))
    mark(c, "node-1", fault(Action.REBOOT))
    clock = Clock()
    ctl = controller(c, moto_endpoint, clock, budget_max_nodes=4, budget_max_percent=100)
    ctl.cloud = FailsFor(ctl.cloud, ids[0])  # (an instance that no longer exists is terminal: test_controller_failures)
    ctl.reconcile_once()
    clock.t += 1
    ctl.reconcile_once()
    assert ids[1] in recorder()
    assert ctl.metrics.errors.labels("p5")._value.get() >= 1
    assert any(e.reason == "RemediationError" for e in c.events if e.node == "node-0")


def test_replace_class_goes_before_reboot_class_when_the_budget_is_tight(aws, moto_endpoint, recorder):
    """Old code took the oldest fault first: with one slot, an older reboot held it while a broken node waited."""
    make, _, asg = aws
    _, ids = make(4)
    c = cluster_for(ids)
    clock = Clock()
    mark(c, "node-0", fault(Action.REBOOT), now=clock.t - 60)  # the older fault
    mark(c, "node-1", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock.t - 10)
    ctl = controller(c, moto_endpoint, clock, budget_max_nodes=1, budget_max_percent=100)
    ctl.reconcile_once()
    assert REMEDIATION in c.get_node("node-1").annotations
    assert REMEDIATION not in c.get_node("node-0").annotations


def test_a_fault_recurring_during_the_post_reboot_check_escalates(aws, moto_endpoint, recorder):
    """Old code: mark() dropped the recurrence (node already tainted for reboot) and the deep check passing
    later returned the node to service with the fault unresolved."""
    make, _, asg = aws
    _, ids = make(4)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock)
    mark(c, "node-1", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    assert Remediation.of(c.get_node("node-1")).phase == "awaiting-health"
    clock.t += 60
    assert mark(c, "node-1", fault(Action.REBOOT), now=clock())  # Xid 79 again after the reboot
    ctl.reconcile_once()
    n = c.get_node("node-1")
    assert Remediation.of(n).action == "replace" and n.labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT
    assert health(asg, ids)[ids[1]] == "UNHEALTHY" and recorder() == [ids[1]]


def test_escalation_counts_faults_by_class(aws, moto_endpoint, recorder):
    """Old code matched the exact fault name: an Xid 79 reboot followed by an Xid 95 on the same node rebooted again."""
    make, _, asg = aws
    _, ids = make(4)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock)
    mark(c, "node-2", fault(Action.REBOOT, "gpu-fell-off-bus"), now=clock())
    ctl.reconcile_once()
    clock.t += 300
    mark_healthy(c, "node-2", "deep health check passed")
    ctl.reconcile_once()
    clock.t += 3600
    mark(c, "node-2", fault(Action.REBOOT, "gpu-uncontained-ecc"), now=clock())
    ctl.reconcile_once()
    assert Remediation.of(c.get_node("node-2")).action == "replace"
    assert recorder() == [ids[2]]


def test_the_post_reboot_wait_follows_the_dcgm_level(aws, moto_endpoint, recorder):
    """Old code waited a fixed 1800 s: a DCGM level 4 deep check (hours) had its node replaced mid-run."""
    from node_agent.controller import await_health_seconds
    from node_agent.deep_check import DCGM_LEVEL_SECONDS

    assert DCGM_LEVEL_SECONDS[4] > 1800 and await_health_seconds(4) > await_health_seconds(2) + 3600
    make, _, asg = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock, dcgm_level=4)
    mark(c, "node-0", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    clock.t += 2400  # level 4 still running
    ctl.reconcile_once()
    assert Remediation.of(c.get_node("node-0")).action == "reboot"
    assert set(health(asg, ids).values()) == {"HEALTHY"}
    clock.t += await_health_seconds(4)
    ctl.reconcile_once()
    assert Remediation.of(c.get_node("node-0")).action == "replace"


def test_remediation_duration_is_observed_from_detection_to_the_end(aws, moto_endpoint, recorder):
    """openpod_remediation_duration_seconds{group,action,outcome}: fault detected -> back in service (reboot,
    recovered) or replaced node gone (replace, replaced). Issue 14's alert rules use this name and these labels."""
    make, _, _ = aws
    _, ids = make(4)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock, budget_max_nodes=4, budget_max_percent=100)
    reg = ctl.metrics.registry

    def sample(suffix, action, outcome):
        return reg.get_sample_value(f"openpod_remediation_duration_seconds_{suffix}",
                                    {"group": "p5", "action": action, "outcome": outcome})

    mark(c, "node-0", fault(Action.REBOOT), now=clock.t - 30)  # detected 30 s before the controller saw it
    mark(c, "node-1", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock.t)
    ctl.reconcile_once()
    assert sample("count", "reboot", "recovered") is None and sample("count", "replace", "replaced") is None
    clock.t += 600
    mark_healthy(c, "node-0", "deep health check passed")
    ctl.reconcile_once()
    assert sample("count", "reboot", "recovered") == 1 and sample("sum", "reboot", "recovered") == 630
    assert sample("bucket", "reboot", "recovered") is None  # (buckets carry le)
    assert reg.get_sample_value("openpod_remediation_duration_seconds_bucket",
                                {"group": "p5", "action": "reboot", "outcome": "recovered", "le": "600.0"}) == 0
    assert reg.get_sample_value("openpod_remediation_duration_seconds_bucket",
                                {"group": "p5", "action": "reboot", "outcome": "recovered", "le": "900.0"}) == 1
    clock.t += 1200
    c.remove_node("node-1")  # Auto Scaling terminated it; the node object went away
    ctl.reconcile_once()
    assert sample("count", "replace", "replaced") == 1 and sample("sum", "replace", "replaced") == 1800
    ctl.reconcile_once()
    assert sample("count", "replace", "replaced") == 1  # once


def test_a_replacement_is_observed_once_its_node_goes_even_by_a_restarted_controller(aws, moto_endpoint):
    """The nodes being replaced are read from the nodes each pass: a controller restarted mid-replacement still
    observes the replacement when the node goes away."""
    make, _, _ = aws
    _, ids = make(3)
    c, clock = cluster_for(ids), Clock()
    mark(c, "node-0", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock())
    controller(c, moto_endpoint, clock).reconcile_once()
    assert Remediation.of(c.get_node("node-0")).phase == "replacing"
    clock.t += 300
    second = controller(c, moto_endpoint, clock)  # a new process
    second.reconcile_once()
    c.remove_node("node-0")
    second.reconcile_once()
    assert second.metrics.registry.get_sample_value("openpod_remediation_duration_seconds_count", {
        "group": "p5", "action": "replace", "outcome": "replaced"}) == 1


def test_a_node_no_longer_being_replaced_is_not_counted_as_replaced_when_it_goes_later(aws, moto_endpoint):
    """An operator stops a replacement (removes the remediation annotation, keeps the node). When the node goes
    away much later (scaled in), that is no replacement. The old controller remembered every node it had seen
    replacing until the node went, and counted it as replaced then, with the whole time since the fault."""
    make, _, _ = aws
    _, ids = make(3)
    c, clock = cluster_for(ids), Clock()
    ctl = controller(c, moto_endpoint, clock)
    mark(c, "node-0", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock())
    ctl.reconcile_once()
    ctl.reconcile_once()
    assert Remediation.of(c.get_node("node-0")).phase == "replacing"
    c.patch_node("node-0", annotations={REMEDIATION: None, FAULT: None},
                 labels={L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE}, unschedulable=False)
    ctl.reconcile_once()
    clock.t += 30 * 86400
    c.remove_node("node-0")
    ctl.reconcile_once()
    assert ctl.metrics.registry.get_sample_value("openpod_remediation_duration_seconds_count", {
        "group": "p5", "action": "replace", "outcome": "replaced"}) is None
