"""The admission policies the synthesized CloudFormation templates apply are the ones the lifecycle conformance
suite evaluates (tests/governance/test_lifecycle_conformance.py: every controller request admitted, every attack
denied), and on them too the attacks are denied and a job's life is admitted."""

from __future__ import annotations

import json

import pytest

from tests.governance import lifecycle_corpus as corpus
from tests.governance.test_lifecycle_conformance import check, installed

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


def _key(o: dict) -> tuple[str, str, str]:
    """Kind, name and content, without the prune label CDK adds to every applied object."""
    meta = {**o["metadata"], "labels": {k: v for k, v in o["metadata"].get("labels", {}).items()
                                        if not k.startswith("aws.cdk.eks/prune-")}}
    return o["kind"], o["metadata"]["name"], json.dumps({**o, "metadata": meta}, sort_keys=True)


@pytest.mark.parametrize("example", ["default", "large"])
def test_cdk_applies_exactly_the_policies_the_conformance_suite_evaluates(synthesized, example):
    synth = synthesized[example]
    objects = deployed(synth)
    assert sorted(map(_key, objects)) == sorted(map(_key, installed(synth.stack.spec)))
    spec = synth.stack.spec
    teams = [t.name for t in spec.teams]
    for case in corpus.attacks(spec, teams[0], teams[1]) + corpus.lifecycle(spec, teams[0], "gpu-openpod"):
        check(objects, case)
