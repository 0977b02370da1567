"""Admission policies: what the API server refuses in team namespaces, as ValidatingAdmissionPolicy (core CEL).

One module for every admission rule the platform deploys (governance and, next, pod security), so each
rule is one expression a reader can audit and tests evaluate with a CEL interpreter exactly as deployed.

``openpod-team-queue`` (issue 11): in a namespace carrying the team label, a JobSet or Job must name the
team's own LocalQueue in ``kueue.x-k8s.io/queue-name`` - on create and on every update, so the label
can be neither omitted, pointed at another team's queue, nor removed while the job waits suspended.
Bare Pods are refused: Kueue's pod integration is off (``install.FRAMEWORKS``), so a bare Pod would
run outside every quota. Requests from the controllers that create and update the children of
admitted jobs (service accounts of kube-system, the Kueue and the JobSet namespaces) are not matched.
The same policy refuses a ``kueue.x-k8s.io/priority-class`` the team may not use (``teams[].allowed_priorities``,
default every priority but ``inference``). Together with Kueue's ``manageJobsWithoutQueueName`` over team
namespaces (``install.py``), no job in a team namespace starts without Kueue's admission.
"""

from __future__ import annotations

from typing import Any

from infra.governance.install import JOBSET_NAMESPACE, KUEUE_NAMESPACE
from infra.governance.jobset import PRIORITY_LABEL
from infra.governance.queues import TEAM_LABEL
from infra.spec import ClusterSpec, TeamSpec

API = "admissionregistration.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TEAM_QUEUE_POLICY = "openpod-team-queue"
# Service-account namespaces whose controllers create and update children of admitted jobs.
CONTROLLER_NAMESPACES = ("kube-system", KUEUE_NAMESPACE, JOBSET_NAMESPACE)

# Priorities a team may not use unless its allowed_priorities names them.
DEFAULT_DENIED_PRIORITIES = ("inference",)

NOT_A_CONTROLLER = "!(" + " || ".join(
    f"request.userInfo.username.startsWith('system:serviceaccount:{ns}:')" for ns in CONTROLLER_NAMESPACES) + ")"


def allowed_priorities(spec: ClusterSpec, team: TeamSpec) -> list[str]:
    """The team's ``allowed_priorities``, or every priority of the spec but ``inference``."""
    if team.allowed_priorities is not None:
        return list(team.allowed_priorities)
    return [p.name for p in spec.priorities if p.name not in DEFAULT_DENIED_PRIORITIES]


def team_queue_policy(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The policy and its binding (the LocalQueue of a team is named after the team: queues.local_queue_name)."""
    allowed = "{" + ", ".join(f"'{t.name}': [{', '.join(repr(p) for p in allowed_priorities(spec, t))}]"
                              for t in spec.teams) + "}"
    policy = {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": TEAM_QUEUE_POLICY, "labels": {"app.kubernetes.io/managed-by": "openpod"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]},
                "resourceRules": [
                    {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "resources": ["jobsets"],
                     "operations": ["CREATE", "UPDATE"]},
                    {"apiGroups": ["batch"], "apiVersions": ["*"], "resources": ["jobs"],
                     "operations": ["CREATE", "UPDATE"]},
                    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]},
                ],
            },
            "matchConditions": [{"name": "not-a-platform-controller", "expression": NOT_A_CONTROLLER}],
            "variables": [
                {"name": "team", "expression": f"namespaceObject.metadata.labels['{TEAM_LABEL}']"},
                {"name": "queue", "expression": f"has(object.metadata.labels) && '{QUEUE_LABEL}' in "
                                                f"object.metadata.labels ? object.metadata.labels['{QUEUE_LABEL}'] : ''"},
                {"name": "priority", "expression": f"has(object.metadata.labels) && '{PRIORITY_LABEL}' in "
                                                   f"object.metadata.labels ? object.metadata.labels['{PRIORITY_LABEL}'] : ''"},
                {"name": "allowed", "expression": f"variables.team in {allowed} ? {allowed}[variables.team] : []"},
            ],
            "validations": [
                {"expression": "object.kind != 'Pod'", "reason": "Forbidden",
                 "message": "bare Pods are not allowed in team namespaces: submit a JobSet or Job (openpod submit) "
                            f"with {QUEUE_LABEL} set to the team's queue, so the team's quota applies"},
                {"expression": "object.kind == 'Pod' || variables.queue == variables.team", "reason": "Forbidden",
                 "messageExpression": f"'{QUEUE_LABEL} must be ' + variables.team + ' (the LocalQueue of team ' + "
                                      f"variables.team + '), got ' + (variables.queue == '' ? 'none' : "
                                      f"variables.queue)"},
                {"expression": "variables.priority == '' || variables.priority in variables.allowed",
                 "reason": "Forbidden",
                 "messageExpression": f"'{PRIORITY_LABEL} ' + variables.priority + ' is not allowed for team ' + "
                                      "variables.team + ' (teams[].allowed_priorities in the cluster spec)'"},
            ],
        },
    }
    binding = {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": TEAM_QUEUE_POLICY, "labels": {"app.kubernetes.io/managed-by": "openpod"}},
        "spec": {"policyName": TEAM_QUEUE_POLICY, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def admission_objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Every admission policy and binding the platform deploys."""
    return team_queue_policy(spec)
