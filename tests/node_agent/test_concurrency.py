"""Two writers on one Node, through a real HTTP API with resourceVersion semantics (fake_apiserver.py).

The controller and the detector both read a node, decide, and write. Without a
resourceVersion precondition the later write silently overwrites what the other
wrote in between (labels, the fault annotation, the whole taint list); with it the
later writer gets 409 Conflict, re-reads and decides again on the fresh state.
"""

from __future__ import annotations

import pytest

from openpod_core import labels as L
from node_agent.controller import Remediation
from node_agent.findings import Action
from node_agent.kube import KubeCluster
from node_agent.marking import FAULT, REMEDIATION, mark, mark_healthy
from tests.node_agent.fake_apiserver import FakeApiServer
from tests.node_agent.test_controller import (  # noqa: F401 (aws, clients, recorder: fixtures)
    REGION, Clock, aws, clients, controller, fault, health, recorder)


class RacedBy(KubeCluster):
    """A process's view of the API where, once armed, another writer's write lands just before our next node
    patch: the interleaving "we read, they write, we write" made deterministic."""

    def __init__(self, api_client, component="test"):
        super().__init__(api_client, component)
        self.before_next_patch = None

    def patch_node(self, name, **kw):
        other, self.before_next_patch = self.before_next_patch, None
        if other is not None:
            other()
        return super().patch_node(name, **kw)


@pytest.fixture
def api():
    with FakeApiServer() as a:
        yield a


def nodes_for(api, ids, group="p5"):
    for i, iid in enumerate(ids):
        api.add_node(f"node-{i}", {L.INSTANCE_GROUP: group, L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE},
                     provider_id=f"aws:///{REGION}a/{iid}")


def test_a_replace_verdict_racing_the_controllers_return_to_service_is_not_lost(api, aws, moto_endpoint, recorder):
    """Old code: the controller's "remediated" patch (fault annotation cleared, taint list rewritten from its stale
    read, uncordon) landed after the detector marked a replace-class fault: the node went back into service with
    the replace verdict's annotation and taint gone."""
    make, _, asg = aws
    _, ids = make(3)
    nodes_for(api, ids)
    detector, ctl_view = KubeCluster(api.client()), RacedBy(api.client())
    clock = Clock()
    ctl = controller(ctl_view, moto_endpoint, clock)
    mark(detector, "node-1", fault(Action.REBOOT), now=clock())
    ctl.reconcile_once()
    assert Remediation.of(detector.get_node("node-1")).phase == "awaiting-health" and recorder() == [ids[1]]
    clock.t += 300
    mark_healthy(detector, "node-1", "deep health check passed")

    ctl_view.before_next_patch = lambda: mark(detector, "node-1", fault(Action.REPLACE, "gpu-row-remap-failure"),
                                              now=clock())
    ctl.reconcile_once()
    n = detector.get_node("node-1")
    assert n.unschedulable and n.has_taint(L.UNHEALTHY_TAINT), "the replace verdict was overwritten"
    assert n.labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT
    assert Remediation.of(n).action == "replace" and health(asg, ids)[ids[1]] == "UNHEALTHY"
    assert api.conflicts >= 1


def test_a_detector_mark_racing_the_controllers_taint_patch_keeps_both(api, aws, moto_endpoint, recorder):
    """Old code: mark() wrote the taint list it had read before the controller put the startup taint on (reboot):
    the startup taint vanished, so the rebooted node's deep check would never run."""
    make, _, asg = aws
    _, ids = make(3)
    nodes_for(api, ids)
    ctl_view, det_view = KubeCluster(api.client()), RacedBy(api.client())
    clock = Clock()
    ctl = controller(ctl_view, moto_endpoint, clock)
    mark(det_view, "node-0", fault(Action.REBOOT), now=clock())
    # The detector reads node-0 for a second finding; the controller reboots it (startup taint on, fault cleared)
    # before the detector's write lands.
    det_view.before_next_patch = ctl.reconcile_once
    clock.t += 1
    assert mark(det_view, "node-0", fault(Action.REPLACE, "gpu-row-remap-failure"), now=clock())
    n = ctl_view.get_node("node-0")
    assert n.has_taint(L.STARTUP_TAINT) and n.has_taint(L.UNHEALTHY_TAINT)
    assert FAULT in n.annotations and REMEDIATION in n.annotations  # the recurrence is recorded for the controller
    ctl.reconcile_once()
    assert Remediation.of(ctl_view.get_node("node-0")).action == "replace"
    assert health(asg, ids)[ids[0]] == "UNHEALTHY" and recorder() == [ids[0]]
    assert api.conflicts >= 1
