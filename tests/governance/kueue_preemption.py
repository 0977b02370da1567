"""Kueue v0.19.2's preemption decision, re-stated in Python for the promise tests.

Like the CRD rules in ``k8s_schema.py``, this restates upstream code (we cannot run Kueue's scheduler
here) and cites it line by line, kubernetes-sigs/kueue@v0.19.2, checked 2026-11-23. It takes the
*generated* ClusterQueue objects and manager config, so a promise test fails when the generated
settings stop implying the promised behaviour.

Scope: one flat Cohort (every team's ClusterQueue in ``openpod``, no Cohort quota), one
flavor-resource counted in nodes, no lending limits, no TAS. Within that scope:

* ``getTargets``: fair preemption when the manager config has ``fairSharing``, else classical
  (pkg/scheduler/preemption/preemption.go:155-160; fairsharing/strategy.go:50-52).
* Candidates (both algorithms): the preemptor's own ClusterQueue by ``withinClusterQueue``; other
  ClusterQueues only while they borrow, by ``reclaimWithinCohort``
  (preemption.go:631-662; classical/hierarchical_preemption.go:81-95, 149-206;
  classical/candidate_generator.go:136-157); the policy test is common/preemption_policy.go:32-50.
* Order: other queues first, then lower priority, then most recently admitted
  (common/ordering.go:35-84).
* Classical: a candidate of another queue over which the preemptor has no hierarchical advantage
  (its request does not fit its own unused nominal quota) is ``ReclaimWithoutBorrowing`` when
  ``borrowWithinCohort`` is Never or the candidate's priority is not lower, usable only if the
  preemptor would then not borrow (hierarchical_preemption.go:97-123; candidate_generator.go:140-142;
  preemption.go:282-337, 667-682).
* Fair: a preemptor within its nominal quota takes candidates unconditionally
  (``FairSharingPreemptWithinNominal``, beta and on by default since 0.17:
  pkg/features/kube_features.go:673-675; preemption.go:394-423); otherwise a candidate of another
  queue goes only if rule S2-a (preemptor's share after <= target's share after) or then S2-b
  (preemptor's share after < target's share before) holds (preemption.go:382-587;
  fairsharing/strategy.go:40-48). Share = borrowed / lendable / weight (pkg/cache/scheduler/
  fair_sharing.go:90-98, 149-182).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class Workload:
    name: str
    cq: str
    priority: int
    nodes: int
    admitted_at: int = 0          # larger = admitted more recently


@dataclass
class Cluster:
    """Generated ClusterQueues and manager config, nominal nodes per queue, admitted workloads."""

    queues: dict[str, dict[str, Any]]
    config: dict[str, Any]
    nominal: dict[str, int]
    admitted: list[Workload] = field(default_factory=list)

    @property
    def fair_sharing(self) -> bool:
        return "fairSharing" in self.config                       # fairsharing/strategy.go:50-52

    def usage(self, cq: str, without: frozenset[str] = frozenset()) -> int:
        return sum(w.nodes for w in self.admitted if w.cq == cq and w.name not in without)

    def borrowing(self, cq: str, without: frozenset[str] = frozenset()) -> bool:
        return self.usage(cq, without) > self.nominal[cq]

    def policy(self, cq: str) -> dict[str, Any]:
        return self.queues[cq]["spec"]["preemption"]

    def weight(self, cq: str) -> float:
        return float((self.queues[cq]["spec"].get("fairSharing") or {}).get("weight", 1))


def satisfies(policy: str, preemptor: Workload, candidate: Workload) -> bool:
    """common/preemption_policy.go:32-50 (LowerOrNewerEqualPriority's timestamp rule left out)."""
    if policy == "LowerPriority":
        return preemptor.priority > candidate.priority
    if policy == "LowerOrNewerEqualPriority":
        return preemptor.priority > candidate.priority
    return policy == "Any"


def candidates(c: Cluster, p: Workload) -> list[Workload]:
    """Workloads Kueue may consider preempting for ``p``, in Kueue's order."""
    pol = c.policy(p.cq)
    out = []
    for w in c.admitted:
        if w.cq == p.cq:
            if pol["withinClusterQueue"] != "Never" and satisfies(pol["withinClusterQueue"], p, w):
                out.append(w)
        elif pol["reclaimWithinCohort"] != "Never" and c.borrowing(w.cq) \
                and satisfies(pol["reclaimWithinCohort"], p, w):
            out.append(w)
    # common/ordering.go:35-84: other queues first, lower priority first, newest first
    return sorted(out, key=lambda w: (w.cq == p.cq, w.priority, -w.admitted_at))


def _fits(c: Cluster, p: Workload, gone: frozenset[str], allow_borrowing: bool) -> bool:
    """preemption.go:667-682 for a flat cohort without lending limits."""
    capacity = sum(c.nominal.values())
    used = sum(c.usage(q, gone) for q in c.queues)
    mine = c.usage(p.cq, gone) + p.nodes
    if not allow_borrowing and mine > c.nominal[p.cq]:
        return False
    return used + p.nodes <= capacity


def _share(c: Cluster, cq: str, gone: frozenset[str], extra: int = 0) -> Fraction:
    """fair_sharing.go:149-182 / 90-98: borrowed / lendable / weight (a flat cohort: lendable = all quota)."""
    borrowed = max(0, c.usage(cq, gone) + extra - c.nominal[cq])
    return Fraction(borrowed, sum(c.nominal.values())) / Fraction(c.weight(cq)).limit_denominator(10**9)


def targets(c: Cluster, p: Workload) -> list[str] | None:
    """Names Kueue would preempt to admit ``p``; None when it cannot admit ``p`` by preempting."""
    cands = candidates(c, p)
    if c.fair_sharing:
        return _fair(c, p, cands)
    return _classical(c, p, cands)


def _classical(c: Cluster, p: Workload, cands: list[Workload]) -> list[str] | None:
    pol = c.policy(p.cq)
    borrow_forbidden = pol.get("borrowWithinCohort", {}).get("policy", "Never") == "Never"  # hier..:71-77
    advantage = c.usage(p.cq) + p.nodes <= c.nominal[p.cq]          # QuantitiesFitInQuota, hier..:158

    def without_borrowing_only(w: Workload) -> bool:                 # hierarchical_preemption.go:97-112
        if w.cq == p.cq or advantage:
            return False
        return borrow_forbidden or w.priority >= p.priority

    for allow_borrowing in (True, False):                            # preemption.go:309-318
        gone: frozenset[str] = frozenset()
        chosen = []
        for w in cands:
            if allow_borrowing and without_borrowing_only(w):        # candidate_generator.go:140-142
                continue
            if w.cq != p.cq and not c.borrowing(w.cq, gone):         # candidate_generator.go:143-145
                continue
            gone |= {w.name}
            chosen.append(w.name)
            if _fits(c, p, gone, allow_borrowing):
                return chosen
    return None


def _fair(c: Cluster, p: Workload, cands: list[Workload]) -> list[str] | None:
    within_nominal = c.usage(p.cq) + p.nodes <= c.nominal[p.cq]     # preemption.go:394-395, 707-719
    gone: frozenset[str] = frozenset()
    chosen: list[str] = []
    for strategy in ("S2-a", "S2-b"):
        for w in cands:
            if w.name in gone:
                continue
            if w.cq != p.cq and not within_nominal:
                if not c.borrowing(w.cq, gone):
                    continue
                mine = _share(c, p.cq, gone, extra=p.nodes)
                if strategy == "S2-a":
                    ok = mine <= _share(c, w.cq, gone | {w.name})    # strategy.go:40-43
                else:
                    ok = mine < _share(c, w.cq, gone)                # strategy.go:45-48
                if not ok:
                    continue
            gone |= {w.name}
            chosen.append(w.name)
            if _fits(c, p, gone, allow_borrowing=True):
                return chosen
    return None
