"""Spec validation of the teams/priorities section: one clear problem per mistake."""

from __future__ import annotations

import pytest
import yaml

from infra.spec.loading import parse_spec
from tests.conftest import EXAMPLES, example_data as base, spec_problems as problems


def test_examples_are_valid():
    for path in EXAMPLES.glob("*.yaml"):
        parse_spec(yaml.safe_load(path.read_text()))


def test_quota_beyond_group_minus_hot_spares():
    d = base()
    d["teams"][0]["quotas"]["p5"]["nodes"] = 4
    assert problems(d) == [
        "teams[0] (research).quotas.p5.nodes: 4 exceeds what group p5 can supply: max_size 4 - hot_spares 1 = 3",
        "teams: teams' quotas on group p5 add up to 5 nodes, more than it can supply (3 = max_size 4 - hot_spares 1)",
    ]


def test_unknown_group_and_lending_above_nominal():
    d = base()
    d["teams"][1]["quotas"] = {"h100": {"nodes": 1}, "p5": {"nodes": 1, "lending_limit": 2}}
    assert problems(d) == [
        "teams[1] (product).quotas.h100: unknown instance group; groups are: system, p5, trn2, gb200",
        "teams[1] (product).quotas.p5.lending_limit: 2 exceeds the team's nominal quota 1",
    ]


def test_borrowing_limit_beyond_what_the_group_has():
    d = base()
    d["teams"][1]["quotas"]["p5"]["borrowing_limit"] = 3
    assert problems(d) == [
        "teams[1] (product).quotas.p5.borrowing_limit: 3 lets the team reach 4 nodes, more than group p5 can supply "
        "(3); at most 2"]


def test_reserved_and_invalid_team_names_duplicate_priorities():
    d = base()
    d["teams"][0]["name"] = "kube-ops"
    d["teams"][1]["name"] = "Product"
    d["priorities"] = [{"name": "high", "value": 10}, {"name": "high", "value": 10}]
    got = problems(d)
    assert "teams[1] (Product).name: 'Product' not allowed; use lowercase letters, digits and '-', starting with a " \
           "letter, at most 32 characters" in got
    d["teams"][1]["name"] = "product"
    got = problems(d)
    assert got == [
        "priorities: duplicate priority name 'high'",
        "priorities: two priorities share value 10; give each a distinct value so preemption order is unambiguous",
        "teams[0] (kube-ops).name: 'kube-ops' is reserved (the team name is its namespace); not allowed: default, "
        "jobset-system, kueue-system, openpod, openpod-monitoring, openpod-system, kube-*, openpod-*",
    ]


def _platform_names() -> set[str]:
    """Every namespace the platform's own objects live in (the governance objects, the node agent's manifests,
    the exporters' and the controllers' charts), and the namespaces Kubernetes creates."""
    from infra.governance import all_objects, install
    from infra.spec.loading import load_spec
    from node_agent import deploy
    from observability import scrape
    from platform_constructs import exporters
    from tests.conftest import EXAMPLES

    spec = load_spec(EXAMPLES / "default.yaml")
    teams = {t.name for t in spec.teams}
    objects = [*all_objects(spec), *deploy.manifests(spec, {"amd64": "img", "arm64": "img"})]
    used = {o["metadata"].get("namespace") for o in objects} | {o["metadata"]["name"] for o in objects
                                                                 if o["kind"] == "Namespace"}
    return (used - teams - {None}) | {install.KUEUE_NAMESPACE, install.JOBSET_NAMESPACE, exporters.NAMESPACE,
                                      scrape.OPENPOD_NAMESPACE, scrape.MONITORING_NAMESPACE,
                                      "default", "kube-system", "kube-public", "kube-node-lease"}


@pytest.mark.parametrize("name", sorted(_platform_names()) + ["datasets"])
def test_a_team_cannot_take_a_namespace_or_directory_the_platform_uses(name):
    """A team named `openpod-monitoring` got exec rights in the exporters' namespace, one named `datasets` the
    datasets directory read-write (its FSx subPath is its name): both passed validation."""
    d = base()
    d["teams"][0]["name"] = name
    got = [p for p in problems(d) if p.startswith(f"teams[0] ({name}).name:")]
    assert len(got) == 1 and ("is reserved" in got[0] or "FSx data repository directory" in got[0]), problems(d)
    assert "\n" not in got[0]


def test_the_data_repository_directory_follows_the_spec():
    d = base()
    d.setdefault("storage", {}).setdefault("fsx", {})["data_repository_path"] = "/corpus"
    d["teams"][0]["name"] = "corpus"
    assert "teams[0] (corpus).name: 'corpus' is the FSx data repository directory (storage.fsx.data_repository_path " \
           "/corpus); the team name is also its FSx directory: choose another name" in problems(d)


def test_borrow_within_cohort_needs_reclaim():
    d = base()
    d["queueing"] = {"fair_sharing": False}  # borrow_within_cohort applies to classical preemption only
    d["teams"][0]["preemption"] = {"reclaim_within_cohort": "Never", "borrow_within_cohort": "LowerPriority"}
    assert problems(d) == ["teams[0] (research).preemption.borrow_within_cohort: must be Never when "
                           "reclaim_within_cohort is Never (Kueue rejects the pair)"]


def test_bad_preemption_value_names_the_allowed_ones():
    d = base()
    d["teams"][0]["preemption"] = {"within_cluster_queue": "Always"}
    (p,) = problems(d)
    assert p.startswith("teams[0] (research).preemption.within_cluster_queue: 'Always' not allowed")
    assert "'Never', 'LowerPriority' or 'LowerOrNewerEqualPriority'" in p


def test_team_users_must_be_iam_principal_arns():
    d = base()
    d["teams"][0]["users"] = ["ml-researchers", "arn:aws:iam::111122223333:role/ml/researchers",
                              "arn:aws:sts::111122223333:assumed-role/researchers/alice"]
    help_ = ("not allowed; use an IAM role or user ARN such as arn:aws:iam::111122223333:role/ml-researchers "
             "(not a Kubernetes group or an assumed-role session)")
    assert problems(d) == [f"teams[0] (research).users[0]: 'ml-researchers' {help_}",
                           f"teams[0] (research).users[2]: 'arn:aws:sts::111122223333:assumed-role/researchers/alice' "
                           f"{help_}"]
    d["teams"][0]["users"] = ["arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:user/alice"]
    assert problems(d) == ["teams[0] (research).users: 'arn:aws:iam::111122223333:user/alice' is listed twice"]


def test_a_user_in_two_teams_gets_both_groups_once():
    from infra.governance import queues

    d = base()
    alice, bob = "arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:role/bob"
    d["teams"][0]["users"] = [alice, bob]
    d["teams"][1]["users"] = [alice]
    assert queues.team_members(parse_spec(d)) == {alice: ["openpod:team:research", "openpod:team:product"],
                                                 bob: ["openpod:team:research"]}


def test_one_access_entry_per_principal():
    d = base()
    arn = "arn:aws:iam::111122223333:role/admins"
    d["eks"]["access_entries"] = [{"principal_arn": arn, "access": "view"}, {"principal_arn": arn}]
    assert problems(d) == [f"eks.access_entries: '{arn}' is listed twice; EKS allows one access entry per principal "
                           "(give it the broader access)"]
