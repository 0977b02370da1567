"""What detection produces: a Finding (one fault seen once, with its evidence), and the Rule that classifies it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum


class Action(str, Enum):
    """What the node needs. Ordered: a stronger action wins when findings combine."""

    NONE = "none"
    REBOOT = "reboot"
    REPLACE = "replace"

    @property
    def rank(self) -> int:
        return {"none": 0, "reboot": 1, "replace": 2}[self.value]


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class Finding:
    """One fault, as the rule table classifies it, with the evidence that matched."""

    rule: str                 # rule id in the table (e.g. "xid-79")
    fault: str                # short fault name (e.g. "gpu-fell-off-bus")
    severity: Severity
    action: Action
    evidence: str             # the log line / tool output that matched
    source: str               # where the classification comes from (e.g. "NVIDIA Xid catalog")
    device: str = ""          # PCI bus id, device index, mount point, ...
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["severity"] = self.severity.value
        d["action"] = self.action.value
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclass(frozen=True)
class Rule:
    id: str
    probe: str        # kernel-log | nvml | neuron | efa | host | deep-check | agent
    match: str        # regex (kernel-log) or the condition in words
    fault: str
    severity: Severity
    action: Action
    source: str
    note: str = ""

    def finding(self, evidence: str, device: str = "", **details) -> Finding:
        return Finding(rule=self.id, fault=self.fault, severity=self.severity, action=self.action,
                       evidence=evidence.strip(), source=self.source, device=device, details=details)


def strongest(findings: list[Finding]) -> Action:
    """The action the node needs given all findings (replace > reboot > none)."""
    return max((f.action for f in findings), key=lambda a: a.rank, default=Action.NONE)
