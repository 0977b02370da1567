"""docs/runbooks.md: one section per alert (Prometheus rules and CloudWatch alarms), the target of each alert's
``runbook_url`` annotation (observability/rules.py runbook_url), rendered from the rules, the routing and the
failure-mode table."""

from __future__ import annotations

import re

from observability import routing
from observability.failure_modes import CLOUDWATCH_ALARMS, ROWS
from observability.rules import alerts
from observability.thresholds import AlertThresholds


def _modes(name: str) -> str:
    rows = [f"{r.component} {r.mode}: {r.failure}" for r in ROWS if name in r.alerts]
    return "; ".join(rows) or "-"


def _placeholders(text: str) -> str:
    """``{{ $labels.node }}`` (filled in the alert's annotation) -> ``<node>`` on the page."""
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", r"<\1>", text)


def runbooks_md() -> str:
    out = ["# Runbooks", "",
           "Generated from `observability/` by `python -m infra docs`; do not edit by hand.", "",
           "One section per alert; each alert's `runbook_url` annotation points at its section. Thresholds are "
           "the defaults (the spec's `observability.alerts` changes them). Receivers and grouping: "
           "[observability.md](observability.md#routing-one-notification-per-incident).", ""]
    for a in alerts(AlertThresholds()):
        receiver, group_by = routing.receiver_of({"alertname": a.name, "severity": a.severity,
                                                  **{k: "x" for k in a.about}})
        out += [f"## {a.name}", "",
                f"- **Severity** {a.severity}; **receiver** {receiver}; **one notification per** "
                f"{', '.join(group_by)}; **silenced by** {', '.join(routing.inhibited_by(a.name)) or 'nothing'}.",
                f"- **Failure modes**: {_modes(a.name)}.",
                f"- **Fires when**: {a.description}", "",
                f"**What to do**: {_placeholders(a.runbook)}", ""]
    for c in CLOUDWATCH_ALARMS:
        out += [f"## {c.name}", "",
                f"- **Severity** {c.severity}; a CloudWatch alarm publishing to the alert topic (not through the "
                "alert manager: one message when it goes into ALARM).",
                f"- **Failure modes**: {_modes(c.name)}.",
                f"- **Fires when**: {c.summary}.", "",
                f"**What to do**: {c.runbook}", ""]
    return "\n".join(out).rstrip("\n") + "\n"
