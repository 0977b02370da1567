"""A small Kubernetes API server over HTTP for the controller tests (no real one exists here).

It serves only what the node agent and the controller call - nodes (get, list,
patch, status patch), pods (list by node, eviction), events (create),
coordination.k8s.io/v1 Leases (get, create, replace), and for the two-node check
batch/v1 Jobs (create, get, delete: its pods and the objects it owns go with it, as the
garbage collector does), Secrets and Services (create), pods by label selector in a
namespace and a pod's log, and for ``openpod status`` the list of a custom resource whose
CRD is installed (:meth:`FakeApiServer.add_custom`: Kueue's ClusterQueues, LocalQueues) -
but with the API server's concurrency semantics, which are what these tests are about:

- every write bumps one cluster-wide ``metadata.resourceVersion``;
- a PATCH whose body carries ``metadata.resourceVersion`` is a precondition: 409 Conflict if the
  object changed since (kubernetes/kubernetes#63104; controller-runtime's MergeFromWithOptimisticLock);
- a PUT (replace) must carry the current ``resourceVersion``, else 409 Conflict;
- a POST of an object that exists is 409 AlreadyExists.

Patch semantics are the JSON merge patch of RFC 7386 (a null deletes a key, lists are
replaced whole: ``spec.taints`` has no merge key in the strategic merge patch either), except
``status.conditions`` in the status subresource, which the strategic merge keys by ``type``.
The official kubernetes client talks to it, so the requests are the ones a real cluster sees.
"""

from __future__ import annotations

import copy
import http.server
import json
import threading
from urllib.parse import parse_qs, urlparse

from tests.http_reply import reply

LEASES = "/apis/coordination.k8s.io/v1/namespaces/"


def _merge(target: dict, patch: dict) -> dict:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)
    return target


def _status(code: int, reason: str, message: str) -> dict:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": message}


