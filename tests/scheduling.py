"""Kubernetes' taint and toleration matching, re-stated for the placement tests.

Derived from kubernetes@v1.34.0 (published as k8s.io/api and k8s.io/component-helpers v0.34.0):
``Toleration.ToleratesTaint`` (staging/src/k8s.io/api/core/v1/toleration.go:29-57): an empty effect matches
every effect, else the effects must be equal; an empty key matches every key (with operator Exists), else the
keys must be equal; operator Exists matches any value, Equal (or empty) only the same value.
``FindMatchingUntoleratedTaint`` (staging/src/k8s.io/component-helpers/scheduling/corev1/helpers.go:62-86):
a pod fits a node when every taint the filter keeps is tolerated by one of its tolerations; the scheduler's
TaintToleration filter keeps NoSchedule and NoExecute taints (pkg/scheduler/framework/plugins/tainttoleration/
taint_toleration.go, Filter), PreferNoSchedule only scores. Read 2026-11-27.
"""

from __future__ import annotations

from typing import Iterable, Mapping

# AWS::EKS::Nodegroup Taint.Effect (EKS API spelling) -> the Kubernetes effect the node carries.
EKS_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def node_taint(cfn: Mapping[str, str]) -> dict[str, str]:
    """A node group's ``Taints`` entry (Key, Value, Effect) as the Kubernetes taint on its nodes."""
    return {"key": cfn["Key"], "value": cfn.get("Value") or "", "effect": EKS_EFFECTS[cfn["Effect"]]}


def tolerates(toleration: Mapping[str, str], taint: Mapping[str, str]) -> bool:
    """``Toleration.ToleratesTaint``."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def untolerated(taints: Iterable[Mapping[str, str]], tolerations: Iterable[Mapping[str, str]] | None) -> list[dict]:
    """The NoSchedule/NoExecute taints none of ``tolerations`` tolerates: the pod fits only when this is empty."""
    tolerations = list(tolerations or [])
    return [dict(t) for t in taints if t["effect"] in ("NoSchedule", "NoExecute")
            and not any(tolerates(tol, t) for tol in tolerations)]
