"""The spec's ``queueing:`` section: Kueue's waitForPodsReady and fair-share weights as rendered."""

from __future__ import annotations

import yaml

from infra.governance import queues as q
from infra.governance.install import kueue_manager_config, kueue_values
from infra.spec.loading import load_spec, parse_spec
from tests.conftest import EXAMPLES, example_data as base, spec_problems as problems


def test_wait_for_pods_ready_comes_from_the_spec():
    # kueue@v0.19.2 apis/config/v1beta2/configuration_types.go:302-329, 402-440
    cfg = kueue_manager_config(load_spec(EXAMPLES / "default.yaml"))
    assert cfg["waitForPodsReady"] == {
        "timeout": "20m", "blockAdmission": False, "recoveryTimeout": "30m",
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 120, "backoffMaxSeconds": 3600}}
    d = base()
    d["queueing"] = {"wait_for_pods_ready": {"timeout_minutes": 45, "recovery_timeout_minutes": 0,
                                             "backoff_base_seconds": 30, "backoff_limit_count": 4}}
    spec = parse_spec(d)
    rendered = yaml.safe_load(kueue_values(spec)["managerConfig"]["controllerManagerConfigYaml"])
    assert rendered["waitForPodsReady"] == {
        "timeout": "45m", "blockAdmission": False, "recoveryTimeout": "0s",
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 30, "backoffMaxSeconds": 3600,
                              "backoffLimitCount": 4}}


def test_wait_for_pods_ready_is_validated():
    d = base()
    d["queueing"] = {"wait_for_pods_ready": {"timeout_minutes": 0, "backoff_base_seconds": 7200,
                                             "backoff_max_seconds": 600}}
    got = problems(d)
    assert any(p.startswith("queueing.wait_for_pods_ready.timeout_minutes:") for p in got), got
    assert any(p.startswith("queueing.wait_for_pods_ready.backoff_base_seconds:") for p in got), got


def test_weights_below_a_thousandth_survive_rendering():
    # Old rendering floored to milli-units: 0.0005 became "0m", a zero weight, which Kueue treats as an
    # infinite share (kueue@v0.19.2 pkg/cache/scheduler/fair_sharing.go:90-98); 1.005 became "1004m".
    assert q._weight(0.0005) == "0.0005"
    assert q._weight(1.005) == "1.005"
    assert q._weight(0.25) == "0.25"
    assert q._weight(3.0) == 3
    d = base()
    d["teams"][0]["fair_sharing_weight"] = 0.0005
    cq = q.cluster_queue(s := parse_spec(d), s.teams[0])
    assert cq["spec"]["fairSharing"] == {"weight": "0.0005"}


def test_a_weight_kueue_would_reject_is_one_spec_error():
    d = base()
    d["teams"][0]["fair_sharing_weight"] = 1e-10
    assert problems(d) == [
        "teams[0] (research).fair_sharing_weight: 1e-10 is too small: Kueue needs a weight above 1e-9 (weights "
        "are relative: give the other teams larger weights instead)"]


def test_openpod_queues_says_what_preemption_does():
    from click.testing import CliRunner

    from infra.cli.main import main

    out = CliRunner().invoke(main, ["queues", "--spec", str(EXAMPLES / "default.yaml")]).stdout
    assert "preemption: fair sharing. A team within its nominal quota is never preempted by another team" in out
    assert ("  research: takes lent nodes back from borrowers whatever their priority; preempts its own "
            "lower-priority jobs; weight 1") in out
    d = base()
    d["queueing"] = {"fair_sharing": False}
    spec = parse_spec(d)
    from infra.governance.preemption import summary
    assert summary(spec)[0] == "preemption: classical. A team within its nominal quota is never preempted by " \
                               "another team"
    assert summary(spec)[1].endswith("while borrowing, never preempts other teams")


def test_kueue_reports_each_teams_usage_and_quota():
    """The team dashboards and openpod:team_borrowed:sum read kueue_cluster_queue_resource_usage / _nominal_quota,
    which Kueue reports only with this on (kueue@v0.19.2:apis/config/v1beta2/configuration_types.go:182-185)."""
    assert kueue_manager_config()["metrics"] == {"bindAddress": ":8443", "enableClusterQueueResources": True}