class FakeApiServer:
    """``with FakeApiServer() as api: KubeCluster(api.client())``; ``api.nodes`` etc. are the stored objects."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.pods: dict[tuple[str, str], dict] = {}
        self.leases: dict[tuple[str, str], dict] = {}
        self.objects: dict[tuple[str, str, str], dict] = {}   # (kind, namespace, name): Jobs, Secrets, Services
        self.logs: dict[tuple[str, str], str] = {}
        # custom resources: (group, version, plural) -> objects; a plural absent here is a CRD not installed
        self.custom: dict[tuple[str, str, str], list[dict]] = {}
        self._uid = 0
        self.events: list[dict] = []
        self.requests: list[tuple[str, str]] = []
        self.conflicts = 0
        self.lock = threading.Lock()
        self._rv = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY (socketserver.StreamRequestHandler): a reply's headers and body are two writes, and with
            # Nagle's algorithm the body waited for the client's ACK of the headers, which the kubernetes client's
            # keep-alive connection delays up to 40 ms (Linux's delayed ACK): 40 ms a request (test_leader's fault
            # storm: 27 s, 2.5 s without).
            disable_nagle_algorithm = True

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else None

            def _send(self, code: int, body: dict | str) -> None:
                reply(self, code, body)  # a str is a pod's log (text/plain)

            def _handle(self):
                url = urlparse(self.path)
                body = self._body() if self.command in ("POST", "PUT", "PATCH") else None
                with server.lock:
                    server.requests.append((self.command, url.path))
                    code, out = server.handle(self.command, url.path, parse_qs(url.query), body)
                    if code == 409:
                        server.conflicts += 1
                self._send(code, out)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> FakeApiServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def client(self):
        """A fresh kubernetes ApiClient pointed at this server (one per simulated process)."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.url
        return client.ApiClient(cfg)

    # -------------------------------------------------------------- test helpers
    def _bump(self, obj: dict) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    def add_node(self, name: str, labels: dict | None = None, provider_id: str = "", taints=(),
                 conditions: list[dict] | None = None, unschedulable: bool = False) -> None:
        with self.lock:
            node = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": dict(labels or {}), "annotations": {}},
                    "spec": {"providerID": provider_id,
                             "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]},
                    "status": {"conditions": list(conditions or [])}}
            if unschedulable:
                node["spec"]["unschedulable"] = True
            self._bump(node)
            self.nodes[name] = node

    def add_custom(self, group: str, version: str, plural: str, obj: dict | None = None) -> None:
        """Install the CRD of ``plural`` (its list answers from now on) and store ``obj`` if given."""
        with self.lock:
            items = self.custom.setdefault((group, version, plural), [])
            if obj is not None:
                obj = copy.deepcopy(obj)
                self._bump(obj)
                items.append(obj)

    def remove_node(self, name: str) -> None:
        with self.lock:
            self.nodes.pop(name, None)

    def add_pod(self, namespace: str, name: str, node: str, owner_kind: str = "ReplicaSet") -> None:
        with self.lock:
            self.pods[(namespace, name)] = {
                "metadata": {"name": name, "namespace": namespace, "labels": {},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "o",
                                                  "uid": "u"}]},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": "Running"}}

    def run_job_pod(self, namespace: str, job: str, phase: str, log: str | None = None, index: int = 0,
                    node: str = "node-new") -> str:
        """What the Job controller, the scheduler and the kubelet would do: the Job's pod of ``index`` exists,
        in ``phase``, on ``node`` ("": not scheduled)."""
        with self.lock:
            name = f"{job}-{index}-xk2p9"
            self.pods[(namespace, name)] = {
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"batch.kubernetes.io/job-name": job,
                                        "batch.kubernetes.io/job-completion-index": str(index)},
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                                  "uid": self.objects[("Job", namespace, job)]["metadata"]["uid"]}]},
                "spec": {"nodeName": node, "containers": [{"name": "all-reduce", "image": "x"}]},
                "status": {"phase": phase}}
            if log is not None:
                self.logs[(namespace, name)] = log
            return name

    def fail_job(self, namespace: str, job: str, reason: str) -> None:
        with self.lock:
            self.objects[("Job", namespace, job)]["status"] = {"conditions": [
                {"type": "Failed", "status": "True", "reason": reason, "message": reason}]}

    # ------------------------------------------------------------------- the API
    def handle(self, method: str, path: str, query: dict, body) -> tuple[int, dict]:
        parts = path.strip("/").split("/")
        if (path.startswith("/apis/batch/v1/namespaces/") or
                (path.startswith("/api/v1/namespaces/") and len(parts) >= 5 and parts[4] in ("secrets", "services"))):
            return self._namespaced(method, parts, query, body)
        if path.startswith("/api/v1/namespaces/") and len(parts) == 5 and parts[4] == "pods" and method == "GET":
            sel = dict(kv.split("=", 1) for kv in query.get("labelSelector", [""])[0].split(",") if kv)
            items = [p for (ns, _), p in self.pods.items() if ns == parts[3]
                     and all(p["metadata"]["labels"].get(k) == v for k, v in sel.items())]
            return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": copy.deepcopy(items)}
        if path.endswith("/log") and method == "GET":
            key = (parts[3], parts[5])
            if key not in self.logs:
                return 404, _status(404, "NotFound", f'pods "{key[1]}" not found')
            return 200, self.logs[key]
        if path == "/api/v1/nodes" and method == "GET":
            sel = dict(kv.split("=", 1) for kv in query.get("labelSelector", [""])[0].split(",") if kv)
            items = [n for n in self.nodes.values()
                     if all(n["metadata"]["labels"].get(k) == v for k, v in sel.items())]
            return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": str(self._rv)},
                         "items": copy.deepcopy(items)}
        if path.startswith("/api/v1/nodes/"):
            name = parts[3]
            node = self.nodes.get(name)
            if node is None:
                return 404, _status(404, "NotFound", f'nodes "{name}" not found')
            if method == "GET":
                return 200, copy.deepcopy(node)
            if method == "PATCH":
                want = (body.get("metadata") or {}).pop("resourceVersion", None)
                if want is not None and want != node["metadata"]["resourceVersion"]:
                    return 409, _status(409, "Conflict", f'Operation cannot be fulfilled on nodes "{name}": '
                                        "the object has been modified; please apply your changes to the latest "
                                        "version and try again")
                if path.endswith("/status"):
                    conds = {c["type"]: c for c in node["status"].get("conditions", [])}
                    for c in (body.get("status") or {}).get("conditions", []):
                        conds[c["type"]] = c
                    node["status"]["conditions"] = list(conds.values())
                else:
                    _merge(node, body)
                self._bump(node)
                return 200, copy.deepcopy(node)
        if path == "/api/v1/pods" and method == "GET":
            sel = query.get("fieldSelector", [""])[0].removeprefix("spec.nodeName=")
            items = [p for p in self.pods.values() if p["spec"]["nodeName"] == sel]
            return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": copy.deepcopy(items)}
        if path.endswith("/eviction") and method == "POST":
            key = (parts[3], parts[5])
            if self.pods.pop(key, None) is None:
                return 404, _status(404, "NotFound", "pod not found")
            return 201, _status(201, "", "")
        if path.endswith("/events") and method == "POST":
            self.events.append(body)
            return 201, body
        if path.startswith(LEASES):
            return self._lease(method, parts, body)
        if parts[0] == "apis" and method == "GET" and len(parts) in (4, 6):
            return self._custom_list(parts)
        return 404, _status(404, "NotFound", f"{method} {path} is not served by the fake")

    def _namespaced(self, method: str, parts: list[str], query: dict, body) -> tuple[int, dict]:
        """Jobs (/apis/batch/v1/namespaces/NS/jobs[/NAME]), Secrets and Services (/api/v1/namespaces/NS/...)."""
        batch = parts[0] == "apis"
        ns, plural = (parts[4], parts[5]) if batch else (parts[3], parts[4])
        kind = {"jobs": "Job", "secrets": "Secret", "services": "Service"}[plural]
        name = (parts[6] if len(parts) > 6 else None) if batch else (parts[5] if len(parts) > 5 else None)
        if method == "POST" and name is None:
            key = (kind, ns, body["metadata"]["name"])
            if key in self.objects:
                return 409, _status(409, "AlreadyExists", f'{plural} "{key[2]}" already exists')
            obj = copy.deepcopy(body)
            obj["metadata"]["namespace"] = ns
            self._uid += 1
            obj["metadata"]["uid"] = f"uid-{self._uid}"
            self._bump(obj)
            self.objects[key] = obj
            return 201, copy.deepcopy(obj)
        key = (kind, ns, name)
        if key not in self.objects:
            return 404, _status(404, "NotFound", f'{plural} "{name}" not found')
        if method == "GET":
            return 200, copy.deepcopy(self.objects[key])
        if method == "DELETE":
            obj = self.objects.pop(key)
            uid = obj["metadata"]["uid"]
            # the garbage collector: whatever the deleted object owned goes too
            for k in [k for k, o in self.objects.items()
                      if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences", []))]:
                del self.objects[k]
            for k in [k for k, p in self.pods.items()
                      if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences", []))]:
                del self.pods[k]
            return 200, _status(200, "", "")
        return 405, _status(405, "MethodNotAllowed", method)

    def _custom_list(self, parts: list[str]) -> tuple[int, dict]:
        """GET /apis/G/V/PLURAL (every namespace) or /apis/G/V/namespaces/NS/PLURAL. A resource whose CRD is not
        installed is the API server's 404 for a path it does not serve: a Status with reason NotFound and
        "the server could not find the requested resource" (k8s.io/apimachinery pkg/api/errors/errors.go,
        NewGenericServerResponse for 404; what `kubectl get clusterqueues` prints on a cluster without Kueue)."""
        group, version = parts[1], parts[2]
        ns, plural = (parts[4], parts[5]) if len(parts) == 6 else (None, parts[3])
        items = self.custom.get((group, version, plural))
        if items is None or (len(parts) == 6 and parts[3] != "namespaces"):
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        items = [o for o in items if ns is None or o["metadata"].get("namespace") == ns]
        kind = items[0]["kind"] if items else ""
        return 200, {"apiVersion": f"{group}/{version}", "kind": f"{kind}List",
                     "metadata": {"resourceVersion": str(self._rv)}, "items": copy.deepcopy(items)}

    def _lease(self, method: str, parts: list[str], body) -> tuple[int, dict]:
        ns = parts[4]
        if method == "POST":
            key = (ns, body["metadata"]["name"])
            if key in self.leases:
                return 409, _status(409, "AlreadyExists", f'leases "{key[1]}" already exists')
            obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **body}
            obj["metadata"] = {**body["metadata"], "namespace": ns}
            self._bump(obj)
            self.leases[key] = obj
            return 201, copy.deepcopy(obj)
        key = (ns, parts[6])
        lease = self.leases.get(key)
        if lease is None:
            return 404, _status(404, "NotFound", f'leases.coordination.k8s.io "{key[1]}" not found')
        if method == "GET":
            return 200, copy.deepcopy(lease)
        if method == "PUT":
            if body["metadata"].get("resourceVersion") != lease["metadata"]["resourceVersion"]:
                return 409, _status(409, "Conflict", f'Operation cannot be fulfilled on leases.coordination.k8s.io '
                                    f'"{key[1]}": the object has been modified')
            obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **body}
            self._bump(obj)
            self.leases[key] = obj
            return 200, copy.deepcopy(obj)
        return 405, _status(405, "MethodNotAllowed", method)
