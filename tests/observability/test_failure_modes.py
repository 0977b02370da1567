"""The failure-mode table (observability/failure_modes.py) is the single source: every alert is in it, every alert
it names exists, every row says why when it has none, and the docs render it with its coverage."""

from __future__ import annotations

import re
from pathlib import Path

from observability.docs import observability_md
from observability.failure_modes import CLOUDWATCH_ALARMS, MODES, ROWS, alert_names, coverage
from observability.rules import AlertThresholds, alerts, rule_groups
from observability.runbooks import runbooks_md

DOCS = Path(__file__).resolve().parents[2] / "docs"
RULE_ALERTS = {a.name for a in alerts(AlertThresholds())}
CLOUDWATCH = {c.name for c in CLOUDWATCH_ALARMS}


def test_every_alert_is_in_the_table_and_every_alert_it_names_exists():
    assert RULE_ALERTS | CLOUDWATCH == alert_names(), (
        f"alerts missing from the table: {sorted((RULE_ALERTS | CLOUDWATCH) - alert_names())}; "
        f"named by the table but defined nowhere: {sorted(alert_names() - RULE_ALERTS - CLOUDWATCH)}")


def test_every_row_has_an_alert_or_says_why_not():
    seen = set()
    for r in ROWS:
        assert r.mode in MODES, (r.component, r.mode)
        assert bool(r.alerts) != bool(r.not_covered), f"{r.component} {r.mode} {r.failure}: alerts xor reason"
        assert r.signal and r.failure
        assert (r.component, r.mode, r.failure) not in seen
        seen.add((r.component, r.mode, r.failure))


def test_the_components_the_platform_runs_or_depends_on_are_all_there():
    want = {"GPU", "NVLink/NVSwitch", "EFA", "host", "kubelet/node", "FSx", "S3", "Kueue", "JobSet", "training job",
            "checkpoints", "node agent", "remediation controller", "exporters", "managed scraper/AMP", "Alertmanager"}
    assert want <= {r.component for r in ROWS}


def test_the_docs_show_the_table_with_its_coverage_and_are_current():
    covered, total = coverage()
    page = observability_md()
    assert f"**Coverage: {covered} of {total} failure modes have an alert" in page
    assert (DOCS / "observability.md").read_text() == page, "docs/observability.md is stale: `python -m infra docs`"
    assert (DOCS / "runbooks.md").read_text() == runbooks_md(), "docs/runbooks.md is stale: `python -m infra docs`"


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors (lower case, punctuation dropped, spaces to hyphens)."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", markdown, re.M)}


def test_every_alert_links_a_runbook_section_that_exists():
    anchors = _anchors((DOCS / "runbooks.md").read_text())
    for rule in rule_groups()["groups"][1]["rules"]:
        path, anchor = rule["annotations"]["runbook_url"].split("#")
        assert path == "docs/runbooks.md" and anchor in anchors, rule["alert"]
    for name in CLOUDWATCH:
        assert name.lower() in anchors, name
    assert "openpodnosuchalert" not in anchors


def test_every_metric_a_row_names_is_in_the_metric_table():
    """A signal names series the platform's exporters serve (observability/metrics.py, with their pinned
    sources), or Prometheus's own ``up``, or a CloudWatch metric."""
    from observability.metrics import BY_NAME, family

    for r in ROWS:
        for name, wildcard in re.findall(r"\b((?:openpod_|kube_|kueue_|DCGM_)\w+)(\*)?", r.signal):
            if wildcard:   # a family: some row must start with it
                assert any(m.startswith(name) for m in BY_NAME), (r.component, r.mode, name)
            else:
                assert name in BY_NAME or family(name), (r.component, r.mode, name)



def test_the_amp_quota_row_is_alarmed_on_the_dimensions_aws_alarms_on():
    """A workspace at its active series or ingestion rate quota loses samples while the watchdog keeps firing:
    the row has CloudWatch alarms, its signal names the facts that give their dimensions, and samples discarded
    for other reasons stay listed as unverified while no construct alarms on AWS/Prometheus."""
    from openpod_core.facts.register import fact
    from openpod_core.facts.unverified import UNVERIFIED

    row = next(r for r in ROWS if (r.component, r.mode) == ("managed scraper/AMP", "fills"))
    assert set(row.alerts) == {"OpenpodAmpActiveSeriesNearQuota", "OpenpodAmpIngestionRateNearQuota"} <= CLOUDWATCH
    for key in ("amp.cloudwatch.usage-dimensions", "amp.quotas.active-series", "amp.quotas.ingestion-throttling"):
        assert key in row.signal and fact(key)
    assert "ResourceId <workspace ID>" in fact("amp.cloudwatch.usage-dimensions").value
    construct = (Path(__file__).resolve().parents[2] / "platform_constructs" / "observability.py").read_text()
    if "AWS/Prometheus" not in construct:
        assert "AMP discarded samples" in {name for name, _ in UNVERIFIED}
