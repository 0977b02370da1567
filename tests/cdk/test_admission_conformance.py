"""The lifecycle conformance corpus (tests/governance/lifecycle_corpus.py) on the admission policies the synthesized
CloudFormation template applies - what CDK deploys, next to what ``openpod manifests`` writes
(tests/governance/test_lifecycle_conformance.py)."""

from __future__ import annotations

import json

import pytest

from tests.governance import lifecycle_corpus as corpus
from tests.governance.test_lifecycle_conformance import check

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]

KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def deployed(synth) -> list[dict]:
    out = []
    for r in synth.resources("Custom::AWSCDK-EKS-KubernetesResource").values():
        manifest = r["Properties"]["Manifest"]
        if isinstance(manifest, dict):
            manifest = "".join(p if isinstance(p, str) else "<token>" for p in manifest["Fn::Join"][1])
        out += [o for o in json.loads(manifest) if o.get("kind") in KINDS]
    return out


@pytest.mark.parametrize("example", ["default", "large"])
def test_cdk_policies_admit_every_controller_request_and_deny_every_attack(synthesized, example):
    synth = synthesized[example]
    spec = synth.stack.spec
    objects = deployed(synth)
    assert {o["metadata"]["name"] for o in objects if o["kind"] == KINDS[0]} >= {
        "openpod-team-queue", "openpod-pod-security", "openpod-pod-security-jobsets", "openpod-jobset-restarts",
        "openpod-node-agent-own-node"}
    teams = [t.name for t in spec.teams]
    cases = [c for mode, m in corpus.MODES.items() if corpus.group_for(spec, m["accelerator"], m.get("tainted", False))
             for c in corpus.lifecycle(spec, teams[0], mode)]
    cases += corpus.node_agent_cases() + corpus.attacks(spec, teams[0], teams[1])
    for case in cases:
        check(objects, case)
