"""KubeCluster (the real boundary) speaks the Kubernetes API as expected.

No API server exists here, so a small HTTP endpoint plays one: it answers with
API-shaped JSON and records each request, and the test checks the method, path,
content type and body the official client sends for each boundary call.
"""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from node_agent.kube import Conflict, Eviction, KubeCluster, NotFound, Taint
from tests.http_reply import reply

NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"openpod.io/instance-group": "p5"},
                     "annotations": {"openpod.io/fault": "{}"}},
        "spec": {"providerID": "aws:///us-east-2a/i-0abc", "taints": [
            {"key": "openpod.io/health-check", "value": "pending", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                                   "lastTransitionTime": "2025-03-11T09:00:00Z"}]}}
PODS = {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [
    {"metadata": {"name": "trainer-0", "namespace": "team-a", "labels": {"job": "llm"},
                  "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "llm", "uid": "u1"}]},
     "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Running"}},
    {"metadata": {"name": "done-0", "namespace": "team-a"},
     "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Succeeded"}},
]}


class Api(http.server.BaseHTTPRequestHandler):
    requests: list = []
    evict_status = 201

    def _send(self, code, body):
        reply(self, code, body)

    def _record(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n)) if n else None
        Api.requests.append((self.command, self.path, self.headers.get("Content-Type"), body))
        return body

    def do_GET(self):  # noqa: N802
        self._record()
        if self.path.startswith("/api/v1/nodes/n1"):
            return self._send(200, NODE)
        if self.path.startswith("/api/v1/nodes/"):
            return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        if self.path.startswith("/api/v1/pods"):
            return self._send(200, PODS)
        return self._send(404, {})

    def do_PATCH(self):  # noqa: N802
        body = self._record()
        if (body.get("metadata") or {}).get("resourceVersion") == "stale":
            return self._send(409, {"kind": "Status", "code": 409, "reason": "Conflict",
                                    "message": "the object has been modified"})
        self._send(200, NODE)

    def do_POST(self):  # noqa: N802
        body = self._record()
        if self.path.endswith("/eviction"):
            return self._send(Api.evict_status, {"kind": "Status", "code": Api.evict_status})
        return self._send(201, body)

    def log_message(self, *a):
        pass


@pytest.fixture
def kube():
    from kubernetes import client

    Api.requests = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{srv.server_port}"
    yield KubeCluster(client.ApiClient(cfg))
    srv.shutdown()


def test_reads_nodes_into_the_boundary_types(kube):
    n = kube.get_node("n1")
    assert n.instance_id == "i-0abc" and n.has_taint("openpod.io/health-check")
    assert n.labels["openpod.io/instance-group"] == "p5" and n.condition("Ready").status == "True"
    with pytest.raises(NotFound):
        kube.get_node("gone")


def test_patch_is_a_strategic_merge_with_null_deletes(kube):
    kube.patch_node("n1", labels={"openpod.io/node-health-status": "UnschedulablePendingReboot",
                                  "openpod.io/hot-spare": None},
                    taints=[Taint("openpod.io/unhealthy", "reboot")], unschedulable=True)
    method, path, ctype, body = Api.requests[-1]
    assert (method, path, ctype) == ("PATCH", "/api/v1/nodes/n1", "application/strategic-merge-patch+json")
    assert body["metadata"]["labels"] == {"openpod.io/node-health-status": "UnschedulablePendingReboot",
                                          "openpod.io/hot-spare": None}
    assert body["spec"] == {"taints": [{"key": "openpod.io/unhealthy", "value": "reboot", "effect": "NoSchedule"}],
                            "unschedulable": True}


def test_condition_goes_to_the_status_subresource(kube):
    from node_agent.kube import Condition

    kube.set_condition("n1", Condition("AcceleratorHealthy", "False", "GpuFellOffBus", "Xid 79"))
    method, path, ctype, body = Api.requests[-1]
    assert (method, path) == ("PATCH", "/api/v1/nodes/n1/status")
    (c,) = body["status"]["conditions"]
    assert (c["type"], c["status"], c["reason"]) == ("AcceleratorHealthy", "False", "GpuFellOffBus")


def test_pods_events_and_evictions(kube):
    pods = kube.list_pods_on_node("n1")
    assert [(p.namespace, p.name, p.owner_kind) for p in pods] == [("team-a", "trainer-0", "Job")]
    assert "fieldSelector=spec.nodeName%3Dn1" in Api.requests[-1][1]
    kube.create_event("n1", "GpuFellOffBus", "Xid 79")
    method, path, _, body = Api.requests[-1]
    assert (method, path) == ("POST", "/api/v1/namespaces/default/events")
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n1"}
    assert kube.evict_pod("team-a", "trainer-0") is Eviction.EVICTED
    assert Api.requests[-1][1] == "/api/v1/namespaces/team-a/pods/trainer-0/eviction"
    Api.evict_status = 429
    try:
        assert kube.evict_pod("team-a", "trainer-0") is Eviction.BLOCKED
        Api.evict_status = 404
        assert kube.evict_pod("team-a", "trainer-0") is Eviction.GONE
    finally:
        Api.evict_status = 201


def test_a_patch_with_a_resource_version_is_a_precondition(kube):
    kube.patch_node("n1", labels={"a": "b"}, resource_version="42")
    assert Api.requests[-1][3]["metadata"] == {"labels": {"a": "b"}, "resourceVersion": "42"}
    with pytest.raises(Conflict):
        kube.patch_node("n1", labels={"a": "b"}, resource_version="stale")
    kube.patch_node("n1", labels={"a": "b"})
    assert "resourceVersion" not in Api.requests[-1][3]["metadata"]  # callers that merge their own keys only


def test_the_boundary_does_not_load_the_generated_core_api():
    """kubernetes.client.CoreV1Api's generated module costs ~80 MB of resident memory (node_agent/kube_api.py);
    the old boundary imported it and put the detector over its 100 MB target (137 MB measured)."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; from kubernetes import client; from node_agent.kube import KubeCluster; "
            "KubeCluster(client.ApiClient()); "
            "print(sorted(m for m in sys.modules if m.startswith('kubernetes.client.api.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert "core_v1_api" not in out and "batch_v1_api" not in out, out
