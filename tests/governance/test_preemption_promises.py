"""The preemption promises of docs/governance.md, each checked against what Kueue v0.19.2 does with
the generated ClusterQueues and manager config (Kueue's decision re-stated, with source lines, in
``tests/governance/kueue_preemption.py``).

Cluster of every scenario: one group of 16 p5 nodes, teams a, b, c, d with 4 nodes each, the
default priorities (inference 100, experimentation 80, training 70, fine-tuning 50).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.governance import all_objects
from infra.governance.install import kueue_manager_config
from infra.spec.teams import DEFAULT_PRIORITIES
from infra.spec.base import SpecError
from infra.spec.loading import parse_spec
from tests.governance.kueue_preemption import Cluster, Workload, targets

DOCS = Path(__file__).parents[2] / "docs" / "governance.md"
PRIO = {p.name: p.value for p in DEFAULT_PRIORITIES}
TEAMS = ("a", "b", "c", "d")


def spec_data(fair_sharing: bool = True, **team_overrides) -> dict:
    return {
        "name": "promises", "region": "us-west-2", "availability_zones": ["us-west-2a", "us-west-2b"],
        "instance_groups": [
            {"name": "system", "instance_type": "m7i.2xlarge", "min_size": 1, "desired_size": 1, "max_size": 2},
            {"name": "gpu", "instance_type": "p5.48xlarge", "availability_zone": "us-west-2a",
             "min_size": 16, "desired_size": 16, "max_size": 16}],
        "teams": [{"name": t, "quotas": {"gpu": {"nodes": 4}}, **team_overrides.get(t, {})} for t in TEAMS],
        "queueing": {"fair_sharing": fair_sharing},
    }


def cluster(data: dict, *admitted: Workload) -> Cluster:
    spec = parse_spec(data)
    cqs = {o["metadata"]["name"]: o for o in all_objects(spec) if o["kind"] == "ClusterQueue"}
    return Cluster(queues=cqs, config=kueue_manager_config(spec),
                   nominal={t.name: t.quotas["gpu"].nodes for t in spec.teams}, admitted=list(admitted))


def job(name: str, cq: str, prio: str, nodes: int, at: int = 0) -> Workload:
    return Workload(name, cq, PRIO[prio], nodes, at)


MODES = pytest.mark.parametrize("fair", [True, False], ids=["fair-sharing", "classical"])


# ------------------------------------------------------------------------------- promises


@MODES
def test_a_team_reclaims_its_nominal_quota_from_a_borrower_whatever_its_priority(fair):
    # b runs inference on 16 nodes: its own 4 and 12 borrowed. a submits training on its 4.
    c = cluster(spec_data(fair), job("b-serve", "b", "inference", 16))
    assert targets(c, job("a-train", "a", "training", 4)) == ["b-serve"]


@MODES
def test_within_a_team_only_lower_priority_jobs_are_preempted(fair):
    c = cluster(spec_data(fair), job("a-serve", "a", "inference", 2), job("a-tune", "a", "fine-tuning", 2),
                *[job(f"{t}-full", t, "training", 4) for t in "bcd"])
    assert targets(c, job("a-exp", "a", "experimentation", 2)) == ["a-tune"]
    # training never preempts the team's own inference, whatever it waits for
    assert targets(c, job("a-train", "a", "training", 4)) is None


@MODES
def test_a_team_within_its_nominal_quota_is_never_preempted_by_another_team(fair):
    # every other team at its nominal quota with low-priority work; a wants more, at the top priority
    c = cluster(spec_data(fair), job("a-serve", "a", "inference", 4),
                *[job(f"{t}-tune", t, "fine-tuning", 4) for t in "bcd"])
    assert targets(c, job("a-more", "a", "inference", 4)) is None


@MODES
def test_inference_of_a_borrowing_team_can_be_reclaimed_by_a_lenders_training(fair):
    # The limit of the promise: reclaimWithinCohort Any takes back lent nodes whatever the borrower's priority.
    c = cluster(spec_data(fair), job("b-serve", "b", "inference", 8), *[job(f"{t}-x", t, "training", 4) for t in "cd"])
    assert targets(c, job("a-train", "a", "training", 4)) == ["b-serve"]
    # with reclaim_within_cohort LowerPriority on the lender, its training leaves inference alone
    c = cluster(spec_data(fair, a={"preemption": {"reclaim_within_cohort": "LowerPriority"}}),
                job("b-serve", "b", "inference", 8), *[job(f"{t}-x", t, "training", 4) for t in "cd"])
    assert targets(c, job("a-train", "a", "training", 4)) is None


# While borrowing: a has its 4 nodes busy and wants 2 more; b borrows 8 (c and d idle... then full).
def _borrowing_scenario(data):
    return cluster(data, job("a-run", "a", "training", 4), job("b-1", "b", "training", 4, at=1),
                   job("b-2", "b", "training", 8, at=0))


def test_classical_a_borrowing_team_never_preempts_another_team():
    c = _borrowing_scenario(spec_data(False))
    assert targets(c, job("a-more", "a", "training", 2)) is None


def test_fair_sharing_a_borrowing_team_preempts_a_team_further_over_its_share():
    # a would borrow 2 nodes; b borrows 8: b stays further over its share after losing b-1 (4 nodes)
    c = _borrowing_scenario(spec_data(True))
    assert targets(c, job("a-more", "a", "training", 2)) == ["b-1"]


def test_fair_sharing_a_higher_weight_protects_borrowed_capacity():
    c = _borrowing_scenario(spec_data(True, b={"fair_sharing_weight": 8}))
    assert targets(c, job("a-more", "a", "training", 2)) is None


# ------------------------------------------------------------------- settings that make them so


def test_fair_sharing_leaves_borrow_within_cohort_out_and_the_spec_rejects_it():
    cq = cluster(spec_data(True)).queues["a"]
    assert "borrowWithinCohort" not in cq["spec"]["preemption"]
    data = spec_data(True, a={"preemption": {"borrow_within_cohort": "LowerPriority"}})
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    assert [str(p) for p in e.value.problems] == [
        "teams[0] (a).preemption.borrow_within_cohort: LowerPriority has no effect with fair sharing on (Kueue's "
        "fair-sharing preemption ignores borrowWithinCohort); leave it Never, or set queueing.fair_sharing: false "
        "for classical preemption"]


def test_classical_preemption_renders_borrow_within_cohort_and_no_fair_sharing():
    c = cluster(spec_data(False, a={"preemption": {"borrow_within_cohort": "LowerPriority"}}))
    assert "fairSharing" not in c.config
    assert c.queues["a"]["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority"}
    assert "fairSharing" not in c.queues["a"]["spec"]
    with pytest.raises(SpecError) as e:
        parse_spec(spec_data(False, a={"fair_sharing_weight": 2}))
    assert [str(p) for p in e.value.problems] == [
        "teams[0] (a).fair_sharing_weight: 2 has no effect with queueing.fair_sharing false; remove it or turn "
        "fair sharing on"]


def test_the_inference_priority_promises_no_more_than_kueue_does():
    desc = {p.name: p.description for p in DEFAULT_PRIORITIES}["inference"]
    assert "never preempted by training" not in desc
    assert "borrow" in desc


# ------------------------------------------------------------------------------ the docs table


def test_every_promise_row_in_the_docs_names_a_test_that_exists():
    text = DOCS.read_text()
    section = text.split("## Preemption: what Kueue does", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith("| promise")
            and not r.startswith("|---")]
    assert len(rows) >= 8
    here = {p.stem: p.read_text() for p in Path(__file__).parent.glob("test_*.py")}
    for row in rows:
        names = re.findall(r"`(test_[a-z0-9_]+)`", row)
        assert names, row
        assert re.search(r"v0\.19\.2|kube_features|preemption|\.go:\d", row), row
        for n in names:
            assert any(f"def {n}(" in src for src in here.values()), n
