"""Live queue usage and a team's jobs, read from the cluster: ``openpod queues --live``, ``openpod jobs``;
the Nodes and LocalQueues ``openpod status`` also reads (:mod:`infra.governance.status`).

Everything goes through :class:`QueueApi`, a narrow boundary with two implementations like the node
agent's (``node_agent/kube.py``): :class:`KubeQueueApi` on the official kubernetes client, and
:class:`InMemoryQueueApi` over API-shaped objects (tests replay recorded responses).

What is read (Kueue v0.19.2 ``kueue.x-k8s.io/v1beta2``, kubernetes-sigs/kueue@v0.19.2):

* ClusterQueue ``status.flavorsReservation[].resources[].{total,borrowed}`` (quota reserved, which
  admitted workloads hold), ``status.pendingWorkloads``, ``status.admittedWorkloads``
  (apis/kueue/v1beta2/clusterqueue_types.go:351-428);
* Workload ``status.conditions`` (``QuotaReserved``, ``Admitted``, ``PodsReady``, ``Evicted``,
  ``Preempted``, ``Finished``: workload_types.go:931-1015), ``status.admission.podSetAssignments[].flavors``
  (workload_types.go:270-314), owned by its JobSet (``metadata.ownerReferences``);
* the ``Preempted`` condition's message, which names the preemptor's ClusterQueue path
  (pkg/scheduler/preemption/preemption.go:177-191).

Kueue records what a queue borrows, not whom from: "idle" is the team's nominal quota it does not
use (what others may be borrowing), not a per-lender figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from infra.governance import queues as q
from infra.governance import resources as res
from infra.governance.apply import ClusterError, _client
from infra.spec.cluster import ClusterSpec

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")


class QueueApi(Protocol):
    def cluster_queues(self) -> list[dict[str, Any]]: ...
    def workloads(self, namespace: str) -> list[dict[str, Any]]: ...
    def jobsets(self, namespace: str) -> list[dict[str, Any]]: ...
    def delete_jobset(self, namespace: str, name: str) -> None: ...
    def pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]: ...
    def pod_log(self, namespace: str, pod: str, tail_lines: int) -> str: ...
    def nodes(self) -> list[dict[str, Any]]: ...
    def local_queues(self) -> list[dict[str, Any]]: ...


class InMemoryQueueApi:
    """The boundary over API-shaped objects (``kind`` + ``metadata``), e.g. recorded responses."""

    def __init__(self, objects: list[dict[str, Any]], logs: dict[tuple[str, str], str] | None = None) -> None:
        self.objects = list(objects)
        self.logs = dict(logs or {})
        self.deleted: list[tuple[str, str]] = []

    def _of(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind
                and (namespace is None or o["metadata"].get("namespace") == namespace)]

    def cluster_queues(self):
        return self._of("ClusterQueue")

    def workloads(self, namespace):
        return self._of("Workload", namespace)

    def nodes(self):
        return self._of("Node")

    def local_queues(self):
        return self._of("LocalQueue")

    def jobsets(self, namespace):
        return self._of("JobSet", namespace)

    def delete_jobset(self, namespace, name):
        if not any(o["metadata"]["name"] == name for o in self.jobsets(namespace)):
            raise ClusterError(f"no JobSet {name!r} in namespace {namespace}")
        self.objects = [o for o in self.objects if not (o["kind"] == "JobSet" and o["metadata"]["name"] == name
                                                        and o["metadata"].get("namespace") == namespace)]
        self.deleted.append((namespace, name))

    def pods(self, namespace, label_selector):
        key, _, value = label_selector.partition("=")
        return [p for p in self._of("Pod", namespace) if p["metadata"].get("labels", {}).get(key) == value]

    def pod_log(self, namespace, pod, tail_lines):
        text = self.logs.get((namespace, pod), "")
        return "\n".join(text.splitlines()[-tail_lines:]) + ("\n" if text else "")


class KubeQueueApi:
    """The boundary on the kubernetes client (kubeconfig, then in-cluster config)."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, api_client=None) -> None:
        client = _client(kubeconfig, context) if api_client is None else __import__("kubernetes").client
        self._client = client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def _call(self, what: str, fn, *args, **kw):
        try:
            return fn(*args, _request_timeout=20, **kw)
        except self._client.ApiException as e:
            raise ClusterError(f"the API server refused to {what} ({e.status} {e.reason})") from None
        except Exception as e:
            if type(e).__module__.startswith(("urllib3", "socket", "ssl")) or isinstance(e, OSError):
                raise ClusterError(f"cannot reach the cluster API server: {e.__class__.__name__}") from None
            raise

    def cluster_queues(self):
        return self._call("list ClusterQueues", self.custom.list_cluster_custom_object, *KUEUE,
                          "clusterqueues")["items"]

    def nodes(self):
        out = self._call("list Nodes", self.core.list_node)
        return [self.core.api_client.sanitize_for_serialization(n) for n in out.items]

    def local_queues(self):
        return self._call("list LocalQueues", self.custom.list_cluster_custom_object, *KUEUE, "localqueues")["items"]

    def workloads(self, namespace):
        return self._call(f"list Workloads in {namespace}", self.custom.list_namespaced_custom_object, *KUEUE,
                          namespace, "workloads")["items"]

    def jobsets(self, namespace):
        return self._call(f"list JobSets in {namespace}", self.custom.list_namespaced_custom_object, *JOBSET,
                          namespace, "jobsets")["items"]

    def delete_jobset(self, namespace, name):
        self._call(f"delete JobSet {namespace}/{name}", self.custom.delete_namespaced_custom_object, *JOBSET,
                   namespace, "jobsets", name, propagation_policy="Foreground")

    def pods(self, namespace, label_selector):
        out = self._call(f"list pods in {namespace}", self.core.list_namespaced_pod, namespace,
                         label_selector=label_selector)
        return [self.core.api_client.sanitize_for_serialization(p) for p in out.items]

    def pod_log(self, namespace, pod, tail_lines):
        return self._call(f"read the log of {namespace}/{pod}", self.core.read_namespaced_pod_log, pod, namespace,
                          tail_lines=tail_lines)


