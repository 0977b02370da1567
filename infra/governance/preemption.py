"""What each team's preemption settings mean under Kueue v0.19.2, in words, for ``openpod queues``.

The wording follows the promise table in docs/governance.md ("Preemption: what Kueue does"), whose
rows are checked by tests/governance/test_preemption_promises.py against Kueue's code.
"""

from __future__ import annotations

from infra.spec.cluster import ClusterSpec
from infra.spec.teams import TeamSpec

RECLAIM = {
    "Any": "takes lent nodes back from borrowers whatever their priority",
    "LowerPriority": "takes lent nodes back only from lower-priority borrowed jobs",
    "Never": "never takes lent nodes back by preemption",
}
WITHIN = {
    "LowerPriority": "preempts its own lower-priority jobs",
    "LowerOrNewerEqualPriority": "preempts its own lower-priority jobs and newer ones of equal priority",
    "Never": "never preempts its own jobs",
}
BORROW = {
    "Never": "while borrowing, never preempts other teams",
    "LowerPriority": "while borrowing, preempts other teams' lower-priority borrowed jobs",
}


def summary(spec: ClusterSpec) -> list[str]:
    """A headline and one line per team."""
    if spec.queueing.fair_sharing:
        head = ("preemption: fair sharing. A team within its nominal quota is never preempted by another team; "
                "while borrowing, a team may preempt another team's borrowed jobs when that team is further over "
                "its weighted share (priorities across teams do not decide this)")
    else:
        head = "preemption: classical. A team within its nominal quota is never preempted by another team"
    return [head, *(f"  {t.name}: {_team(spec, t)}" for t in spec.teams)]


def _team(spec: ClusterSpec, t: TeamSpec) -> str:
    p = t.preemption
    parts = [RECLAIM[p.reclaim_within_cohort], WITHIN[p.within_cluster_queue]]
    if spec.queueing.fair_sharing:
        parts.append(f"weight {t.fair_sharing_weight:g}")
    else:
        parts.append(BORROW[p.borrow_within_cohort])
    return "; ".join(parts)
