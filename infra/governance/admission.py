"""Admission policies: what the API server refuses in team namespaces, as ValidatingAdmissionPolicy (core CEL).

One module for every admission rule the platform deploys (governance and, next, pod security), so each
rule is one expression a reader can audit and tests evaluate with a CEL interpreter exactly as deployed.

``openpod-team-queue`` (issue 11): in a namespace carrying the team label, a JobSet or Job must name the
team's own LocalQueue in ``kueue.x-k8s.io/queue-name`` - on create and on every update, so the label
can be neither omitted, pointed at another team's queue, nor removed while the job waits suspended.
Bare Pods are refused: Kueue's pod integration is off (``install.FRAMEWORKS``), so a bare Pod would
run outside every quota. Requests from the controllers that create and update the children of
admitted jobs (service accounts of kube-system, the Kueue and the JobSet namespaces) are not matched.
Together with Kueue's ``manageJobsWithoutQueueName`` over team namespaces (``install.py``), no job in a
team namespace starts without Kueue's admission.
"""

from __future__ import annotations

from typing import Any

from infra.governance.install import JOBSET_NAMESPACE, KUEUE_NAMESPACE
from infra.governance.queues import TEAM_LABEL

API = "admissionregistration.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TEAM_QUEUE_POLICY = "openpod-team-queue"
# Service-account namespaces whose controllers create and update children of admitted jobs.
CONTROLLER_NAMESPACES = ("kube-system", KUEUE_NAMESPACE, JOBSET_NAMESPACE)

NOT_A_CONTROLLER = "!(" + " || ".join(
    f"request.userInfo.username.startsWith('system:serviceaccount:{ns}:')" for ns in CONTROLLER_NAMESPACES) + ")"


def team_queue_policy() -> list[dict[str, Any]]:
    """The policy and its binding (the LocalQueue of a team is named after the team: queues.local_queue_name)."""
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
            ],
            "validations": [
                {"expression": "object.kind != 'Pod'", "reason": "Forbidden",
                 "message": "bare Pods are not allowed in team namespaces: submit a JobSet or Job (openpod submit) "
                            f"with {QUEUE_LABEL} set to the team's queue, so the team's quota applies"},
                {"expression": "object.kind == 'Pod' || variables.queue == variables.team", "reason": "Forbidden",
                 "messageExpression": f"'{QUEUE_LABEL} must be ' + variables.team + ' (the LocalQueue of team ' + "
                                      f"variables.team + '), got ' + (variables.queue == '' ? 'none' : "
                                      f"variables.queue)"},
            ],
        },
    }
    binding = {
        "apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": TEAM_QUEUE_POLICY, "labels": {"app.kubernetes.io/managed-by": "openpod"}},
        "spec": {"policyName": TEAM_QUEUE_POLICY, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def admission_objects() -> list[dict[str, Any]]:
    """Every admission policy and binding the platform deploys."""
    return team_queue_policy()
