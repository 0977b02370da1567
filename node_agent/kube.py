"""The narrow Kubernetes boundary the agent and controller use, and its two implementations.

Everything the node agent does to Kubernetes goes through :class:`Cluster`:
read nodes, patch labels / annotations / taints / cordon, set a node
condition, create Events, list a node's pods and evict one (honouring
PodDisruptionBudgets: the API answers 429 while a budget forbids it), and,
for the two-node check (node_agent/pair_runner.py), create and delete its
Job (with its Secret and Service, owned by the Job so the garbage collector
removes them), read the Job's state and its index-0 pod's log.
:class:`KubeCluster` is the real one (kubernetes client); :class:`InMemoryCluster`
keeps the same semantics in memory for tests and benchmarks.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol


@dataclass
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass
class Condition:
    type: str
    status: str            # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_transition: float = 0.0


@dataclass
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    conditions: list[Condition] = field(default_factory=list)
    unschedulable: bool = False
    provider_id: str = ""  # aws:///us-east-2a/i-0123456789abcdef0
    resource_version: str = ""  # metadata.resourceVersion when read: the precondition of a later write

    @property
    def instance_id(self) -> str:
        return self.provider_id.rsplit("/", 1)[-1] if self.provider_id else ""

    def has_taint(self, key: str) -> bool:
        return any(t.key == key for t in self.taints)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass
class Pod:
    namespace: str
    name: str
    node: str
    labels: dict[str, str] = field(default_factory=dict)
    owner_kind: str = ""   # ReplicaSet, Job, DaemonSet, Node (mirror pod), ...

    @property
    def evictable(self) -> bool:
        """DaemonSet and static (mirror) pods are not drained, as kubectl drain does."""
        return self.owner_kind not in ("DaemonSet", "Node")


@dataclass
class Event:
    node: str
    reason: str
    message: str
    type: str = "Warning"
    at: float = 0.0


class Eviction(str, Enum):
    EVICTED = "evicted"
    BLOCKED = "blocked"   # 429: a PodDisruptionBudget does not allow it now; retry later
    GONE = "gone"         # 404: already gone


class NotFound(KeyError):
    pass


class Conflict(RuntimeError):
    """409: the object changed since it was read (resourceVersion precondition failed). Re-read and re-decide."""


@dataclass
class JobState:
    """What the controller needs of a Job: did it fail as a whole, and how is its pod of index 0."""

    failed: str | None = None   # reason of the Job's Failed=True condition (DeadlineExceeded, BackoffLimitExceeded)
    pod: str = ""               # the index-0 pod's name ("" while none exists)
    pod_phase: str = ""         # Pending | Running | Succeeded | Failed
    unscheduled: int = 0        # the Job's pods no node took (no spec.nodeName) or never created: they ran nothing


def owned_by(obj: dict, kind: str, name: str, uid: str) -> dict:
    """``obj`` with an ownerReference to the object ``uid``: deleting that owner garbage-collects ``obj``."""
    out = copy.deepcopy(obj)
    out["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": kind, "name": name, "uid": uid}]
    return out


class Cluster(Protocol):
    def get_node(self, name: str) -> Node: ...
    def list_nodes(self, selector: dict[str, str] | None = None) -> list[Node]: ...
    def patch_node(self, name: str, *, labels: dict[str, str | None] | None = None,
                   annotations: dict[str, str | None] | None = None, taints: list[Taint] | None = None,
                   unschedulable: bool | None = None, resource_version: str | None = None) -> Node:
        """Merge-patch the node; with ``resource_version`` the write applies only if the node is unchanged
        since that read, else :class:`Conflict` (optimistic concurrency)."""
    def set_condition(self, name: str, condition: Condition) -> None: ...
    def create_event(self, node: str, reason: str, message: str, type: str = "Warning") -> None: ...
    def list_pods_on_node(self, name: str) -> list[Pod]: ...
    def evict_pod(self, namespace: str, name: str) -> Eviction: ...
    def create_job(self, obj: dict) -> str:
        """Create a batch/v1 Job (an existing one of that name is taken as is); returns its uid."""
    def create_object(self, obj: dict) -> None:
        """Create a namespaced Secret or Service; one that exists already is left as is."""
    def delete_job(self, namespace: str, name: str) -> None:
        """Delete a Job with its pods and the objects it owns (background propagation); gone already is fine."""
    def job_state(self, namespace: str, name: str) -> JobState:
        """The Job's state and its index-0 pod; :class:`NotFound` when the Job is gone."""
    def pod_log(self, namespace: str, name: str) -> str: ...


# The Cluster methods that only read. Every other one writes: the controller lets it through only while it leads
# (node_agent/leader.py LeaderOnly).
READS = frozenset({"get_node", "list_nodes", "list_pods_on_node", "job_state", "pod_log"})


