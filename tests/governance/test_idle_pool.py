"""Nodes beyond the sum of the teams' quotas are the Cohort's own quota: an idle pool every team may
borrow (kueue@v0.19.2 apis/kueue/v1beta2/cohort_types.go:38-65: a Cohort's nominalQuota is "a shared
pool for the ClusterQueues within it"). Before, they sat in no queue and no job could ever use them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from infra.cli.main import main
from infra.governance import all_objects
from infra.governance import queues as q
from infra.spec.loading import parse_spec
from tests.governance import k8s_schema
from tests.governance.test_preemption_promises import spec_data


def pooled(**overrides) -> dict:
    d = spec_data(True, **overrides)
    d["teams"] = d["teams"][:2]          # a and b: 4 nodes each of 16
    return d


def test_nodes_in_no_quota_are_the_cohorts_pool():
    spec = parse_spec(pooled())
    assert q.pool_nodes(spec, "gpu") == 8
    (cohort,) = [o for o in all_objects(spec) if o["kind"] == "Cohort"]
    (rg,) = cohort["spec"]["resourceGroups"]
    (flavor,) = rg["flavors"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    assert flavor["name"] == "gpu" and rg["coveredResources"] == list(quota)
    assert quota == {"cpu": str(8 * 176), "memory": f"{8 * 1884}Gi", "nvidia.com/gpu": "64",
                     "vpc.amazonaws.com/efa": str(8 * 32)}


@pytest.mark.skipif(not k8s_schema.schemas_present(), reason=k8s_schema.SKIP_REASON)
def test_the_pooled_cohort_is_valid_for_kueue():
    (cohort,) = [o for o in all_objects(parse_spec(pooled())) if o["kind"] == "Cohort"]
    assert k8s_schema.validate(cohort) == []


def test_teams_can_reach_the_pool_within_their_borrowing_limit():
    spec = parse_spec(pooled(b={"quotas": {"gpu": {"nodes": 4, "borrowing_limit": 2}}}))
    assert q.capacity(spec, spec.team("a"), "gpu").max_nodes == 4 + 4 + 8
    assert q.capacity(spec, spec.team("b"), "gpu").max_nodes == 4 + 2


def test_no_pool_when_the_quotas_cover_the_group():
    spec = parse_spec(spec_data(True))
    (cohort,) = [o for o in all_objects(spec) if o["kind"] == "Cohort"]
    assert cohort["spec"] == {}


def test_openpod_queues_shows_the_pool(tmp_path):
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(pooled()))
    result = CliRunner().invoke(main, ["queues", "--spec", str(path)])
    assert result.exit_code == 0, result.output
    assert "idle pool (nodes in no team's quota, any team may borrow them): gpu 8" in result.stdout
    rows = {tuple(r.split()[:2]): r.split() for r in result.stdout.splitlines()[1:3]}
    assert rows[("a", "gpu")][-1] == "16"   # MAX NODES: 4 own + 4 of b + 8 pooled


def test_the_pool_holds_only_nodes_that_run():
    """Nodes between desired_size and max_size do not exist (nothing adds them): quota on them would admit
    jobs whose pods stay Pending while the quota is held (infra/spec/quota_backing.py)."""
    d = pooled()
    d["instance_groups"][1].update(desired_size=12, max_size=16, min_size=12)
    spec = parse_spec(d)
    assert q.pool_nodes(spec, "gpu") == 12 - 8
