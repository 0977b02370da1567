"""The controller's two-node check: a new or rebooted node is held until it all-reduces with a healthy peer.

For a group whose spec names a ``pair_check_image`` (off otherwise: the check needs an image the
platform does not build), per node, with the state in the node's ``openpod.io/pair-check`` annotation
so a restarted controller resumes:

    held      a new node (still under the startup taint) or a rebooted one that passed its deep
              check gets the ``openpod.io/pair-check=pending:NoSchedule`` taint; nothing of the
              teams' lands on it
    running   once its single-node deep check passed (startup taint off, Schedulable, no fault):
              the Job of node_agent/pair_check.py runs on it and on an idle healthy peer of its group
              (a hot spare first, else a node without workload pods); one check per group at a time
    passed    busbw at or above the floor: taint off, the node takes work
    failed    below the floor, wrong results, unparsable output, the Job failed or timed out: the
              taint stays (value ``failed``), condition ``PairCheckFailed``, Event, metric. Not replaced
              automatically: the floor is an estimate and the peer may be the bad half. An operator
              removes the annotation to run it again, or the taint to put the node in service.
    (retry)   a check that did not run - a pod of its Job no node took (the peer got busy), or its Job
              deleted - goes back to held, with a ``PairCheckRetry`` Event

A group of one node has no peer: its node is released with a ``PairCheckSkipped`` Event. While no
peer is idle the node stays held (``PairCheckWaiting`` Event once). Each step of each node runs in
the controller's per-node isolation (an error is an Event and a metric, retried with backoff).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass

from openpod_core import instance_types
from openpod_core import labels as L
from node_agent import pair_check as pc
from node_agent.kube import Condition, Node, NotFound, owned_by
from node_agent.marking import FAULT, REMEDIATION, current_action, with_taint, without_taint
from node_agent.findings import Action

log = logging.getLogger("node_agent.pair_runner")

PAIR_CHECK = f"{L.DOMAIN}/pair-check"     # annotation: JSON PairState
FAILED_CONDITION = "PairCheckFailed"
PENDING, FAILED_TAINT_VALUE = "pending", "failed"
GRACE_SECONDS = 300.0  # past the Job's activeDeadlineSeconds, the controller gives up on its own


@dataclass
class PairState:
    phase: str                      # held | running | passed | failed
    since: float                    # when this phase began
    why: str = ""                   # held: "new node" | "rebooted"
    job: str = ""
    peer: str = ""
    created: bool = False           # the Job and its Secret / Service exist
    result: str = ""                # passed / failed: what was measured or went wrong

    @classmethod
    def of(cls, node: Node) -> PairState | None:
        """The node's state; an annotation that does not parse (a hand edit) reads as held: checked again."""
        raw = node.annotations.get(PAIR_CHECK)
        if not raw:
            return None
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError):
            log.warning("node %s: unreadable %s annotation %r; checking it again", node.name, PAIR_CHECK, raw[:200])
            return cls("held", 0.0, why="unreadable annotation")

    def dump(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def held(why: str, now: float) -> str:
    """The annotation value that holds a node for the check."""
    return PairState("held", now, why=why).dump()


def hold(taints: list, why: str, now: float) -> tuple[list, dict]:
    """The taints and annotations that hold a node for the check (``openpod.io/pair-check=pending``, state held):
    ``taints`` being the node's taints as they are to be written otherwise."""
    return (with_taint(without_taint(taints, L.PAIR_CHECK_TAINT), L.PAIR_CHECK_TAINT, PENDING),
            {PAIR_CHECK: held(why, now)})


def job_name(node: str, since: float) -> str:
    """A DNS label (the pods' subdomain) unique per node and attempt: node names are too long to embed."""
    return "pair-" + hashlib.sha256(f"{node}/{since}".encode()).hexdigest()[:12]


class PairChecks:
    """Drives the check for the controller (node_agent/controller.py): ``reconcile(group, members)`` per pass."""

    def __init__(self, controller) -> None:
        self.ctl = controller
        self._waiting_told: set[str] = set()
        self._running: dict[str, str | None] = {}   # group -> the node whose check runs
        self._listed: list[Node] | None = None      # this pass: the group's nodes, listed at the first peer search
        self._idle: dict[str, bool] = {}            # this pass: node -> no workload pods on it

    # ----------------------------------------------------------------- settings
    def image(self, group: str) -> str | None:
        g = self.ctl.config.groups.get(group)
        return g.pair_check_image if g is not None else None

    def itype(self, group: str, node: Node) -> instance_types.InstanceType:
        g = self.ctl.config.groups.get(group)
        return instance_types.get((g.instance_type if g is not None else None)
                                  or node.labels.get(L.INSTANCE_TYPE, ""))

    def enabled(self, group: str) -> bool:
        return bool(self.image(group))

    # ---------------------------------------------------------------- reconcile
    def reconcile(self, group: str, members: list[Node]) -> None:
        self._listed, self._idle = None, {}  # a new pass: peers are looked up again, once
        enabled = self.enabled(group)
        if enabled:
            for n in members:
                if self._is_new(n):
                    self.ctl._isolated(n, group, lambda fresh: self._hold_new(fresh, group), reread=True)
        states = {n.name: PairState.of(n) for n in members}
        # The group's one check slot, as listed at the start of the pass and kept up to date by this pass's steps.
        self._running[group] = next((n for n, st in states.items() if st is not None and st.phase == "running"),
                                    None)
        self.ctl.metrics.pair_held.labels(group).set(
            sum(1 for s in states.values() if s is not None and s.phase in ("held", "running")))
        # Running checks first (they may finish and free the group's slot), then the oldest held node.
        for n in sorted(members, key=lambda n: (states[n.name] is None or states[n.name].phase != "running",
                                                states[n.name].since if states[n.name] else 0.0)):
            s = states[n.name]
            if s is None or s.phase not in ("held", "running"):
                continue
            if not enabled and s.phase == "held":
                # turned off in the spec: nothing to wait for
                self.ctl._isolated(n, group, lambda fresh: self._release(fresh, group, "the group's pair check is "
                                                                         "turned off", "PairCheckSkipped"),
                                   reread=True)
                continue
            self.ctl._isolated(n, group, lambda fresh: self._step(fresh, group, members), reread=True)

    @staticmethod
    def _is_new(n: Node) -> bool:
        """Under the startup taint and never held; or held by our taint with the annotation removed (an
        operator asking for the check again)."""
        return PAIR_CHECK not in n.annotations and REMEDIATION not in n.annotations \
            and (n.has_taint(L.STARTUP_TAINT) or n.has_taint(L.PAIR_CHECK_TAINT))


    # -------------------------------------------------------------------- steps
    def _hold_new(self, node: Node, group: str) -> None:
        if not self._is_new(node):
            return  # stale read
        now = self.ctl.clock()
        why = "new node" if node.has_taint(L.STARTUP_TAINT) else "check requested again"
        taints, annotations = hold(node.taints, why, now)
        self.ctl.cluster.patch_node(node.name, annotations=annotations, taints=taints,
                                    resource_version=node.resource_version)
        self.ctl.cluster.create_event(node.name, "PairCheckHeld", f"{why}: held out of service until its deep "
                                      "check and a two-node all-reduce with a healthy peer pass", "Normal")

    def _step(self, node: Node, group: str, members: list[Node]) -> None:
        s = PairState.of(node)
        if s is None:
            return
        if s.phase == "held":
            self._maybe_start(node, s, group, members)
        elif s.phase == "running":
            self._watch(node, s, group)

    def _ready(self, node: Node) -> bool:
        """The single-node deep check passed and nothing else is pending on the node."""
        return not node.has_taint(L.STARTUP_TAINT) and node.labels.get(L.HEALTH_STATUS) == L.HEALTH_SCHEDULABLE \
            and FAULT not in node.annotations and REMEDIATION not in node.annotations

    def _peer(self, node: Node, group: str) -> tuple[Node | None, int]:
        """An idle healthy node of the group (a hot spare first, else one without workload pods); and how many
        healthy nodes there are at all. A group with no healthy node (all its nodes joined at once) pairs two
        held nodes that passed their deep check: once one passes, the others have a healthy peer."""
        healthy, held = [], []
        # Listed once per pass, when first needed (after this pass's running checks freed their peers): every held
        # node of the pass searches the same list, and a node's pods are listed at most once. Within a pass only
        # one check can start per group, so a later search never needs a fresher view.
        if self._listed is None:
            self._listed = self.ctl.cluster.list_nodes({L.INSTANCE_GROUP: group})
        for n in self._listed:
            s = PairState.of(n)
            if n.name == node.name:
                continue
            if s is not None and s.phase == "held" and self._ready(n):
                held.append(n)
            if n.unschedulable or n.has_taint(L.STARTUP_TAINT) \
                    or n.has_taint(L.UNHEALTHY_TAINT) or n.has_taint(L.PAIR_CHECK_TAINT) \
                    or FAULT in n.annotations or REMEDIATION in n.annotations \
                    or current_action(n.labels) is not Action.NONE \
                    or (s is not None and s.phase in ("held", "running", "failed")):
                continue
            healthy.append(n)
        for n in sorted(healthy, key=lambda n: (n.labels.get(L.HOT_SPARE) != "true", n.name)):
            if n.labels.get(L.HOT_SPARE) == "true" or self._is_idle(n):
                return n, len(healthy)
        if not healthy and held:
            return min(held, key=lambda n: n.name), 0
        return None, len(healthy)

    def _is_idle(self, n: Node) -> bool:
        """No workload pods on ``n`` (its pods listed once per pass)."""
        if n.name not in self._idle:
            self._idle[n.name] = not any(p.evictable for p in self.ctl.cluster.list_pods_on_node(n.name))
        return self._idle[n.name]

    def _maybe_start(self, node: Node, s: PairState, group: str, members: list[Node]) -> None:
        if not self._ready(node) or self._running.get(group) not in (None, node.name):
            return
        peer, healthy = self._peer(node, group)
        if peer is None:
            if len(members) <= 1:
                return self._release(node, group, f"group {group} has no other node to pair with",
                                     "PairCheckSkipped")
            if node.name not in self._waiting_told:
                self._waiting_told.add(node.name)
                self.ctl.cluster.create_event(node.name, "PairCheckWaiting",
                                              f"no idle healthy peer in group {group} ({healthy} healthy, all "
                                              "running work); held until one is free")
            return
        now = self.ctl.clock()
        run = PairState("running", now, job=job_name(node.name, now), peer=peer.name)
        # Intent first: a restarted controller finds the Job by this name instead of starting a second one.
        node = self.ctl.cluster.patch_node(node.name, annotations={PAIR_CHECK: run.dump()},
                                           resource_version=node.resource_version)
        self._running[group] = node.name
        self._waiting_told.discard(node.name)
        self._create(node, run, group)
        self.ctl.cluster.create_event(node.name, "PairCheckStarted",
                                      f"two-node all-reduce with {peer.name} (Job {pc.NAMESPACE}/{run.job}, "
                                      f"timeout {self.ctl.config.pair_check_timeout_seconds:.0f}s)", "Normal")

    def _create(self, node: Node, s: PairState, group: str) -> None:
        objs = pc.job(s.job, self.itype(group, node), (node.name, s.peer), self.image(group),
                      timeout_seconds=int(self.ctl.config.pair_check_timeout_seconds))
        job = next(o for o in objs if o["kind"] == "Job")
        uid = self.ctl.cluster.create_job(job)
        for o in objs:
            if o["kind"] != "Job":  # owned by the Job: the garbage collector removes them with it
                self.ctl.cluster.create_object(owned_by(o, "Job", s.job, uid))
        s.created = True
        self.ctl.cluster.patch_node(node.name, annotations={PAIR_CHECK: s.dump()},
                                    resource_version=node.resource_version)

    def _watch(self, node: Node, s: PairState, group: str) -> None:
        now = self.ctl.clock()
        timeout = self.ctl.config.pair_check_timeout_seconds
        if not s.created:
            return self._create(node, s, group)
        try:
            st = self.ctl.cluster.job_state(pc.NAMESPACE, s.job)
        except NotFound:
            # deleted by someone else: run it again
            return self._retry(node, s, group, "JobDeleted", f"Job {s.job} disappeared")
        outcome = None
        if st.pod_phase in ("Succeeded", "Failed") and st.pod:
            output = self.ctl.cluster.pod_log(pc.NAMESPACE, st.pod)
            try:
                r = pc.decide(output, self.itype(group, node))
            except ValueError as e:
                outcome = ("NoResult", f"{st.pod} ({st.pod_phase}): {e}")
            else:
                if r.passed:
                    return self._pass(node, s, group,
                                      f"busbw {r.busbw_gbs:.1f} GB/s >= floor {r.floor_gbs:.1f} GB/s")
                why = "; ".join(f.evidence for f in r.findings) or f"busbw {r.busbw_gbs:.1f} GB/s"
                return self._fail(node, s, group, "BelowFloor", why)
        elif st.failed == "DeadlineExceeded" or now - s.since > timeout + GRACE_SECONDS:
            outcome = ("TimedOut", f"no result {now - s.since:.0f}s after the start (timeout {timeout:.0f}s); "
                                   f"pod of index 0: {st.pod_phase or 'never created'}")
        elif st.failed:
            outcome = ("JobFailed", f"Job {s.job} failed ({st.failed})")
        if outcome is None:
            return  # still running
        if st.unscheduled:
            # A pod no node took (the peer got busy, say) ran nothing: that says nothing about this node.
            return self._retry(node, s, group, "NotScheduled",
                               f"{outcome[0]} with {st.unscheduled} pod(s) of Job {s.job} never scheduled "
                               f"(peer {s.peer} busy?)")
        return self._fail(node, s, group, *outcome)

    # ----------------------------------------------------------------- outcomes
    def _retry(self, node: Node, s: PairState, group: str, reason: str, message: str) -> None:
        """The check did not run: back to held, to start again (with whichever peer is idle then)."""
        self.ctl.cluster.delete_job(pc.NAMESPACE, s.job)
        self.ctl.cluster.patch_node(node.name, annotations={PAIR_CHECK: held(f"retry: {reason}", self.ctl.clock())},
                                    resource_version=node.resource_version)
        self._running[group] = None
        self.ctl.metrics.pair_checks.labels(group, reason).inc()
        self.ctl.cluster.create_event(node.name, "PairCheckRetry", f"{message}; held, and checked again")

    def _pass(self, node: Node, s: PairState, group: str, result: str) -> None:
        self.ctl.cluster.delete_job(pc.NAMESPACE, s.job)  # frees the peer's devices now
        done = PairState("passed", self.ctl.clock(), job=s.job, peer=s.peer, created=s.created, result=result)
        self.ctl.cluster.patch_node(node.name, annotations={PAIR_CHECK: done.dump()},
                                    taints=without_taint(node.taints, L.PAIR_CHECK_TAINT),
                                    resource_version=node.resource_version)
        self._running[group] = None
        self.ctl.metrics.pair_checks.labels(group, "passed").inc()
        old = node.condition(FAILED_CONDITION)
        if old is not None and old.status == "True":
            self.ctl.cluster.set_condition(node.name, Condition(FAILED_CONDITION, "False", "Passed", result))
        self.ctl.cluster.create_event(node.name, "PairCheckPassed", f"with {s.peer}: {result}; in service", "Normal")

    def _fail(self, node: Node, s: PairState, group: str, reason: str, message: str) -> None:
        self.ctl.cluster.delete_job(pc.NAMESPACE, s.job)
        done = PairState("failed", self.ctl.clock(), job=s.job, peer=s.peer, created=s.created,
                         result=f"{reason}: {message}")
        taints = with_taint(without_taint(node.taints, L.PAIR_CHECK_TAINT), L.PAIR_CHECK_TAINT, FAILED_TAINT_VALUE)
        self.ctl.cluster.patch_node(node.name, annotations={PAIR_CHECK: done.dump()}, taints=taints,
                                    resource_version=node.resource_version)
        self._running[group] = None
        self.ctl.metrics.pair_checks.labels(group, reason).inc()
        self.ctl.cluster.set_condition(node.name, Condition(FAILED_CONDITION, "True", reason,
                                                            f"with {s.peer}: {message}"))
        self.ctl.cluster.create_event(node.name, "PairCheckFailed",
                                      f"two-node all-reduce with {s.peer}: {reason}: {message}. The node stays out "
                                      f"of service ({L.PAIR_CHECK_TAINT}={FAILED_TAINT_VALUE}); remove the "
                                      f"{PAIR_CHECK} annotation to check again, or the taint to use it anyway")

    def _release(self, node: Node, group: str, why: str, reason: str) -> None:
        now = self.ctl.clock()
        done = PairState("passed", now, result=f"skipped: {why}")
        self.ctl.cluster.patch_node(node.name, annotations={PAIR_CHECK: done.dump()},
                                    taints=without_taint(node.taints, L.PAIR_CHECK_TAINT),
                                    resource_version=node.resource_version)
        self.ctl.metrics.pair_checks.labels(group, "skipped").inc()
        self.ctl.cluster.create_event(node.name, reason, f"{why}: released without the two-node check")