def _merge(target: dict[str, str], patch: dict[str, str | None] | None) -> None:
    for k, v in (patch or {}).items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = v


# ------------------------------------------------------------------------- in memory


@dataclass
class Pdb:
    namespace: str
    selector: dict[str, str]
    disruptions_allowed: int


class InMemoryCluster:
    """The boundary's semantics without an API server (tests, benchmarks, dry runs).

    Thread-safe; ``on_change`` callbacks fire after every node write so a
    benchmark can time "line appended -> node marked".
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.pods: dict[tuple[str, str], Pod] = {}
        self.pdbs: list[Pdb] = []
        self.events: list[Event] = []
        self.evictions: list[tuple[str, str]] = []
        self.objects: dict[tuple[str, str, str], dict] = {}   # (kind, namespace, name) -> object (Job, Secret, ...)
        self.job_pods: dict[tuple[str, str], JobState] = {}    # (namespace, job) -> state (set by tests)
        self.logs: dict[tuple[str, str], str] = {}              # (namespace, pod) -> log
        self._uid = 0
        self._lock = threading.Lock()
        self.on_change: list = []
        self._rv = 0

    def _bump(self, n: Node) -> None:
        self._rv += 1
        n.resource_version = str(self._rv)

    # test helpers
    def add_node(self, node: Node) -> Node:
        with self._lock:
            self.nodes[node.name] = node
            self._bump(node)
        return node

    def remove_node(self, name: str) -> None:
        with self._lock:
            self.nodes.pop(name, None)
            for key in [k for k, p in self.pods.items() if p.node == name]:
                del self.pods[key]

    def add_pod(self, pod: Pod) -> None:
        with self._lock:
            self.pods[(pod.namespace, pod.name)] = pod

    def add_pdb(self, namespace: str, selector: dict[str, str], disruptions_allowed: int) -> Pdb:
        pdb = Pdb(namespace, selector, disruptions_allowed)
        self.pdbs.append(pdb)
        return pdb

    # the boundary
    def get_node(self, name: str) -> Node:
        with self._lock:
            if name not in self.nodes:
                raise NotFound(name)
            return copy.deepcopy(self.nodes[name])

    def list_nodes(self, selector: dict[str, str] | None = None) -> list[Node]:
        with self._lock:
            return [copy.deepcopy(n) for n in self.nodes.values()
                    if all(n.labels.get(k) == v for k, v in (selector or {}).items())]

    def patch_node(self, name, *, labels=None, annotations=None, taints=None, unschedulable=None,
                   resource_version=None) -> Node:
        with self._lock:
            if name not in self.nodes:
                raise NotFound(name)
            n = self.nodes[name]
            if resource_version and resource_version != n.resource_version:
                raise Conflict(f"node {name}: resourceVersion {resource_version} is stale "
                               f"(now {n.resource_version})")
            _merge(n.labels, labels)
            _merge(n.annotations, annotations)
            if taints is not None:
                n.taints = [copy.copy(t) for t in taints]
            if unschedulable is not None:
                n.unschedulable = unschedulable
            self._bump(n)
            out = copy.deepcopy(n)
        for cb in self.on_change:
            cb(name)
        return out

    def set_condition(self, name: str, condition: Condition) -> None:
        with self._lock:
            if name not in self.nodes:
                raise NotFound(name)
            n = self.nodes[name]
            old = n.condition(condition.type)
            if old and old.status == condition.status:
                condition.last_transition = old.last_transition
            elif not condition.last_transition:
                condition.last_transition = time.time()
            n.conditions = [c for c in n.conditions if c.type != condition.type] + [condition]
            self._bump(n)
        for cb in self.on_change:
            cb(name)

    def create_event(self, node: str, reason: str, message: str, type: str = "Warning") -> None:
        with self._lock:
            self.events.append(Event(node, reason, message, type, time.time()))

    def list_pods_on_node(self, name: str) -> list[Pod]:
        with self._lock:
            return [copy.copy(p) for p in self.pods.values() if p.node == name]

    def evict_pod(self, namespace: str, name: str) -> Eviction:
        with self._lock:
            pod = self.pods.get((namespace, name))
            if pod is None:
                return Eviction.GONE
            pdbs = [b for b in self.pdbs if b.namespace == namespace
                    and all(pod.labels.get(k) == v for k, v in b.selector.items())]
            if any(b.disruptions_allowed <= 0 for b in pdbs):
                return Eviction.BLOCKED
            for b in pdbs:
                b.disruptions_allowed -= 1
            del self.pods[(namespace, name)]
            self.evictions.append((namespace, name))
            return Eviction.EVICTED

    # the two-node check's objects
    def create_job(self, obj: dict) -> str:
        with self._lock:
            key = ("Job", obj["metadata"]["namespace"], obj["metadata"]["name"])
            if key not in self.objects:
                self._uid += 1
                self.objects[key] = copy.deepcopy(obj)
                self.objects[key]["metadata"]["uid"] = f"uid-{self._uid}"
            return self.objects[key]["metadata"]["uid"]

    def create_object(self, obj: dict) -> None:
        if obj["kind"] not in ("Secret", "Service"):
            raise ValueError(f"create_object: {obj['kind']} is not a Secret or Service")
        with self._lock:
            self.objects.setdefault((obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]),
                                    copy.deepcopy(obj))

    def delete_job(self, namespace: str, name: str) -> None:
        with self._lock:
            job = self.objects.pop(("Job", namespace, name), None)
            self.job_pods.pop((namespace, name), None)
            if job is None:
                return
            uid = job["metadata"]["uid"]
            for key in [k for k, o in self.objects.items()  # the garbage collector's part
                        if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences", []))]:
                del self.objects[key]

    def job_state(self, namespace: str, name: str) -> JobState:
        with self._lock:
            if ("Job", namespace, name) not in self.objects:
                raise NotFound(f"job {namespace}/{name}")
            return copy.copy(self.job_pods.get((namespace, name), JobState()))

    def pod_log(self, namespace: str, name: str) -> str:
        with self._lock:
            if (namespace, name) not in self.logs:
                raise NotFound(f"pod {namespace}/{name}")
            return self.logs[(namespace, name)]

    # test helper: what the Job controller and the kubelet would do
    def set_job(self, namespace: str, name: str, *, pod_phase: str = "Running", log: str | None = None,
                failed: str | None = None, unscheduled: int = 0) -> None:
        with self._lock:
            pod = f"{name}-0-abcde"
            self.job_pods[(namespace, name)] = JobState(failed=failed, pod=pod, pod_phase=pod_phase,
                                                        unscheduled=unscheduled)
            if log is not None:
                self.logs[(namespace, pod)] = log


# ------------------------------------------------------------------------------ real


class KubeCluster:
    """The boundary on the official kubernetes client (in-cluster config by default)."""

    def __init__(self, api_client=None, component: str = "openpod-node-agent") -> None:
        from kubernetes import client, config

        if api_client is None:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
        from node_agent.kube_api import KubeApi

        self.client = client
        # CoreV1 / BatchV1 calls without the generated API classes (their import costs ~80 MB: kube_api.py)
        self.core = self.batch = KubeApi(api_client if api_client is not None else client.ApiClient())
        self.api_client = self.core.api_client  # shared with the leader election (node_agent/leader.py)
        self.component = component

    @staticmethod
    def _node(obj) -> Node:
        m, spec, status = obj.metadata, obj.spec, obj.status
        return Node(
            name=m.name, labels=dict(m.labels or {}), annotations=dict(m.annotations or {}),
            taints=[Taint(t.key, t.value or "", t.effect) for t in (spec.taints or [])],
            conditions=[Condition(c.type, c.status, c.reason or "", c.message or "",
                                  c.last_transition_time.timestamp() if c.last_transition_time else 0.0)
                        for c in (status.conditions or [])] if status else [],
            unschedulable=bool(spec.unschedulable), provider_id=spec.provider_id or "",
            resource_version=m.resource_version or "",
        )

    def _not_found(self, e, name):
        if getattr(e, "status", None) == 404:
            raise NotFound(name) from None
        if getattr(e, "status", None) == 409:
            raise Conflict(f"node {name}: {e.reason}") from None
        raise e

    def get_node(self, name: str) -> Node:
        try:
            return self._node(self.core.read_node(name))
        except self.client.ApiException as e:
            self._not_found(e, name)

    def list_nodes(self, selector: dict[str, str] | None = None) -> list[Node]:
        sel = ",".join(f"{k}={v}" for k, v in (selector or {}).items()) or None
        return [self._node(n) for n in self.core.list_node(label_selector=sel).items]

    def patch_node(self, name, *, labels=None, annotations=None, taints=None, unschedulable=None,
                   resource_version=None) -> Node:
        body: dict = {"metadata": {}, "spec": {}}
        if resource_version:
            # A resourceVersion in the patch body is a precondition: the API server answers 409 Conflict if the
            # node changed since (as controller-runtime's MergeFromWithOptimisticLock does; kubernetes#63104).
            body["metadata"]["resourceVersion"] = resource_version
        if labels:
            body["metadata"]["labels"] = labels          # merge patch: None deletes a key
        if annotations:
            body["metadata"]["annotations"] = annotations
        if taints is not None:
            body["spec"]["taints"] = [{"key": t.key, "value": t.value or None, "effect": t.effect} for t in taints]
        if unschedulable is not None:
            body["spec"]["unschedulable"] = unschedulable
        try:
            return self._node(self.core.patch_node(name, body))
        except self.client.ApiException as e:
            self._not_found(e, name)

    def set_condition(self, name: str, condition: Condition) -> None:
        from datetime import datetime, timezone

        now = datetime.now(timezone.utc).isoformat()
        node = self.get_node(name)
        old = node.condition(condition.type)
        transition = (datetime.fromtimestamp(old.last_transition, timezone.utc).isoformat()
                      if old and old.status == condition.status and old.last_transition else now)
        conds = [{"type": condition.type, "status": condition.status, "reason": condition.reason,
                  "message": condition.message[:1024], "lastHeartbeatTime": now, "lastTransitionTime": transition}]
        # Strategic merge on the status subresource keys conditions by type.
        self.core.patch_node_status(name, {"status": {"conditions": conds}})

    def create_event(self, node: str, reason: str, message: str, type: str = "Warning") -> None:
        from datetime import datetime, timezone

        c = self.client
        now = datetime.now(timezone.utc)
        ev = c.CoreV1Event(
            metadata=c.V1ObjectMeta(generate_name=f"{node}.", namespace="default"),
            involved_object=c.V1ObjectReference(kind="Node", name=node, uid=node, api_version="v1"),
            reason=reason, message=message[:1024], type=type, first_timestamp=now, last_timestamp=now, count=1,
            source=c.V1EventSource(component=self.component, host=node),
        )
        self.core.create_namespaced_event("default", ev)

    def list_pods_on_node(self, name: str) -> list[Pod]:
        pods = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        out = []
        for p in pods:
            if p.status and p.status.phase in ("Succeeded", "Failed"):
                continue
            owners = p.metadata.owner_references or []
            out.append(Pod(p.metadata.namespace, p.metadata.name, name, dict(p.metadata.labels or {}),
                           owners[0].kind if owners else ""))
        return out

    def evict_pod(self, namespace: str, name: str) -> Eviction:
        c = self.client
        body = c.V1Eviction(metadata=c.V1ObjectMeta(name=name, namespace=namespace))
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body)
            return Eviction.EVICTED
        except c.ApiException as e:
            if e.status == 429:
                return Eviction.BLOCKED
            if e.status == 404:
                return Eviction.GONE
            raise

    # the two-node check's objects (node_agent/pair_runner.py)
    def create_job(self, obj: dict) -> str:
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        try:
            return self.batch.create_namespaced_job(ns, obj).metadata.uid
        except self.client.ApiException as e:
            if e.status != 409:
                raise
            return self.batch.read_namespaced_job(name, ns).metadata.uid  # created by a pass that then died

    def create_object(self, obj: dict) -> None:
        create = {"Secret": self.core.create_namespaced_secret,
                  "Service": self.core.create_namespaced_service}.get(obj["kind"])
        if create is None:
            raise ValueError(f"create_object: {obj['kind']} is not a Secret or Service")
        try:
            create(obj["metadata"]["namespace"], obj)
        except self.client.ApiException as e:
            if e.status != 409:
                raise

    def delete_job(self, namespace: str, name: str) -> None:
        try:
            # Background: the garbage collector deletes its pods and the Secret / Service it owns.
            self.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
        except self.client.ApiException as e:
            if e.status != 404:
                raise

    def job_state(self, namespace: str, name: str) -> JobState:
        from openpod_core import labels as L

        try:
            job = self.batch.read_namespaced_job(name, namespace)
        except self.client.ApiException as e:
            self._not_found(e, f"job {namespace}/{name}")
        conditions = (job.status.conditions or []) if job.status else []
        failed = next((c.reason or "Failed" for c in conditions if c.type == "Failed" and c.status == "True"), None)
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"{L.JOB_NAME_LABEL}={name}").items
        # pods no node took, and pods the Job controller could not create (quota, admission)
        unscheduled = sum(1 for p in pods if not (p.spec and p.spec.node_name)) \
            + max(0, ((job.spec.parallelism or 0) if job.spec else 0) - len(pods))
        first = [p for p in pods if (p.metadata.labels or {}).get(L.JOB_COMPLETION_INDEX_LABEL) == "0"]
        if not first:
            return JobState(failed=failed, unscheduled=unscheduled)
        pod = first[0]  # backoffLimit 0: one pod per index
        return JobState(failed=failed, pod=pod.metadata.name, pod_phase=(pod.status.phase if pod.status else "") or "",
                        unscheduled=unscheduled)

    def pod_log(self, namespace: str, name: str) -> str:
        try:
            # Raw bytes: the client would otherwise try to deserialize a log that looks like JSON.
            resp = self.core.read_namespaced_pod_log(name, namespace, _preload_content=False)
        except self.client.ApiException as e:
            self._not_found(e, f"pod {namespace}/{name}")
        return resp.data.decode(errors="replace")
