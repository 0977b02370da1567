"""The deployed admission policy, evaluated with a CEL interpreter (cel-python) on sample requests.

The expressions are read from the very objects ``all_objects`` returns (what CDK and ``openpod manifests``
apply); the evaluation follows the ValidatingAdmissionPolicy rules: the namespaceSelector and resource rules
select the request, every matchCondition must be true, variables are evaluated in order, and the request is
denied when any validation is false.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from infra.governance import all_objects
from infra.governance.admission import QUEUE_LABEL, TEAM_QUEUE_POLICY
from infra.governance.jobset import PRIORITY_LABEL
from infra.governance.install import kueue_manager_config
from infra.governance.queues import TEAM_LABEL, local_queue_name
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES
from tests.governance import vap
from tests.governance.k8s_schema import validate
from tests.governance.vap import TEAM_USER

SPEC = load_spec(EXAMPLES / "default.yaml")
OBJS = all_objects(SPEC)
POLICY = next(o for o in OBJS if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == TEAM_QUEUE_POLICY)


def admit(obj: dict, *, namespace_labels: dict, user: str = TEAM_USER, old: dict | None = None) -> list[str]:
    """The team-queue policy's denial messages for this request ([] = allowed)."""
    return vap.admit(POLICY, obj, namespace_labels=namespace_labels, user=user, old=old)


def jobset(ns: str, queue: str | None, priority: str | None = None) -> dict:
    labels = {QUEUE_LABEL: queue} if queue is not None else {}
    if priority is not None:
        labels[PRIORITY_LABEL] = priority
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "llama", "namespace": ns, "labels": labels}, "spec": {}}


TEAM_NS = {TEAM_LABEL: "research"}


def test_a_jobset_on_its_teams_queue_is_admitted():
    assert local_queue_name("research") == "research"
    assert admit(jobset("research", "research"), namespace_labels=TEAM_NS) == []


def test_a_jobset_without_a_queue_is_denied():
    assert admit(jobset("research", None), namespace_labels=TEAM_NS) == [
        f"{QUEUE_LABEL} must be research (the LocalQueue of team research), got none"]


def test_another_teams_queue_is_denied():
    assert admit(jobset("research", "product"), namespace_labels=TEAM_NS) == [
        f"{QUEUE_LABEL} must be research (the LocalQueue of team research), got product"]


def test_removing_the_queue_label_while_suspended_is_denied():
    old = jobset("research", "research")
    new = copy.deepcopy(old)
    del new["metadata"]["labels"][QUEUE_LABEL]
    assert admit(new, namespace_labels=TEAM_NS, old=old) != []


def test_a_bare_pod_is_denied_in_a_team_namespace():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "research",
                                                          "labels": {QUEUE_LABEL: "research"}}}
    assert admit(pod, namespace_labels=TEAM_NS)[0].startswith("bare Pods are not allowed in team namespaces")


def test_controllers_creating_children_of_admitted_jobs_are_not_matched():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "llama-w-0", "namespace": "research"}}
    assert admit(job, namespace_labels=TEAM_NS, user="system:serviceaccount:jobset-system:jobset-controller-manager") == []
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llama-w-0-0", "namespace": "research"}}
    assert admit(pod, namespace_labels=TEAM_NS, user="system:serviceaccount:kube-system:job-controller") == []
    assert admit(job, namespace_labels=TEAM_NS) != []            # the same Job from a team user is not


def test_namespaces_without_the_team_label_are_not_matched():
    assert admit(jobset("kube-system", None), namespace_labels={}) == []


def test_the_policy_objects_validate_against_the_kubernetes_api_schema():
    for o in OBJS:
        if o["apiVersion"].startswith("admissionregistration.k8s.io/"):
            assert validate(o) == [], o["kind"]
    bindings = {o["spec"]["policyName"]: o["spec"] for o in OBJS if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert bindings[TEAM_QUEUE_POLICY] == {"policyName": TEAM_QUEUE_POLICY, "validationActions": ["Deny"]}


def test_kueue_manages_jobs_without_a_queue_name_in_team_namespaces():
    cfg = kueue_manager_config()
    assert cfg["manageJobsWithoutQueueName"] is True
    assert cfg["managedJobsNamespaceSelector"] == {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}
    # and it is what the chart gets
    from infra.governance.install import kueue_values
    rendered = yaml.safe_load(kueue_values(SPEC)["managerConfig"]["controllerManagerConfigYaml"])
    assert rendered["manageJobsWithoutQueueName"] is True


def test_a_team_may_not_use_the_inference_priority_by_default():
    assert admit(jobset("research", "research", "training"), namespace_labels=TEAM_NS) == []
    assert admit(jobset("research", "research", "inference"), namespace_labels=TEAM_NS) == [
        f"{PRIORITY_LABEL} inference is not allowed for team research (teams[].allowed_priorities in the cluster spec)"]


def test_allowed_priorities_in_the_spec_widen_or_narrow_a_team():
    from infra.governance.admission import team_queue_policy
    from infra.spec.loading import parse_spec

    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["teams"][0]["allowed_priorities"] = ["inference"]
    policy = team_queue_policy(parse_spec(data))[0]
    allowed = next(v for v in policy["spec"]["variables"] if v["name"] == "allowed")["expression"]
    assert "'research': ['inference']" in allowed and "'product': ['experimentation', 'training', 'fine-tuning']" in allowed


def test_an_unknown_allowed_priority_is_one_clear_line():
    from infra.spec.base import SpecError
    from infra.spec.loading import parse_spec

    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["teams"][0]["allowed_priorities"] = ["urgent"]
    with pytest.raises(SpecError) as e:
        parse_spec(data, "bad.yaml")
    (line,) = [str(p) for p in e.value.problems]
    assert line.startswith("teams[0] (research).allowed_priorities: unknown priority 'urgent'; priorities are: ")
