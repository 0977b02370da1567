"""Evaluate the ValidatingAdmissionPolicies a platform installs on an admission request, with cel-python.

Follows the documented semantics (https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/
and the admissionregistration.k8s.io/v1 API reference, checked 2026-11-25), in the API server's order:

* a policy acts only through a binding naming it (``spec.policyName``); a policy without one does nothing;
* ``matchConstraints`` of the policy and the binding's ``matchResources`` must both select the request:
  ``resourceRules`` (apiGroups, apiVersions, operations, resources with ``*``, ``pods/*``, ``*/status``,
  ``*/*``; a bare ``*`` or ``pods`` never matches a subresource; scope; resourceNames), ``excludeResourceRules``,
  ``namespaceSelector`` (matched on the request's namespace; on the object itself for a Namespace; a
  cluster-scoped object other than a Namespace is never skipped), ``objectSelector`` (matched if the old or
  the new object matches; a null object does not match);
* ``matchConditions`` in order: any false skips the policy; an error, with none false, rejects under
  ``failurePolicy: Fail`` (the default) and skips under ``Ignore``;
* ``variables`` are lazy: an error in one only matters to an expression that reads it;
* each validation false denies with ``messageExpression`` (when it evaluates to a non-empty string),
  else ``message``, else ``failed expression: <expr>``; an error is a failure handled by ``failurePolicy``;
* ``validationActions``: ``Deny`` rejects, ``Warn`` and ``Audit`` do not.

``object`` is null on DELETE, ``oldObject`` on CREATE; ``namespaceObject`` is null for cluster-scoped
resources; ``request`` carries the AdmissionRequest attributes (operation, userInfo, kind, resource,
subResource, name, namespace, dryRun).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import celpy

ENV = celpy.Environment()
TEAM_USER = "arn:aws:sts::111122223333:assumed-role/ml-engineers/alice"
_PROGRAMS: dict[str, Any] = {}


@dataclass
class Request:
    """One admission request as the API server presents it to validating admission."""

    operation: str                       # CREATE, UPDATE, DELETE, CONNECT
    resource: str                        # plural, e.g. "pods"
    group: str = ""
    version: str = "v1"
    subresource: str = ""                # "status", "binding", "eviction", ...
    namespace: str = ""                  # "" for cluster-scoped
    name: str = ""
    object: dict | None = None
    old_object: dict | None = None
    user: str = TEAM_USER
    groups: list[str] = field(default_factory=list)
    extra: dict[str, list[str]] = field(default_factory=dict)
    namespace_labels: dict[str, str] | None = None   # labels of the request's Namespace object
    kind: str = ""
    verb: str = ""                       # the HTTP verb RBAC checks (patch, update, ...); "" = from operation


@dataclass
class Decision:
    policy: str
    denied: list[str]          # messages of Deny bindings
    warnings: list[str]


def _program(expr: str):
    if expr not in _PROGRAMS:
        _PROGRAMS[expr] = ENV.program(ENV.compile(expr))
    return _PROGRAMS[expr]


def _eval(expr: str, activation: dict):
    """The value, or the CELEvalError (errors are values in CEL: ``true || error`` is true)."""
    try:
        return _program(expr).evaluate(activation)
    except celpy.CELEvalError as e:
        return e


def _is_error(v) -> bool:
    return isinstance(v, (celpy.CELEvalError, Exception))


def _labels(obj: dict | None) -> dict[str, str] | None:
    if obj is None:
        return None
    return (obj.get("metadata") or {}).get("labels") or {}


def selector_matches(selector: dict | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector; empty (or absent) selects everything."""
    if not selector:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown selector operator {op}")
    return True


def _resource_matches(pattern: str, resource: str, subresource: str) -> bool:
    res, _, sub = pattern.partition("/")
    if (res != "*" and res != resource):
        return False
    if not _:
        return subresource == ""          # "pods" and "*" never match a subresource
    return sub == "*" or sub == subresource


def _rule_matches(rule: dict, req: Request) -> bool:
    ops = rule.get("operations") or []
    if "*" not in ops and req.operation not in ops:
        return False
    if "*" not in rule.get("apiGroups", []) and req.group not in rule.get("apiGroups", []):
        return False
    if "*" not in rule.get("apiVersions", []) and req.version not in rule.get("apiVersions", []):
        return False
    if not any(_resource_matches(p, req.resource, req.subresource) for p in rule.get("resources", [])):
        return False
    scope = rule.get("scope", "*")
    if scope == "Cluster" and req.namespace or scope == "Namespaced" and not req.namespace:
        return False
    names = rule.get("resourceNames")
    return not names or req.name in names


def _constraints_match(c: dict | None, req: Request, *, policy_side: bool) -> bool:
    if c is None:
        return True
    rules = c.get("resourceRules")
    if policy_side and not rules:
        return False                          # a policy must name its resources
    if rules and not any(_rule_matches(r, req) for r in rules):
        return False
    if any(_rule_matches(r, req) for r in c.get("excludeResourceRules") or []):
        return False
    ns_sel = c.get("namespaceSelector")
    if ns_sel:
        if req.resource == "namespaces" and not req.subresource:
            ns_labels = _labels(req.object if req.object is not None else req.old_object) or {}
        elif not req.namespace:
            ns_labels = None                  # other cluster-scoped objects: never skipped
        else:
            if req.namespace_labels is None:
                raise ValueError(f"request in namespace {req.namespace} needs namespace_labels")
            ns_labels = req.namespace_labels
        if ns_labels is not None and not selector_matches(ns_sel, ns_labels):
            return False
    obj_sel = c.get("objectSelector")
    if obj_sel:
        candidates = [lb for lb in (_labels(req.object), _labels(req.old_object)) if lb is not None]
        if not any(selector_matches(obj_sel, lb) for lb in candidates):
            return False
    return True


