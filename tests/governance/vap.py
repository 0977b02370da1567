"""Evaluate a deployed ValidatingAdmissionPolicy on a sample request with a CEL interpreter (cel-python).

Follows the ValidatingAdmissionPolicy rules (kubernetes.io/docs/reference/access-authn-authz/
validating-admission-policy/): the namespaceSelector and resource rules select the request, every
matchCondition must be true, variables are evaluated in order, and the request is denied when any
validation is false.
"""

from __future__ import annotations

import celpy

ENV = celpy.Environment()
TEAM_USER = "arn:aws:sts::111122223333:assumed-role/ml-engineers/alice"


def _eval(expr: str, activation: dict):
    return ENV.program(ENV.compile(expr)).evaluate(activation)


def _selected(policy: dict, obj: dict, namespace_labels: dict, subresource: str) -> bool:
    sel = policy["spec"]["matchConstraints"].get("namespaceSelector", {}).get("matchExpressions", [])
    assert all(e["operator"] == "Exists" for e in sel)
    group = obj["apiVersion"].rpartition("/")[0]
    plural = obj["kind"].lower() + "s" + (f"/{subresource}" if subresource else "")
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    return all(e["key"] in namespace_labels for e in sel) and any(
        group in r["apiGroups"] and plural in r["resources"] for r in rules)


def admit(policy: dict, obj: dict, *, namespace_labels: dict, user: str = TEAM_USER, old: dict | None = None,
          subresource: str = "", extra: dict[str, list[str]] | None = None) -> list[str]:
    """The denial messages of ``policy`` for this request ([] = allowed)."""
    if not _selected(policy, obj, namespace_labels, subresource):
        return []
    act = {"object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old),
           "namespaceObject": celpy.json_to_cel({"metadata": {"name": obj["metadata"].get("namespace", ""),
                                                               "labels": namespace_labels}}),
           "request": celpy.json_to_cel({"userInfo": {"username": user, **({"extra": extra} if extra else {})},
                                         "operation": "UPDATE" if old else "CREATE"})}
    if not all(bool(_eval(c["expression"], act)) for c in policy["spec"].get("matchConditions", [])):
        return []
    variables = celpy.celtypes.MapType({})
    for v in policy["spec"].get("variables", []):
        variables[celpy.celtypes.StringType(v["name"])] = _eval(v["expression"], {**act, "variables": variables})
    act["variables"] = variables
    denied = []
    for v in policy["spec"]["validations"]:
        if not bool(_eval(v["expression"], act)):
            denied.append(str(_eval(v["messageExpression"], act)) if "messageExpression" in v else v["message"])
    return denied