# ---------------------------------------------------------------------------- queues


@dataclass(frozen=True)
class QueueUsage:
    """One team on one group, in nodes (fractions for part-node jobs)."""

    team: str
    group: str
    nominal: float
    in_use: float
    borrowed: float
    admitted: int
    pending: int

    @property
    def idle(self) -> float:
        return max(0.0, self.nominal - self.in_use + self.borrowed)


def _amount(quantity: str | int | float) -> float:
    """A Kubernetes quantity as a float in base units (enough for the suffixes Kueue writes)."""
    s = str(quantity)
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", s)
    if not m:
        raise ValueError(f"not a quantity: {s!r}")
    num, suffix = float(m.group(1)), m.group(2)
    scale = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    return num * scale[suffix]


def _node_resource(spec: ClusterSpec, group: str) -> tuple[str, float]:
    """The resource that counts nodes on ``group`` and one node's amount of it."""
    t = spec.group(group).type
    share = res.node_share(t).quantities(t)
    r = t.device_resource or res.CPU
    return r, float(share[r])


def queue_usage(spec: ClusterSpec, cluster_queues: list[dict[str, Any]]) -> list[QueueUsage]:
    teams = {t.name for t in spec.teams}
    out = []
    for cq in sorted(cluster_queues, key=lambda o: o["metadata"]["name"]):
        team = cq["metadata"]["name"]
        if team not in teams:
            continue
        status = cq.get("status", {})
        reserved = {f["name"]: {r["name"]: r for r in f.get("resources", [])}
                    for f in status.get("flavorsReservation", [])}
        for rg in cq["spec"].get("resourceGroups", []):
            for flavor in rg["flavors"]:
                group = flavor["name"]
                r, per_node = _node_resource(spec, group)
                nominal = next((_amount(x["nominalQuota"]) for x in flavor["resources"] if x["name"] == r), 0.0)
                used = reserved.get(group, {}).get(r, {})
                out.append(QueueUsage(team, group, nominal / per_node, _amount(used.get("total", 0)) / per_node,
                                      _amount(used.get("borrowed", 0)) / per_node,
                                      int(status.get("admittedWorkloads", 0)), int(status.get("pendingWorkloads", 0))))
    return out


def _n(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}".rstrip("0")


