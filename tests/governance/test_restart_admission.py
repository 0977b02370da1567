"""Team JobSets may not restart without bound: failure-policy actions that skip ``maxRestarts`` are refused.

JobSet v0.12.0 has five failure-policy actions (kubernetes-sigs/jobset@v0.12.0
api/jobset/v1alpha2/jobset_types.go:412-435, the enum at :449). ``RestartJobSetAndIgnoreMaxRestarts``
(:421-423) and ``RestartJobAndIgnoreMaxRestarts`` (:431-434) restart "but do not check
jobSet.spec.maxRestarts": with the RestartJob gate on (the platform turns it on for replica mode), a team
JobSet could recreate a failing child Job forever while it holds its quota. Every VAP the platform deploys
is evaluated with cel-python (tests/governance/vap.py) on the request, as the API server would.
"""

from __future__ import annotations

import copy

import pytest

from infra.governance import all_objects, job_request
from infra.governance.admission import CONTROLLER_NAMESPACES
from infra.governance.queues import TEAM_LABEL
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES
from tests.governance import vap
from tests.governance.test_lighthouse_failure import replica_jobset

SPEC = load_spec(EXAMPLES / "default.yaml")
POLICIES = [o for o in all_objects(SPEC) if o["kind"] == "ValidatingAdmissionPolicy"]
TEAM_NS = {TEAM_LABEL: "research"}


def admit(obj: dict, *, user: str = vap.TEAM_USER, old: dict | None = None) -> list[str]:
    """Every deployed policy's denial messages for this request ([] = allowed)."""
    return [m for p in POLICIES for m in vap.admit(p, obj, namespace_labels=TEAM_NS, user=user, old=old)]


def with_action(action: str) -> dict:
    js = replica_jobset()
    js["spec"]["failurePolicy"]["rules"].append({"name": "forever", "action": action,
                                                 "onJobFailureReasons": ["PodFailurePolicy"]})
    return js


def test_what_submit_builds_with_restart_job_rules_is_admitted():
    js = replica_jobset()
    assert {r["action"] for r in js["spec"]["failurePolicy"]["rules"]} == {"RestartJob"}
    assert admit(js) == []


@pytest.mark.parametrize("action", ["FailJobSet", "RestartJobSet", "RestartJob"])
def test_actions_that_count_against_max_restarts_are_admitted(action):
    assert admit(with_action(action)) == []


def test_a_jobset_without_failure_policy_rules_is_admitted():
    js = replica_jobset()
    del js["spec"]["failurePolicy"]["rules"]
    assert admit(js) == []
    del js["spec"]["failurePolicy"]
    assert admit(js) == []


@pytest.mark.parametrize("action", ["RestartJobAndIgnoreMaxRestarts", "RestartJobSetAndIgnoreMaxRestarts"])
def test_actions_that_ignore_max_restarts_are_refused_saying_what_is_allowed(action):
    assert admit(with_action(action)) == [
        f"spec.failurePolicy.rules: rule forever has action {action}, which does not count against maxRestarts "
        "(a team job could restart forever); use FailJobSet, RestartJobSet or RestartJob"]


def test_adding_the_action_on_update_is_refused_too():
    old = replica_jobset()
    assert admit(with_action("RestartJobAndIgnoreMaxRestarts"), old=old) != []


def test_the_platforms_controllers_updating_an_existing_jobset_are_not_matched():
    js = with_action("RestartJobAndIgnoreMaxRestarts")
    for ns in CONTROLLER_NAMESPACES:
        assert admit(js, user=f"system:serviceaccount:{ns}:controller", old=copy.deepcopy(js)) == []


def test_other_namespaces_are_not_matched():
    js = with_action("RestartJobAndIgnoreMaxRestarts")
    assert [m for p in POLICIES for m in vap.admit(p, js, namespace_labels={})] == []


def test_max_restarts_above_what_submit_allows_is_refused():
    """A bounded action with ``maxRestarts: 2147483647`` (int32) restarts as good as forever: the policy caps
    maxRestarts at submit's own limit (job_request.MAX_RESTARTS), so kubectl cannot go around submit. Failed on the
    first version of the policy, which checked the actions only."""
    js = replica_jobset()
    js["spec"]["failurePolicy"]["maxRestarts"] = job_request.MAX_RESTARTS
    assert admit(js) == []
    for too_many in (job_request.MAX_RESTARTS + 1, 2**31 - 1):
        js["spec"]["failurePolicy"]["maxRestarts"] = too_many
        (msg,) = admit(js)
        assert msg == (f"spec.failurePolicy.maxRestarts: {too_many} is above {job_request.MAX_RESTARTS}, the most a "
                       "team job may restart; use 0 to 1000")
