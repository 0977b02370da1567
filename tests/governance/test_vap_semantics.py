"""The evaluator in tests/governance/vap.py follows the documented ValidatingAdmissionPolicy semantics
(https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/ and the
admissionregistration.k8s.io/v1 reference, checked 2026-11-25): each rule here is one sentence of those pages."""

from __future__ import annotations

import pytest

from tests.governance.vap import Request, evaluate, selector_matches


def policy(validations, *, rules=None, failure="Fail", conditions=None, variables=None, ns_sel=None, obj_sel=None):
    c = {"resourceRules": rules or [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                                     "operations": ["CREATE", "UPDATE"]}]}
    if ns_sel:
        c["namespaceSelector"] = ns_sel
    if obj_sel:
        c["objectSelector"] = obj_sel
    spec = {"failurePolicy": failure, "matchConstraints": c, "validations": validations}
    if conditions:
        spec["matchConditions"] = conditions
    if variables:
        spec["variables"] = variables
    return {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"}, "spec": spec}


def binding(actions=("Deny",), match=None):
    spec = {"policyName": "p", "validationActions": list(actions)}
    if match:
        spec["matchResources"] = match
    return {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "p"}, "spec": spec}


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "t", "labels": {"a": "1"}},
       "spec": {}}
DENY = [{"expression": "false", "message": "no"}]


def req(**kw):
    base = dict(operation="CREATE", resource="pods", namespace="t", name="x", object=POD, namespace_labels={"team": "t"})
    return Request(**{**base, **kw})


def denied(objs, r):
    return [m for d in evaluate(objs, r) for m in d.denied]


def test_a_policy_without_a_binding_does_nothing():
    assert evaluate([policy(DENY)], req()) == []


@pytest.mark.parametrize("resources, sub, matched", [
    (["pods"], "", True), (["pods"], "status", False), (["pods/*"], "status", True), (["pods/*"], "", True),
    (["*"], "", True), (["*"], "binding", False), (["*/status"], "status", True), (["*/*"], "eviction", True),
])
def test_resource_rules_and_subresources(resources, sub, matched):
    """``res/sub`` matches when each half is ``*`` or equal, an absent half being the empty subresource
    (kubernetes@v1.34.0 staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go,
    Matcher.resource), so ``pods/*`` also matches ``pods`` itself."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "resources": resources, "operations": ["*"]}]
    assert bool(denied([policy(DENY, rules=rules), binding()], req(subresource=sub))) is matched


def test_operations_are_matched():
    assert denied([policy(DENY), binding()], req(operation="DELETE", object=None, old_object=POD)) == []


@pytest.mark.parametrize("op, labels, ok", [
    ("In", {"team": "t"}, True), ("NotIn", {"team": "t"}, False), ("Exists", {}, False), ("DoesNotExist", {}, True),
])
def test_label_selector_operators(op, labels, ok):
    e = {"key": "team", "operator": op}
    if op in ("In", "NotIn"):
        e["values"] = ["t"]
    assert selector_matches({"matchExpressions": [e]}, labels) is ok


def test_namespace_selector_skips_other_namespaces_and_never_cluster_scoped_objects():
    p = policy(DENY, ns_sel={"matchLabels": {"team": "t"}},
               rules=[{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "nodes"], "operations": ["*"]}])
    assert denied([p, binding()], req(namespace_labels={})) == []
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    assert denied([p, binding()], req(resource="nodes", namespace="", object=node, namespace_labels=None)) == ["no"]


def test_object_selector_matches_the_old_or_the_new_object():
    p = policy(DENY, obj_sel={"matchLabels": {"a": "1"}})
    unlabelled = {**POD, "metadata": {"name": "x", "namespace": "t"}}
    assert denied([p, binding()], req(operation="UPDATE", object=unlabelled, old_object=POD)) == ["no"]
    assert denied([p, binding()], req(object=unlabelled)) == []


def test_match_conditions_false_skip_and_errors_follow_the_failure_policy():
    false = [{"name": "f", "expression": "false"}]
    error = [{"name": "e", "expression": "object.nope == 1"}]
    assert denied([policy(DENY, conditions=false), binding()], req()) == []
    assert denied([policy(DENY, conditions=error), binding()], req()) != []
    assert denied([policy(DENY, conditions=error, failure="Ignore"), binding()], req()) == []
    assert denied([policy(DENY, conditions=error + false), binding()], req()) == []   # a false one wins


def test_validation_errors_follow_the_failure_policy_and_variables_are_lazy():
    v = [{"name": "bad", "expression": "object.nope"}]
    uses = [{"expression": "variables.bad == 1", "message": "m"}]
    assert denied([policy(uses, variables=v), binding()], req()) != []
    assert denied([policy(uses, variables=v, failure="Ignore"), binding()], req()) == []
    assert denied([policy([{"expression": "true"}], variables=v), binding()], req()) == []   # never read


def test_message_expression_falls_back_to_message_then_to_the_expression():
    assert denied([policy([{"expression": "false", "messageExpression": "'m' + 'x'"}]), binding()], req()) == ["mx"]
    assert denied([policy([{"expression": "false", "messageExpression": "''", "message": "m"}]), binding()],
                  req()) == ["m"]
    assert denied([policy([{"expression": "false"}]), binding()], req()) == ["failed expression: false"]


def test_only_deny_bindings_reject_and_binding_match_resources_narrow():
    (d,) = evaluate([policy(DENY), binding(("Warn", "Audit"))], req())
    assert d.denied == [] and d.warnings == ["no"]
    narrow = {"namespaceSelector": {"matchLabels": {"team": "other"}}}
    assert denied([policy(DENY), binding(match=narrow)], req()) == []
