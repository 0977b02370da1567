"""How findings become node state in Kubernetes (through the narrow boundary).

A finding that needs a node action sets the health-status label
(UnschedulablePendingReboot / UnschedulablePendingReplacement; replacement
wins), the unhealthy NoSchedule taint, the AcceleratorHealthy=False condition
and the fault annotation the remediation controller acts on, plus an Event.
A finding with action none only makes an Event. Marking is idempotent: the
same or a weaker fault seen again writes nothing.
"""

from __future__ import annotations

import json
import time

from openpod_core import labels as L
from node_agent.findings import Action, Finding
from node_agent.kube import Cluster, Condition, Conflict, Taint

# Annotations (state the controller reads and resumes from).
FAULT = f"{L.DOMAIN}/fault"                  # JSON: the finding that asked for action
REMEDIATION = f"{L.DOMAIN}/remediation"      # JSON: controller progress (see controller.py)
REBOOTS = f"{L.DOMAIN}/reboot-history"       # JSON list: [{"fault", "at"}]
DEEP_CHECK = f"{L.DOMAIN}/deep-check"        # JSON: last deep check result
DEEP_CHECK_REQUEST = f"{L.DOMAIN}/deep-check-request"  # any value: run the deep check now (on demand)

WRITE_ATTEMPTS = 5  # re-read-and-decide attempts when a node write meets 409 Conflict

STATUS_FOR = {Action.REBOOT: L.HEALTH_PENDING_REBOOT, Action.REPLACE: L.HEALTH_PENDING_REPLACEMENT}
ACTION_FOR = {v: k for k, v in STATUS_FOR.items()}


def current_action(labels: dict[str, str]) -> Action:
    return ACTION_FOR.get(labels.get(L.HEALTH_STATUS, ""), Action.NONE)


def with_taint(taints: list[Taint], key: str, value: str = "", effect: str = "NoSchedule") -> list[Taint]:
    if any(t.key == key for t in taints):
        return taints
    return taints + [Taint(key, value, effect)]


def without_taint(taints: list[Taint], key: str) -> list[Taint]:
    return [t for t in taints if t.key != key]


def mark(cluster: Cluster, node_name: str, finding: Finding, now: float | None = None) -> bool:
    """Record one finding on the node. Returns True if the node's health state changed."""
    now = time.time() if now is None else now
    message = f"[{finding.action.value}] {finding.evidence}"
    if finding.action is Action.NONE:
        kind = "Normal" if finding.severity.value == "info" else "Warning"
        cluster.create_event(node_name, _reason(finding.fault), message, kind)
        return False
    fault = {"rule": finding.rule, "fault": finding.fault, "action": finding.action.value,
             "evidence": finding.evidence[:512], "device": finding.device, "at": now}
    for attempt in range(WRITE_ATTEMPTS):
        node = cluster.get_node(node_name)
        have = current_action(node.labels)
        recurrence = REMEDIATION in node.annotations and FAULT not in node.annotations  # after the reboot
        if have.rank >= finding.action.rank and node.has_taint(L.UNHEALTHY_TAINT) and not recurrence:
            return False  # already marked at least this strongly: no new write, no Event spam from polls
        # A stronger verdict already recorded is never downgraded: the label keeps the strongest action.
        status = STATUS_FOR[max(have, finding.action, key=lambda a: a.rank)] if have is not Action.NONE \
            else STATUS_FOR[finding.action]
        try:
            # Only onto the node as read: a controller write in between (e.g. the startup taint of a reboot)
            # is a 409, and the decision is taken again on the fresh node.
            cluster.patch_node(node_name, labels={L.HEALTH_STATUS: status},
                               annotations={FAULT: json.dumps(fault, sort_keys=True)},
                               taints=with_taint(node.taints, L.UNHEALTHY_TAINT, finding.action.value),
                               resource_version=node.resource_version)
            break
        except Conflict:
            if attempt == WRITE_ATTEMPTS - 1:
                raise
    cluster.create_event(node_name, _reason(finding.fault), message, "Warning")
    cluster.set_condition(node_name, Condition(L.HEALTH_CONDITION, "False", _reason(finding.fault),
                                               finding.evidence[:1024]))
    return True


def mark_healthy(cluster: Cluster, node_name: str, message: str) -> None:
    """Deep check passed: startup taint off, Schedulable, condition True (unless a fault is pending)."""
    for attempt in range(WRITE_ATTEMPTS):
        node = cluster.get_node(node_name)
        if FAULT in node.annotations:
            return  # a fault not yet taken up by the controller keeps the node out
        try:
            cluster.patch_node(node_name, labels={L.HEALTH_STATUS: L.HEALTH_SCHEDULABLE},
                               taints=without_taint(node.taints, L.STARTUP_TAINT),
                               resource_version=node.resource_version)
            break
        except Conflict:
            if attempt == WRITE_ATTEMPTS - 1:
                raise
    cluster.set_condition(node_name, Condition(L.HEALTH_CONDITION, "True", "HealthCheckPassed", message))
    cluster.create_event(node_name, "HealthCheckPassed", message, "Normal")


def _reason(fault: str) -> str:
    """Kubernetes reasons are CamelCase: gpu-fell-off-bus -> GpuFellOffBus."""
    return "".join(p.capitalize() for p in fault.split("-"))
