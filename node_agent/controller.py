"""The remediation controller (one Deployment): heal nodes the detector marked.

Per node, a small state machine whose state is the node's ``openpod.io/remediation``
annotation, so a restarted controller resumes where the last one stopped:

    (marked by detector)
      -> draining        cordon; evict pods (PDBs honoured, 429 = retry); until no pods or the deadline
      -> rebooting       reboot history recorded; EC2 RebootInstances
      -> awaiting-health startup taint back on; the node's deep check decides:
                         pass -> uncordon, done (held by the pair-check taint first where the group
                         has a two-node check: node_agent/pair_runner.py); fail -> replace
      -> replacing       hot spare promoted (if the group has one ready); Auto Scaling
                         SetInstanceHealth Unhealthy; done when the node object goes away

A reboot for the same fault within the escalation window becomes a
replacement. Starting a remediation takes a slot of the group's budget (at most
N nodes and X% of the group in flight): over budget the controller alerts
(Event + metric) and waits, so a storm of false positives cannot drain a group.
New nodes (still under the startup taint) refill each group's hot-spare pool, and,
where the group has a two-node check, are held until it passes (node_agent/pair_runner.py).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass

from openpod_core import labels as L
from node_agent.cloud import READS as CLOUD_READS, Cloud, InstanceGone
from node_agent.config import ControllerConfig
from node_agent.deep_check import DCGM_LEVEL_SECONDS
from node_agent.findings import Action
from node_agent.drain import evict_pods
from node_agent.kube import READS as CLUSTER_READS, Cluster, Condition, Conflict, Node, NotFound
from node_agent.leader import LeaderOnly, NotLeader
from node_agent.marking import FAULT, REBOOTS, REMEDIATION, current_action, with_taint, without_taint
from node_agent.metrics import ControllerMetrics
from node_agent.pair_runner import PairChecks, hold
from node_agent.topology import label_ultraservers

log = logging.getLogger("node_agent.controller")

AWAIT_HEALTH_SECONDS = 1800.0     # at least this long for a rebooted node to prove health, else it is replaced
BOOT_SECONDS = 900.0              # reboot + kubelet + agent start, before the deep check begins
OTHER_STEPS_SECONDS = 900.0       # the deep check's NCCL / EFA / Neuron steps (their timeout)


def await_health_seconds(dcgm_level: int) -> float:
    """The post-reboot wait: boot, then the deep check at its configured DCGM level (level 4 runs for hours)."""
    return max(AWAIT_HEALTH_SECONDS, BOOT_SECONDS + DCGM_LEVEL_SECONDS[dcgm_level] + OTHER_STEPS_SECONDS)
RESEND_SECONDS = 900.0            # SetInstanceHealth is re-sent if the node is still there after this
CONFLICT_RETRIES = 5              # re-read-and-decide attempts of one node step on 409 Conflict
FAILED = "failed"                 # terminal phase: nothing more the controller can do (see _fail)
FAILED_CONDITION = "RemediationFailed"


@dataclass
class Remediation:
    action: str                 # reboot | replace
    fault: str
    phase: str                  # draining | rebooting | awaiting-health | replacing
    started: float
    drain_deadline: float
    escalated: bool = False
    spare: str | None = None    # the hot spare promoted for this node
    sent: bool = False          # the cloud call of the current phase was made
    phase_since: float = 0.0
    detected: float | None = None   # when the detector recorded the fault (the duration histogram's start)
    failure: str | None = None      # phase failed: why

    @classmethod
    def of(cls, node: Node) -> Remediation | None:
        raw = node.annotations.get(REMEDIATION)
        return cls(**json.loads(raw)) if raw else None

    def dump(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def fault_class(fault: str) -> str:
    """Escalation counts faults by class, not by exact name: an Xid 79 reboot then an Xid 95 is the same GPU."""
    if "nvlink" in fault or fault.startswith("nvswitch"):
        return "nvlink"
    head = fault.split("-", 1)[0]
    return head if head in ("gpu", "efa", "neuron") else "host"


def group_of(node: Node) -> str:
    return node.labels.get(L.INSTANCE_GROUP, "default")


def is_spare(node: Node) -> bool:
    return node.labels.get(L.HOT_SPARE) == "true"


class Controller:
    def __init__(self, cluster: Cluster, cloud: Cloud, config: ControllerConfig | None = None,
                 metrics: ControllerMetrics | None = None, clock=time.time, elector=None) -> None:
        self.cluster, self.cloud = cluster, cloud
        self.elector = elector  # a LeaseElector (node_agent/leader.py); None: act unconditionally (one replica)
        self.config = config or ControllerConfig()
        self.metrics = metrics or ControllerMetrics()
        self.metrics.known_groups(self.config.groups)  # counters at 0 from the start: increase() sees the first
        self.clock = clock
        self.rng = random.Random()
        self._alerted: set[str] = set()
        self._failures: dict[str, int] = {}      # node -> consecutive failed steps
        self._retry_at: dict[str, float] = {}    # node -> not before (backoff)
        # The nodes in the replacing phase at the last pass (read from the nodes each pass, so a restarted
        # controller knows them too): one of them gone from the API is a replacement done.
        self._replacing: dict[str, tuple[str, Remediation]] = {}
        self.pairs = PairChecks(self)

    # ----------------------------------------------------------------- budget
    def budget(self, group_size: int) -> int:
        pct = math.floor(group_size * self.config.budget_max_percent / 100.0)
        return max(1, min(self.config.budget_max_nodes, pct))

    def dcgm_level(self, group: str) -> int:
        """The DCGM level the group's deep check runs at (the spec's per-group level, else the default)."""
        g = self.config.groups.get(group)
        return g.dcgm_level if g is not None and g.dcgm_level is not None else self.config.dcgm_level

    # -------------------------------------------------------------- reconcile
    def reconcile_once(self) -> None:
        nodes = self.cluster.list_nodes()
        self._label_ultraservers(nodes)
        self._replacements_done(nodes)
        groups: dict[str, list[Node]] = {}
        for n in nodes:
            groups.setdefault(group_of(n), []).append(n)
        for group, members in sorted(groups.items()):
            self._reconcile_group(group, members)

    def _label_ultraservers(self, nodes: list[Node]) -> None:
        """UltraServer domain labels from EC2 (node_agent/topology.py); a failure never blocks remediation."""
        if not hasattr(self.cloud, "instance_topology"):
            return
        try:
            label_ultraservers(self.cluster, self.cloud, nodes)
        except NotLeader:
            raise
        except Exception:  # noqa: BLE001 (EC2/API hiccups: the next pass retries)
            log.exception("UltraServer labels: pass failed; retrying next pass")

    def _reconcile_group(self, group: str, members: list[Node]) -> None:
        now = self.clock()
        active = [n for n in members if REMEDIATION in n.annotations]
        failed = [n for n in active if Remediation.of(n).phase == FAILED]
        active = [n for n in active if n not in failed]  # a terminal node holds no slot
        self.metrics.failed_nodes.labels(group).set(len(failed))
        for n in active:
            self._isolated(n, group, lambda fresh: self._advance(fresh, Remediation.of(fresh), group))
        waiting = sorted((n for n in members if REMEDIATION not in n.annotations
                          and current_action(n.labels) is not Action.NONE and FAULT in n.annotations),
                         # replace-class first when the budget is tight (a broken node holds no work), then oldest
                         key=lambda n: (-current_action(n.labels).rank, json.loads(n.annotations[FAULT]).get("at", 0)))
        in_flight = len(active)
        limit = self.budget(len(members))
        blocked = 0
        for n in waiting:
            if in_flight >= limit:
                blocked += 1
                if n.name not in self._alerted:
                    self._alerted.add(n.name)
                    self.cluster.create_event(
                        n.name, "RemediationBudgetExhausted",
                        f"group {group}: {in_flight} of {limit} remediations in flight "
                        f"(budget: {self.config.budget_max_nodes} nodes / {self.config.budget_max_percent}%); waiting")
                continue
            self._isolated(n, group, lambda fresh: self._start(fresh, group, now))
            in_flight += 1  # a start that failed half-way still holds its slot until its node is resolved
            # No need to wait a poll to start draining.
            self._isolated(n, group, lambda fresh: self._advance(fresh, Remediation.of(fresh), group), reread=True)
        self.metrics.in_flight.labels(group).set(in_flight)
        self.metrics.budget_blocked.labels(group).set(blocked)
        self.pairs.reconcile(group, members)
        self._refill_spares(group, members)

    def _backoff(self, failures: int) -> float:
        """Capped exponential backoff with jitter: base x 2^(n-1), at most the cap, times a uniform [0.5, 1)."""
        d = min(self.config.retry_max_seconds, self.config.retry_base_seconds * 2 ** min(failures - 1, 30))
        return d * (0.5 + 0.5 * self.rng.random())

    def _isolated(self, node: Node, group: str, step, reread: bool = False) -> None:
        """One node's step never stops the others: an error is an Event and a metric, retried with backoff.

        Every node write carries the resourceVersion of the read it was decided on; a 409 Conflict (someone -
        the detector, another controller - wrote in between) re-reads the node and decides again, so another
        writer's state is never overwritten.
        """
        now = self.clock()
        if now < self._retry_at.get(node.name, 0.0):
            return  # backing off after a failure
        try:
            for attempt in range(CONFLICT_RETRIES):
                if reread or attempt:
                    node = self.cluster.get_node(node.name)
                try:
                    step(node)
                    break
                except Conflict:
                    self.metrics.conflicts.labels(group).inc()
            else:
                raise Conflict(f"node {node.name} kept changing under {CONFLICT_RETRIES} attempts")
            self._failures.pop(node.name, None)
            self._retry_at.pop(node.name, None)
        except NotFound:
            pass  # replaced and gone
        except NotLeader:
            raise  # stop the whole pass: another replica acts now
        except Exception as e:  # noqa: BLE001 (cloud/API errors of one node must not block the group)
            k = self._failures[node.name] = self._failures.get(node.name, 0) + 1
            delay = self._backoff(k)
            self._retry_at[node.name] = now + delay
            self.metrics.errors.labels(group).inc()
            log.warning("node %s: %s: %s (failure %d, next attempt in %.0fs)", node.name, type(e).__name__, e, k,
                        delay)
            try:
                self.cluster.create_event(node.name, "RemediationError",
                                          f"{type(e).__name__}: {e}; failure {k} in a row, "
                                          f"next attempt in {delay:.0f}s")
            except Exception:  # noqa: BLE001
                pass

    # ------------------------------------------------------------------ steps
    def _start(self, node: Node, group: str, now: float) -> None:
        if REMEDIATION in node.annotations or FAULT not in node.annotations \
                or current_action(node.labels) is Action.NONE:
            return  # decided on a stale read: someone else started it, or the fault is gone
        fault = json.loads(node.annotations[FAULT])
        action = current_action(node.labels)
        escalated, why = False, ""
        if action is Action.REBOOT:
            window = now - self.config.escalation_window_seconds
            history = json.loads(node.annotations.get(REBOOTS, "[]"))
            recent = [h for h in history if h["at"] >= now - self.config.reboot_cap_window_seconds]
            if len(recent) >= self.config.reboot_cap:
                action, escalated = Action.REPLACE, True
                why = (f"{fault['fault']}: {len(recent)} reboots within {self.config.reboot_cap_window_seconds:.0f}s "
                       f"(cap {self.config.reboot_cap}): replacing instead")
            elif any(fault_class(h["fault"]) == fault_class(fault["fault"]) and h["at"] >= window for h in history):
                action, escalated = Action.REPLACE, True
                why = (f"{fault['fault']} ({fault_class(fault['fault'])} class) again within "
                       f"{self.config.escalation_window_seconds:.0f}s of a reboot for that class: replacing instead")
        r = Remediation(action=action.value, fault=fault["fault"], phase="draining", started=now,
                        drain_deadline=now + self.config.drain_timeout_seconds, escalated=escalated, phase_since=now,
                        detected=fault.get("at", now))
        labels = {L.HEALTH_STATUS: L.HEALTH_PENDING_REPLACEMENT} if escalated else None
        self.cluster.patch_node(node.name, annotations={REMEDIATION: r.dump()}, labels=labels, unschedulable=True,
                                resource_version=node.resource_version)
        # Events and metrics only once the write went through (a 409 decides again, without a duplicate Event).
        if escalated:
            self.metrics.escalations.labels(group).inc()
            self.cluster.create_event(node.name, "RemediationEscalated", why)
        self._alerted.discard(node.name)
        old = node.condition(FAILED_CONDITION)
        if old is not None and old.status == "True":  # an operator cleared a terminal state: trying again
            self.cluster.set_condition(node.name, Condition(FAILED_CONDITION, "False", "Retrying",
                                                            f"remediation of {fault['fault']} started again"))
        self.cluster.create_event(node.name, "RemediationStarted",
                                  f"{fault['fault']}: cordoned, draining "
                                  f"(deadline {self.config.drain_timeout_seconds:.0f}s), then {action.value}", "Normal")

    def _save(self, node: Node, r: Remediation, *, annotations_extra: dict | None = None, **extra) -> Node:
        """Write the remediation state, only onto the node as read (resourceVersion); returns the node written."""
        return self.cluster.patch_node(node.name, annotations={REMEDIATION: r.dump(), **(annotations_extra or {})},
                                       resource_version=node.resource_version, **extra)

    def _advance(self, node: Node, r: Remediation | None, group: str) -> None:
        if r is None or r.phase == FAILED:
            return  # finished by someone else since the list, or terminal
        now = self.clock()
        if r.action == "reboot" and r.phase in ("draining", "rebooting") \
                and current_action(node.labels) is Action.REPLACE:
            # A replace-class fault arrived while the reboot was pending: no point rebooting first.
            r.action, r.escalated = "replace", True
            if r.phase == "rebooting":
                r.phase, r.phase_since, r.sent = "replacing", now, False
            node = self._save(node, r)
            self.metrics.escalations.labels(group).inc()
            self.cluster.create_event(node.name, "RemediationEscalated",
                                      f"{r.fault}: a replace-class fault arrived while the reboot was pending; "
                                      "replacing instead")
        if r.phase == "draining":
            if not self._drain(node, r, group, now):
                return
            r.phase, r.phase_since, r.sent = ("rebooting" if r.action == "reboot" else "replacing"), now, False
            if r.action == "reboot":
                history = json.loads(node.annotations.get(REBOOTS, "[]"))
                history = (history + [{"fault": r.fault, "at": now}])[-10:]
                node = self._save(node, r, annotations_extra={REBOOTS: json.dumps(history)})
            else:
                node = self._save(node, r)
        if r.phase == "rebooting":
            self._reboot(node, r, group, now)
        elif r.phase == "awaiting-health":
            self._await_health(node, r, group, now)
        elif r.phase == "replacing":
            self._replace(node, r, group, now)

    def _drain(self, node: Node, r: Remediation, group: str, now: float) -> bool:
        """Evict what can be evicted; True when the node is empty or the deadline passed."""
        remaining = evict_pods(self.cluster, node.name)
        if not remaining:
            return True
        if now >= r.drain_deadline:
            self.metrics.drain_timeouts.labels(group).inc()
            self.cluster.create_event(node.name, "DrainDeadlineExceeded",
                                      f"{len(remaining)} pods still blocked by PodDisruptionBudgets after "
                                      f"{self.config.drain_timeout_seconds:.0f}s ({', '.join(remaining[:5])}); "
                                      f"proceeding with {r.action}")
            return True
        return False

    def _reboot(self, node: Node, r: Remediation, group: str, now: float) -> None:
        if not node.instance_id:
            return self._fail(node, r, group, now, "NoProviderID", "the node has no EC2 provider ID; cannot reboot")
        try:
            self.cloud.reboot(node.instance_id)  # at-least-once: re-sent if we crash before saving below
        except InstanceGone as e:
            return self._fail(node, r, group, now, "InstanceNotFound", f"cannot reboot: {e}")
        self.metrics.remediations.labels(group, "reboot").inc()
        r.phase, r.phase_since, r.sent = "awaiting-health", now, True
        # The startup taint makes the node's agent run the deep check once it is back.
        self._save(node, r, taints=with_taint(node.taints, L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE),
                   annotations_extra={FAULT: None})
        self.cluster.create_event(node.name, "NodeRebooted", f"{r.fault}: EC2 RebootInstances {node.instance_id}",
                                  "Normal")

    def _await_health(self, node: Node, r: Remediation, group: str, now: float) -> None:
        status = node.labels.get(L.HEALTH_STATUS)
        recurred = FAULT in node.annotations  # the reboot cleared it: a fault recorded since is a recurrence
        level = self.dcgm_level(group)
        wait = await_health_seconds(level)
        if recurred or status == L.HEALTH_PENDING_REPLACEMENT or now - r.phase_since > wait:
            why = (f"{json.loads(node.annotations[FAULT]).get('fault')} recurred during the post-reboot check"
                   if recurred else "deep check failed after reboot" if status == L.HEALTH_PENDING_REPLACEMENT
                   else f"not healthy {wait:.0f}s after reboot (DCGM level {level})")
            r.action, r.phase, r.phase_since, r.sent = "replace", "replacing", now, False
            node = self._save(node, r, labels={L.HEALTH_STATUS: L.HEALTH_PENDING_REPLACEMENT})
            self.metrics.escalations.labels(group).inc()
            self.cluster.create_event(node.name, "RemediationEscalated", f"{r.fault}: {why}; replacing")
            self._replace(node, r, group, now)
            return
        if status == L.HEALTH_SCHEDULABLE and not node.has_taint(L.STARTUP_TAINT):
            self._observe(group, r, "recovered", now)
            taints = without_taint(node.taints, L.UNHEALTHY_TAINT)
            annotations = {REMEDIATION: None, FAULT: None}
            pair = self.pairs.enabled(group)
            if pair:  # uncordoned, but held by the pair-check taint until the two-node check passes
                taints, held = hold(taints, "rebooted", now)
                annotations.update(held)
            self.cluster.patch_node(node.name, annotations=annotations, unschedulable=False, taints=taints,
                                    resource_version=node.resource_version)
            self.cluster.create_event(node.name, "Remediated", f"{r.fault}: rebooted and passed the deep check"
                                      + ("; held until the two-node check passes" if pair else ""), "Normal")

    def _replace(self, node: Node, r: Remediation, group: str, now: float) -> None:
        if r.spare is None:
            spare = self._ready_spare(group, exclude=node.name)
            if spare is not None:
                r.spare = spare.name
                node = self._save(node, r)  # intent first: a restart promotes the same spare, not a second one
        if r.spare:
            self._promote(r.spare, group, node.name)
        if r.sent and now - r.phase_since < RESEND_SECONDS:
            return
        if not node.instance_id:
            return self._fail(node, r, group, now, "NoProviderID", "the node has no EC2 provider ID; cannot replace")
        try:
            self.cloud.mark_unhealthy(node.instance_id)  # idempotent in Auto Scaling
        except InstanceGone as e:
            return self._fail(node, r, group, now, "InstanceNotFound", f"cannot replace: {e}")
        if not r.sent:
            self.metrics.remediations.labels(group, "replace").inc()
            self.cluster.create_event(node.name, "NodeReplacing",
                                      f"{r.fault}: Auto Scaling SetInstanceHealth Unhealthy {node.instance_id}"
                                      + (f"; hot spare {r.spare} took its place" if r.spare else ""), "Normal")
        r.sent, r.phase_since = True, now
        self._save(node, r)

    # ------------------------------------------------------------ outcomes
    def _observe(self, group: str, r: Remediation, outcome: str, now: float) -> None:
        """openpod_remediation_duration_seconds: fault detected -> back in service / replaced / given up."""
        start = r.detected if r.detected is not None else r.started
        self.metrics.duration.labels(group, r.action, outcome).observe(max(0.0, now - start))

    def _replacements_done(self, nodes: list[Node]) -> None:
        """A node being replaced at the last pass is gone from the API: Auto Scaling terminated it, the replacement
        is done. Then the nodes being replaced now, for the next pass."""
        now, present = self.clock(), {n.name for n in nodes}
        for name, (group, r) in self._replacing.items():
            if name not in present:
                self._observe(group, r, "replaced", now)
        self._replacing = {n.name: (group_of(n), r) for n in nodes
                           if (r := Remediation.of(n)) is not None and r.phase == "replacing"}

    def _fail(self, node: Node, r: Remediation, group: str, now: float, reason: str, message: str) -> None:
        """Terminal: nothing the controller can do (no instance, or no group to replace it). The node stays
        cordoned, frees its budget slot and is not retried; condition, Event and metric say why. An operator
        deletes the node, or removes the openpod.io/remediation annotation to have it tried again."""
        r.phase, r.phase_since, r.failure = FAILED, now, message
        node = self._save(node, r)
        self._replacing.pop(node.name, None)  # observed as failed: not as replaced too, if it goes before the next pass
        self.metrics.failed.labels(group, reason).inc()
        self._observe(group, r, "failed", now)
        self.cluster.set_condition(node.name, Condition(FAILED_CONDITION, "True", reason, f"{r.fault}: {message}"))
        self.cluster.create_event(node.name, "RemediationFailed",
                                  f"{r.fault}: {message}. The node stays cordoned and no longer holds a remediation "
                                  "slot; delete it, or remove the openpod.io/remediation annotation to retry")

    # ------------------------------------------------------------- hot spares
    def _spares(self, group: str) -> list[Node]:
        return [n for n in self.cluster.list_nodes({L.INSTANCE_GROUP: group}) if is_spare(n)]

    def _ready_spare(self, group: str, exclude: str) -> Node | None:
        for n in sorted(self._spares(group), key=lambda n: n.name):
            if n.name != exclude and REMEDIATION not in n.annotations and FAULT not in n.annotations \
                    and not n.has_taint(L.STARTUP_TAINT) and not n.has_taint(L.PAIR_CHECK_TAINT) \
                    and current_action(n.labels) is Action.NONE:
                return n
        return None

    def _promote(self, name: str, group: str, failed: str) -> None:
        try:
            spare = self.cluster.get_node(name)
        except NotFound:
            return
        if not is_spare(spare) and not spare.has_taint(L.HOT_SPARE_TAINT):
            return  # already promoted
        self.cluster.patch_node(name, labels={L.HOT_SPARE: None},
                                taints=without_taint(spare.taints, L.HOT_SPARE_TAINT),
                                resource_version=spare.resource_version)
        self.metrics.spare_promotions.labels(group).inc()
        self.cluster.create_event(name, "HotSparePromoted", f"takes the place of {failed} in group {group}", "Normal")

    def _refill_spares(self, group: str, members: list[Node]) -> None:
        want = self.config.groups.get(group).hot_spares if group in self.config.groups else 0
        have = [n for n in members if is_spare(n) and REMEDIATION not in n.annotations]
        if len(have) >= want:
            return
        # Only nodes still under the startup taint are taken: nothing runs on them yet.
        fresh = sorted((n for n in members if n.has_taint(L.STARTUP_TAINT) and not is_spare(n)
                        and REMEDIATION not in n.annotations and FAULT not in n.annotations), key=lambda n: n.name)
        for n in fresh[: want - len(have)]:
            try:
                self.cluster.patch_node(n.name, labels={L.HOT_SPARE: "true"},
                                        taints=with_taint(n.taints, L.HOT_SPARE_TAINT, "true"),
                                        resource_version=n.resource_version)
            except (Conflict, NotFound):
                continue  # changed since the list (e.g. its deep check passed): decided again next reconcile
            self.cluster.create_event(n.name, "HotSpareReserved", f"held as a hot spare for group {group}", "Normal")

    # --------------------------------------------------------- leadership
    @property
    def cluster(self) -> Cluster:
        return self._cluster

    @cluster.setter
    def cluster(self, cluster: Cluster) -> None:
        self._cluster = LeaderOnly(cluster, self._guard, CLUSTER_READS)  # every write checks leadership first

    @property
    def cloud(self) -> Cloud:
        return self._cloud

    @cloud.setter
    def cloud(self, cloud: Cloud) -> None:
        self._cloud = LeaderOnly(cloud, self._guard, CLOUD_READS)

    def _guard(self) -> None:
        """Right before any write (LeaderOnly calls it): still the leader (by our own clock, within the renew
        deadline)?"""
        if self.elector is not None and not self.elector.is_leader():
            raise NotLeader(self.elector.identity)

    def tick(self) -> bool:
        """One pass if this replica leads; False if it stood by."""
        if self.elector is not None and not self.elector.is_leader():
            self.metrics.leader.set(0)
            self._replacing = {}  # the leader observes outcomes; ours would be stale when we lead again
            return False
        self.metrics.leader.set(1)
        try:
            self.reconcile_once()
        except NotLeader:
            log.warning("lost the lease mid-pass; standing by")
        return True

    def run(self, stop_event) -> None:
        lease_thread = self.elector.start(stop_event) if self.elector is not None else None
        try:
            self._loop(stop_event)
        finally:
            if lease_thread is not None:
                lease_thread.join(timeout=10)  # it releases the Lease on the way out (a clean, fast hand-over)

    def _loop(self, stop_event) -> None:
        while not stop_event.is_set():
            try:
                acted = self.tick()
            except Exception:  # noqa: BLE001 (API/cloud hiccups: retry on the next pass)
                log.exception("reconcile failed; retrying")
                acted = True
            # A standby looks again soon, so a failover does not wait a whole poll.
            stop_event.wait(self.config.poll_seconds if acted else self.config.leader_election.retry_period_seconds)