def _activation(req: Request) -> dict:
    ns_obj = None
    if req.namespace:
        ns_obj = {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": req.namespace, "labels": dict(req.namespace_labels or {})}}
    user = {"username": req.user, "groups": list(req.groups)}
    if req.extra:
        user["extra"] = req.extra
    request = {"operation": req.operation, "userInfo": user, "name": req.name, "namespace": req.namespace,
               "kind": {"group": req.group, "version": req.version, "kind": req.kind},
               "resource": {"group": req.group, "version": req.version, "resource": req.resource},
               "subResource": req.subresource, "dryRun": False}
    return {"object": celpy.json_to_cel(req.object), "oldObject": celpy.json_to_cel(req.old_object),
            "namespaceObject": celpy.json_to_cel(ns_obj), "request": celpy.json_to_cel(request),
            "params": celpy.json_to_cel(None)}


def evaluate_policy(policy: dict, binding: dict, req: Request) -> Decision | None:
    """The decision of one policy through one binding, or None when it does not match the request."""
    spec, bspec = policy["spec"], binding["spec"]
    name = policy["metadata"]["name"]
    if not _constraints_match(spec.get("matchConstraints"), req, policy_side=True):
        return None
    if not _constraints_match(bspec.get("matchResources"), req, policy_side=False):
        return None
    fail = spec.get("failurePolicy", "Fail") == "Fail"
    act = _activation(req)
    errors = []
    for cond in spec.get("matchConditions") or []:
        v = _eval(cond["expression"], act)
        if _is_error(v):
            errors.append(f"matchCondition {cond['name']}: {v}")
        elif not bool(v):
            return None
    denied: list[str] = []
    if errors:
        return Decision(name, errors if fail else [], [])
    variables = celpy.celtypes.MapType({})
    act["variables"] = variables
    for var in spec.get("variables") or []:
        variables[celpy.celtypes.StringType(var["name"])] = _eval(var["expression"], act)
    for val in spec.get("validations") or []:
        v = _eval(val["expression"], act)
        if _is_error(v):
            if fail:
                denied.append(f"expression '{val['expression']}' resulted in error: {v}")
            continue
        if bool(v):
            continue
        msg = None
        if "messageExpression" in val:
            m = _eval(val["messageExpression"], act)
            msg = str(m) if not _is_error(m) and str(m).strip() else None
        denied.append(msg or val.get("message") or f"failed expression: {val['expression']}")
    actions = bspec.get("validationActions") or []
    return Decision(name, denied if "Deny" in actions else [], denied if "Warn" in actions else [])


def evaluate(objects: list[dict], req: Request) -> list[Decision]:
    """Decisions of every bound policy among ``objects`` that matches ``req``."""
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    out = []
    for b in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"):
        policy = policies.get(b["spec"]["policyName"])
        if policy is None:
            continue
        d = evaluate_policy(policy, b, req)
        if d is not None:
            out.append(d)
    return out


def denials(objects: list[dict], req: Request) -> list[str]:
    """Every message that rejects ``req`` ([] = admitted)."""
    return [m for d in evaluate(objects, req) for m in d.denied]


# ---------------------------------------------------------------------------- the older single-policy helper

_PLURALS = {"Pod": ("", "pods"), "JobSet": ("jobset.x-k8s.io", "jobsets"), "Job": ("batch", "jobs"),
            "Node": ("", "nodes"), "Secret": ("", "secrets"), "Service": ("", "services"),
            "Namespace": ("", "namespaces")}


def request_for(obj: dict, *, namespace_labels: dict | None, user: str = TEAM_USER, old: dict | None = None,
                subresource: str = "", extra: dict | None = None, operation: str | None = None) -> Request:
    group, plural = _PLURALS[obj["kind"]]
    version = obj["apiVersion"].rpartition("/")[2]
    ns = obj["metadata"].get("namespace", "")
    return Request(operation=operation or ("UPDATE" if old else "CREATE"), resource=plural, group=group,
                   version=version, subresource=subresource, namespace=ns, name=obj["metadata"].get("name", ""),
                   object=obj, old_object=old, user=user, extra=extra or {},
                   namespace_labels=namespace_labels if ns else None, kind=obj["kind"])


def admit(policy: dict, obj: dict, *, namespace_labels: dict, user: str = TEAM_USER, old: dict | None = None,
          subresource: str = "", extra: dict[str, list[str]] | None = None) -> list[str]:
    """The denial messages of ``policy`` (through a Deny binding of its name) for this request ([] = allowed)."""
    binding = {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": policy["metadata"]["name"]},
               "spec": {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}}
    req = request_for(obj, namespace_labels=namespace_labels, user=user, old=old, subresource=subresource,
                      extra=extra)
    d = evaluate_policy(policy, binding, req)
    return d.denied if d else []


__all__ = ["Request", "Decision", "evaluate", "evaluate_policy", "denials", "admit", "request_for",
           "selector_matches"]
