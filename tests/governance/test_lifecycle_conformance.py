"""Every admission policy the platform installs, on every request a job's life sends and on the attacks.

The policies are the very objects ``openpod manifests`` writes (``all_objects``) plus the node agent's
(``node_agent.deploy.manifests``, applied by CDK); tests/cdk/test_admission_conformance.py runs the same corpus on
what the synthesized CloudFormation template applies. Evaluation: tests/governance/vap.py (cel-python, the
documented ValidatingAdmissionPolicy semantics). Corpus: tests/governance/lifecycle_corpus.py (each request
derived from its sender's source, cited there).
"""

from __future__ import annotations

import pytest

from infra.governance import all_objects
from infra.governance.queues import SUBMITTER_RULES
from infra.spec.loading import load_spec
from node_agent import deploy
from tests.conftest import EXAMPLES
from tests.governance import lifecycle_corpus as corpus
from tests.governance import rbac, vap


def installed(spec) -> list[dict]:
    """Every policy and binding the platform installs for ``spec`` (governance + node agent)."""
    agent = deploy.manifests(spec, {"amd64": "registry.example/agent:1", "arm64": "registry.example/agent:1"})
    return [o for o in all_objects(spec) + agent
            if o["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")]


SPECS = {name: load_spec(EXAMPLES / f"{name}.yaml") for name in ("default", "large")}
POLICIES = {name: installed(s) for name, s in SPECS.items()}


def _cases():
    for example, spec in SPECS.items():
        teams = [t.name for t in spec.teams]
        for mode, m in corpus.MODES.items():
            if corpus.group_for(spec, m["accelerator"], m.get("tainted", False)) is None:
                continue
            for case in corpus.lifecycle(spec, teams[0], mode):
                yield pytest.param(example, case, id=f"{example}-{mode}-{case.name}")
        for case in corpus.node_agent_cases():
            yield pytest.param(example, case, id=f"{example}-{case.name}")
        for case in corpus.attacks(spec, teams[0], teams[1]):
            yield pytest.param(example, case, id=f"{example}-attack-{case.name}")


CASES = list(_cases())


def check(objects: list[dict], case: corpus.Case) -> None:
    """The API server's answer: the team user's request first through its Role (RBAC runs before admission;
    the controllers' own roles grant what they send), then through every policy."""
    refused = rbac.denial(SUBMITTER_RULES, case.request) if case.request.user == vap.TEAM_USER else None
    denied = [refused] if refused else vap.denials(objects, case.request)
    if case.deny is None:
        assert denied == [], f"{case.name} ({case.source}) was refused: {denied}"
    else:
        assert denied, f"attack {case.name} was admitted"
        assert any(case.deny in m for m in denied), f"{case.name}: {denied} does not name the rule ({case.deny})"


@pytest.mark.parametrize("example, case", CASES)
def test_controller_requests_are_admitted_and_attacks_denied(example, case):
    check(POLICIES[example], case)


def test_the_corpus_covers_every_family_and_cites_its_source():
    families = {c.values[1].family for c in CASES}
    assert families == set(corpus.TUNE) | set(corpus.HELD_OUT)
    assert all(c.values[1].source for c in CASES)


def test_every_installed_policy_is_bound_and_fails_closed():
    for objs in POLICIES.values():
        policies = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"}
        bound = {o["spec"]["policyName"] for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"}
        assert set(policies) == bound
        assert all(p["spec"].get("failurePolicy", "Fail") == "Fail" for p in policies.values())


@pytest.mark.parametrize("op, resource, sub, group, verb, granted", [
    ("CREATE", "jobsets", "", "jobset.x-k8s.io", "", True),
    ("UPDATE", "jobsets", "", "jobset.x-k8s.io", "patch", True),
    ("CREATE", "pods", "", "", "", False),                        # no bare pods
    ("UPDATE", "pods", "ephemeralcontainers", "", "patch", False),  # no kubectl debug
    ("CREATE", "pods", "exec", "", "", True),                     # kubectl exec
    ("CREATE", "jobs", "", "batch", "", False),
    ("UPDATE", "jobsets", "status", "jobset.x-k8s.io", "", False),
])
def test_the_team_role_is_applied_before_admission(op, resource, sub, group, verb, granted):
    req = vap.Request(operation=op, resource=resource, subresource=sub, group=group, namespace="research",
                      namespace_labels={}, verb=verb)
    assert (rbac.denial(SUBMITTER_RULES, req) is None) is granted
