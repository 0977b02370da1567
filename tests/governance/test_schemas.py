"""Must show 1: every generated object validates against the Kueue v0.19.2 / JobSet v0.12.0
CRD schemas (nothing would be pruned) and core objects against the Kubernetes models."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from infra.governance import all_objects, jobset
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES
from tests.governance import k8s_schema
from tests.governance.k8s_schema import validate

pytestmark = pytest.mark.skipif(not k8s_schema.schemas_present(), reason=k8s_schema.SKIP_REASON)

SPECS = sorted(EXAMPLES.glob("*.yaml")) + [Path(__file__).with_name("talk_scenario.yaml")]


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_every_object_of_every_spec_is_valid_and_unpruned(path):
    objs = all_objects(load_spec(path))
    kinds = {o["kind"] for o in objs}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Topology", "Cohort",
            "Namespace", "Role", "RoleBinding"} <= kinds
    problems = [p for o in objs for p in validate(o)]
    assert problems == []


def _jobsets():
    spec = load_spec(EXAMPLES / "large.yaml")
    reqs = [
        jobset.JobRequest(name="a", team="pretraining", group="gb200", image="i", nodes=18, script=("t.py",),
                          require_topology="ultraserver"),
        jobset.JobRequest(name="b", team="post-training", group="p5-dev", image="i", nodes=2, script=("t.py",),
                          accelerators_per_node=4, prefer_topology="layer-3"),
        jobset.JobRequest(name="c", team="research", group="data-prep", image="i", nodes=4, script=("t.py",)),
    ]
    for r in reqs:
        jobset.validate(spec, r)
    return [jobset.build(spec, r) for r in reqs]


def test_jobsets_valid_against_jobset_crd():
    for obj in _jobsets():
        assert validate(obj) == []


# The validator itself must catch what the API server would drop or reject.

def _first(kind, spec_path=EXAMPLES / "default.yaml"):
    return copy.deepcopy(next(o for o in all_objects(load_spec(spec_path)) if o["kind"] == kind))


def test_validator_flags_a_misspelt_field_as_pruned():
    cq = _first("ClusterQueue")
    cq["spec"]["preemption"]["reclaimWithinCohrt"] = "Any"
    assert any("reclaimWithinCohrt: would be pruned" in p for p in validate(cq))
    js = _jobsets()[0]
    k8s_schema.jobset_pod_spec(js)["containers"][0]["resource"] = {}
    assert any("containers[0].resource: would be pruned" in p for p in validate(js))


def test_validator_flags_wrong_enum_and_cel_rules():
    cq = _first("ClusterQueue")
    cq["spec"]["preemption"]["withinClusterQueue"] = "Sometimes"
    assert any("Sometimes" in p for p in validate(cq))
    cq = _first("ClusterQueue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    assert any("coveredResources" in p for p in validate(cq))
    topo = copy.deepcopy(next(o for o in all_objects(load_spec(EXAMPLES / "default.yaml"))
                              if o["metadata"]["name"] == "openpod-network"))
    topo["spec"]["levels"].reverse()
    assert any("hostname" in p for p in validate(topo))


def test_validator_flags_core_object_problems():
    ns = _first("Namespace")
    ns["metadata"]["lables"] = {}
    assert any("lables: unknown field" in p for p in validate(ns))
    rb = _first("RoleBinding")
    del rb["roleRef"]
    assert any("roleRef" in p for p in validate(rb))
    role = _first("Role")
    role["rules"][0]["verbs"] = "get"
    assert any("expected a list" in p for p in validate(role))
