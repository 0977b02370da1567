"""Prometheus metrics of the detector and the controller (one registry per process).

Counters start at 0 for every label set known when the process starts (the rules' findings, the checks,
each instance group's actions, reasons and results): ``increase()`` then sees the first event, which a
series born at 1 would hide. Kernel-log rules (the Xid catalog, ~590 rows) are the exception: their rows
appear at the first match, 590 zero series per node being too many; no alert reads their increase.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from node_agent.rules import RULES


# The detector's checks (node_agent/detector.py: ``_guard(name, ...)`` and its two follower threads).
DETECTOR_CHECKS = ("gpu", "neuron", "efa", "host", "scratch", "kernel-log", "nvml-events")
# Label values of the controller's counters (node_agent/controller.py, pair_runner.py).
REMEDIATION_ACTIONS = ("reboot", "replace")
FAILURE_REASONS = ("InstanceNotFound", "NoProviderID")
PAIR_RESULTS = ("passed", "skipped", "BelowFloor", "NoResult", "JobFailed", "TimedOut", "NotScheduled",
                "JobDeleted")


class DetectorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.findings = Counter("openpod_node_agent_findings", "Faults found, by rule", ["rule", "fault", "action"],
                                registry=r)
        self.check_errors = Counter("openpod_node_agent_check_errors", "Checks that could not run", ["check"],
                                    registry=r)
        self.last_run = Gauge("openpod_node_agent_check_last_run_timestamp_seconds", "When each check last ran",
                              ["check"], registry=r)
        self.node_action = Gauge("openpod_node_agent_node_action", "Action the node needs: 0 none, 1 reboot, "
                                 "2 replace", registry=r)
        self.kernel_lines = Counter("openpod_node_agent_kernel_lines", "Kernel log lines read", registry=r)
        self.scratch_removed = Counter("openpod_node_agent_scratch_removed", "Job scratch directories removed",
                                       registry=r)
        self.scratch_removed_bytes = Counter("openpod_node_agent_scratch_removed_bytes",
                                             "Bytes freed by removing job scratch directories", registry=r)
        self.deep_check_passed = Gauge("openpod_node_agent_deep_check_passed", "1 if the last deep check passed",
                                       registry=r)
        # The efa driver's cumulative hw_counters (bytes or events, per counter): a gauge holding the driver's
        # value, so rate() reads it; node_exporter does not export these (facts: node-exporter.infiniband-efa).
        self.efa_counter = Gauge("openpod_node_agent_efa_counter", "An EFA device's hw_counters value",
                                 ["device", "counter"], registry=r)
        self.efa_port_active = Gauge("openpod_node_agent_efa_port_active", "1 if the EFA device's port 1 is ACTIVE",
                                     ["device"], registry=r)
        for rule in RULES.values():
            if not rule.probe.startswith("kernel-log"):
                self.findings.labels(rule.id, rule.fault, rule.action.value)
        for check in DETECTOR_CHECKS:
            self.check_errors.labels(check)


# Remediations take minutes (reboot + deep check) to hours (DCGM level 4, a drain deadline, an ASG launch).
DURATION_BUCKETS = (60, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800, 14400, 21600, 43200, 86400)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.remediations = Counter("openpod_remediations", "Remediation actions taken", ["group", "action"],
                                    registry=r)
        self.in_flight = Gauge("openpod_remediations_in_flight", "Nodes being remediated", ["group"], registry=r)
        self.budget_blocked = Gauge("openpod_remediation_budget_blocked", "Nodes waiting because the group's "
                                    "budget is used up", ["group"], registry=r)
        self.escalations = Counter("openpod_remediation_escalations", "Reboots escalated to replacement",
                                   ["group"], registry=r)
        self.spare_promotions = Counter("openpod_hot_spare_promotions", "Hot spares put into service", ["group"],
                                        registry=r)
        self.errors = Counter("openpod_remediation_errors", "Remediation steps that failed for one node "
                              "(cloud or API error); retried, other nodes go on", ["group"], registry=r)
        self.conflicts = Counter("openpod_remediation_conflicts", "Node writes refused with 409 Conflict (the node "
                                 "changed since it was read); re-read and decided again", ["group"], registry=r)
        self.leader = Gauge("openpod_remediation_leader", "1 if this controller replica holds the Lease and acts",
                            registry=r)
        self.failed = Counter("openpod_remediation_failures", "Remediations that reached the terminal failed state "
                              "(reason: InstanceNotFound, NoProviderID)", ["group", "reason"], registry=r)
        self.failed_nodes = Gauge("openpod_remediation_failed_nodes", "Nodes in the terminal failed state (cordoned, "
                                  "waiting for an operator)", ["group"], registry=r)
        # Issue 14 documents this and alerts on it under this exact name and labels: keep them.
        self.duration = Histogram(
            "openpod_remediation_duration_seconds",
            "Seconds from fault detection to the end of its remediation: back in service after a reboot "
            "(outcome recovered), replaced node gone (replaced), or given up (failed)",
            ["group", "action", "outcome"], buckets=DURATION_BUCKETS, registry=r)
        self.pair_checks = Counter("openpod_pair_checks", "Two-node all-reduce checks of new or rebooted nodes, by "
                                   "result (passed, skipped, BelowFloor, NoResult, JobFailed, TimedOut)",
                                   ["group", "result"], registry=r)
        self.pair_held = Gauge("openpod_pair_check_held_nodes", "Nodes held out of service until their two-node "
                               "check passes (waiting or running)", ["group"], registry=r)
        self.drain_timeouts = Counter("openpod_drain_deadline_exceeded", "Drains that hit their deadline",
                                      ["group"], registry=r)

    def known_groups(self, groups) -> None:
        """Start every counter and gauge of each instance group at 0 (the controller's configured groups)."""
        for g in groups:
            for action in REMEDIATION_ACTIONS:
                self.remediations.labels(g, action)
            for reason in FAILURE_REASONS:
                self.failed.labels(g, reason)
            for result in PAIR_RESULTS:
                self.pair_checks.labels(g, result)
            for metric in (self.escalations, self.spare_promotions, self.errors, self.conflicts,
                           self.drain_timeouts, self.in_flight, self.budget_blocked, self.failed_nodes,
                           self.pair_held):
                metric.labels(g)


def serve(registry: CollectorRegistry, port: int) -> None:
    """Expose ``registry`` on http://0.0.0.0:<port>/metrics (a daemon thread)."""
    start_http_server(port, registry=registry)