def render_usage(spec: ClusterSpec, rows: list[QueueUsage]) -> list[str]:
    table = [("TEAM", "GROUP", "NOMINAL", "IN USE", "BORROWED", "IDLE", "ADMITTED", "PENDING")]
    for u in rows:
        table.append((u.team, u.group, _n(u.nominal), _n(u.in_use), _n(u.borrowed), _n(u.idle),
                      str(u.admitted), str(u.pending)))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    pools = q.idle_pools(spec)
    lines.append("")
    lines.append("nodes (fractions: part-node jobs); IN USE = quota reserved by admitted jobs, BORROWED = the part "
                 "above the nominal quota, IDLE = nominal quota the team does not use (others may borrow it); "
                 "ADMITTED / PENDING = the team's workloads")
    if pools:
        lines.append("idle pool: " + ", ".join(pools))
    return lines


# ------------------------------------------------------------------------------ jobs


@dataclass(frozen=True)
class JobState:
    name: str
    priority: str
    nodes: int
    state: str            # Pending, Admitted, Running, Requeued, Finished, Unmanaged
    flavor: str
    detail: str           # pending reason, eviction reason, finish message
    preempted_by: str     # the preemptor's ClusterQueue path and reason, when preempted


def _cond(wl: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == type_), None)


def _true(wl: dict[str, Any], type_: str) -> bool:
    c = _cond(wl, type_)
    return bool(c and c["status"] == "True")


# "Preempted to accommodate a workload (UID: ..., JobUID: ...) due to <reason>; preemptor path: /a/b; ..."
PREEMPTED = re.compile(r"\(UID: (?P<uid>[^,]+), JobUID: [^)]+\) due to (?P<reason>[^;]+); "
                       r"preemptor path: (?P<path>[^;]+);")


def _owner(wl: dict[str, Any]) -> str | None:
    for ref in wl["metadata"].get("ownerReferences", []):
        if ref.get("kind") == "JobSet":
            return ref["name"]
    return None


def job_states(jobsets: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> list[JobState]:
    by_owner = {_owner(w): w for w in workloads if _owner(w)}
    out = []
    for js in sorted(jobsets, key=lambda o: o["metadata"]["name"]):
        name = js["metadata"]["name"]
        labels_ = js["metadata"].get("labels", {})
        rjs = js["spec"].get("replicatedJobs", [])
        nodes = sum(r.get("replicas", 1) * r["template"]["spec"].get("parallelism", 1) for r in rjs)
        wl = by_owner.get(name)
        priority = labels_.get("kueue.x-k8s.io/priority-class", "")
        if wl is None:
            out.append(JobState(name, priority, nodes, "Unmanaged", "", "no Kueue workload (yet)", ""))
            continue
        flavors = sorted({f for a in wl.get("status", {}).get("admission", {}).get("podSetAssignments", [])
                          for f in a.get("flavors", {}).values()})
        preempted_by = ""
        pc = _cond(wl, "Preempted")
        if pc and (m := PREEMPTED.search(pc.get("message", ""))):
            preempted_by = f"{m['path']} ({m['reason']})"
        if _true(wl, "Finished"):
            state, detail = "Finished", _cond(wl, "Finished").get("message", "")
        elif _true(wl, "Evicted") and not _true(wl, "QuotaReserved"):
            # evicted (preempted, pods not ready in time, ...) and requeued: waiting for quota again
            c = _cond(wl, "Evicted")
            pending = (_cond(wl, "QuotaReserved") or {}).get("message", "")
            state, detail = "Requeued", f"evicted ({c.get('reason', '')}); " + (pending or "waiting for quota")
        elif _true(wl, "Admitted"):
            state = "Running" if _true(wl, "PodsReady") else "Admitted"
            detail = "" if state == "Running" else "waiting for all pods to be ready"
        else:
            c = _cond(wl, "QuotaReserved") or {}
            state, detail = "Pending", c.get("message", "waiting for Kueue")
        out.append(JobState(name, priority, nodes, state, ",".join(flavors), detail, preempted_by))
    return out


def render_jobs(states: list[JobState]) -> list[str]:
    table = [("NAME", "PRIORITY", "NODES", "STATE", "FLAVOR", "DETAIL")]
    for s in states:
        detail = s.detail + (f"; preempted by {s.preempted_by}" if s.preempted_by else "")
        table.append((s.name, s.priority, str(s.nodes), s.state, s.flavor or "-", detail))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in table]
