"""Kubernetes RBAC as the API server applies it before admission, for the team user of the admission corpus.

Authorization runs before admission (kubernetes.io/docs/reference/access-authn-authz/controlling-access/: a request
is authenticated, then authorized, then passes admission control; checked 2026-11-28): a request the team Role does
not grant never reaches a ValidatingAdmissionPolicy. A PolicyRule matches when its apiGroups, resources and verbs
each contain the request's (``*`` for any); a subresource is the resource ``<resource>/<subresource>`` and is
granted only by that name, ``*/<subresource>`` or ``*`` (kubernetes/kubernetes@v1.34.0
pkg/apis/rbac/v1/evaluation_helpers.go VerbMatches, APIGroupMatches, ResourceMatches :52-78, ResourceNameMatches). The verb is the HTTP request's: POST
create, PUT update, PATCH patch, DELETE delete; admission sees PUT and PATCH both as UPDATE.
"""

from __future__ import annotations

from tests.governance.vap import Request

_VERBS = {"CREATE": "create", "UPDATE": "update", "DELETE": "delete", "CONNECT": "create"}


def verb_of(req: Request) -> str:
    return req.verb or _VERBS[req.operation]


def rule_allows(rule: dict, req: Request) -> bool:
    resource = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
    groups, resources, verbs = rule.get("apiGroups", []), rule.get("resources", []), rule.get("verbs", [])
    if "*" not in groups and req.group not in groups:
        return False
    if "*" not in verbs and verb_of(req) not in verbs:
        return False
    if not ("*" in resources or resource in resources
            or (req.subresource and f"*/{req.subresource}" in resources)):
        return False
    return not rule.get("resourceNames") or req.name in rule["resourceNames"]


def denial(rules, req: Request) -> str | None:
    """None when a rule grants the request, else the API server's 403 in short."""
    if any(rule_allows(r, req) for r in rules):
        return None
    resource = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
    return f"forbidden by RBAC: {req.user} cannot {verb_of(req)} {resource} in namespace {req.namespace}"
