"""Leader election on a coordination.k8s.io/v1 Lease, so the controller runs with two replicas and one acts.

The algorithm is client-go's (k8s.io/client-go/tools/leaderelection, leaderelection.go
``tryAcquireOrRenew``), which the kubernetes Python client's ``leaderelection`` package
also follows:

- read the Lease; if absent, create it holding it (a concurrent create is 409 AlreadyExists: lost);
- a candidate judges a foreign holder's lease by its *own* clock: the lease is expired only when
  the record (holder, renewTime, transitions) has not changed for ``lease_duration`` since this
  candidate first observed it, so clock skew between replicas does not matter;
- take or renew it with a replace carrying the Lease's resourceVersion: of two candidates racing
  for an expired lease, the API server lets exactly one write win (the other gets 409 Conflict);
- the leader counts itself leader only until ``renew_deadline`` after its last successful renew,
  which is shorter than ``lease_duration``: a leader that cannot renew stops acting before any
  other replica may take over.

It is written here, not taken from ``kubernetes.leaderelection``, because the controller must
ask "am I still leader?" right before each write (that package only offers start/stop
callbacks on its own threads and time.time()), and the tests drive it with a simulated clock.
The controller asks it in one place: its Cluster and Cloud are wrapped in :class:`LeaderOnly`,
which checks before every call that is not a named read.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from datetime import datetime, timezone

log = logging.getLogger("node_agent.leader")


class NotLeader(RuntimeError):
    """This replica's lease ran out: it must not act (another replica may)."""


class LeaderOnly:
    """``inner`` (a Cluster or a Cloud) whose every method except the named ``reads`` first calls ``guard``
    (which raises :class:`NotLeader` when this replica does not lead): the one door all writes go through, so
    a write added later is guarded without anyone remembering to. Attributes that are not methods pass as is."""

    def __init__(self, inner, guard, reads: frozenset[str]) -> None:
        self._inner, self._guard, self._reads = inner, guard, reads

    def __getattr__(self, name: str):
        attr = getattr(self._inner, name)
        if name in self._reads or not callable(attr):
            return attr

        def guarded(*args, **kw):
            self._guard()
            return attr(*args, **kw)
        return guarded


class LeaseElector:
    def __init__(self, api_client, *, name: str, namespace: str, identity: str, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0, clock=time.time) -> None:
        from kubernetes import client

        if not lease_duration > renew_deadline > retry_period * 1.2 > 0:
            raise ValueError(f"leader election: need lease_duration ({lease_duration}) > renew_deadline "
                             f"({renew_deadline}) > 1.2 x retry_period ({retry_period}) > 0")
        self.client = client
        self.api = client.CoordinationV1Api(api_client)
        self.name, self.namespace, self.identity = name, namespace, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.clock = clock
        self._observed: tuple | None = None       # (holder, renewTime, transitions) last seen
        self._observed_at = 0.0                   # local clock when it last changed
        self._renewed_at: float | None = None     # local clock of our last successful acquire/renew
        self.transitions = 0                      # times this process became leader

    # ----------------------------------------------------------------- queries
    def is_leader(self) -> bool:
        """True while our last successful renew is younger than renew_deadline (by our own clock)."""
        return self._renewed_at is not None and self.clock() < self._renewed_at + self.renew_deadline

    # ------------------------------------------------------------------- steps
    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True if we hold the lease afterwards."""
        c, now, t = self.client, self._now(), self.clock()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except c.ApiException as e:
            if e.status != 404:
                return self._failed(f"read: {e.status} {e.reason}")
            body = c.V1Lease(metadata=c.V1ObjectMeta(name=self.name, namespace=self.namespace),
                             spec=c.V1LeaseSpec(holder_identity=self.identity, acquire_time=now, renew_time=now,
                                                lease_duration_seconds=int(self.lease_duration),
                                                lease_transitions=0))
            try:
                self.api.create_namespaced_lease(self.namespace, body)
            except c.ApiException as e2:
                return self._failed(f"create: {e2.status} {e2.reason}")
            return self._won(t, (self.identity, now, 0), became=True)
        spec = lease.spec or c.V1LeaseSpec()
        record = (spec.holder_identity or "", spec.renew_time, spec.lease_transitions or 0)
        if record != self._observed:
            self._observed, self._observed_at = record, t
        holder = record[0]
        if holder and holder != self.identity and t < self._observed_at + self.lease_duration:
            self._renewed_at = None
            return False  # held by another and not expired (by our clock)
        ours = holder == self.identity
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = int(self.lease_duration)
        spec.renew_time = now
        if not ours:
            spec.acquire_time = now
            spec.lease_transitions = record[2] + 1  # as client-go: every change of holder counts
        lease.spec = spec
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)  # carries metadata.resourceVersion
        except c.ApiException as e:
            return self._failed(f"update: {e.status} {e.reason}")
        return self._won(t, (self.identity, now, spec.lease_transitions or 0), became=not ours)

    def _won(self, t: float, record: tuple, became: bool) -> bool:
        if became:
            self.transitions += 1
            log.info("%s acquired lease %s/%s", self.identity, self.namespace, self.name)
        self._observed, self._observed_at, self._renewed_at = record, t, t
        return True

    def _failed(self, why: str) -> bool:
        log.info("%s: lease %s/%s not acquired/renewed (%s)", self.identity, self.namespace, self.name, why)
        return False  # keep _renewed_at: is_leader() runs out at renew_deadline on its own

    def release(self) -> None:
        """On a clean stop: give the lease up at once (client-go's ReleaseOnCancel), so the other replica
        takes over without waiting out lease_duration."""
        if not self.is_leader():
            return
        c = self.client
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.lease_duration_seconds = 1
                lease.spec.renew_time = self._now()
                self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except c.ApiException as e:
            log.info("lease release failed: %s", e.reason)
        self._renewed_at = None

    def run(self, stop_event: threading.Event) -> None:
        """Acquire and keep renewing until stopped (a daemon thread next to the reconcile loop)."""
        while not stop_event.is_set():
            try:
                self.try_acquire_or_renew()
            except Exception:  # noqa: BLE001 (network errors: retried; is_leader() expires on its own)
                log.exception("leader election step failed")
            # client-go: the leader renews every retry_period; candidates retry with jitter (factor 1.2).
            wait = self.retry_period if self.is_leader() else self.retry_period * (1 + 0.2 * random.random())
            stop_event.wait(wait)
        self.release()

    def start(self, stop_event: threading.Event) -> threading.Thread:
        th = threading.Thread(target=self.run, args=(stop_event,), name="leader-election", daemon=True)
        th.start()
        return th
