"""The engines' metric surface (observability/engine_metrics): each verdict is true of the rules and dashboards
as they are, every engine metric they read is a row, and the metric table cites the same source line."""

from __future__ import annotations

from observability.engine_metrics import BY_NAME, ENGINES, ROWS, VERDICTS, EngineMetric, coverage, readers
from observability.metrics import JOB_DCGM, JOB_JOBSET, JOB_KSM, JOB_KUEUE, JOB_MANAGERS, METRICS
from observability.promql import metric_names
from observability.rules import rule_groups

ENGINE_JOBS = {JOB_KUEUE, JOB_JOBSET, JOB_MANAGERS, JOB_KSM, JOB_DCGM}
ENGINE_PREFIXES = ("kueue_", "multikueue_", "jobset_", "kube_", "DCGM_", "controller_runtime_", "workqueue_",
                   "leader_election_", "rest_client_", "certwatcher_")


def verdict_errors(rows: tuple[EngineMetric, ...]) -> list[str]:
    by_alert, dashboard = readers()
    errors = []
    for r in rows:
        if set(r.alerts) != by_alert.get(r.name, set()):
            errors.append(f"{r.name}: the row names {sorted(r.alerts)}, the alerts reading it are "
                          f"{sorted(by_alert.get(r.name, set()))}")
        if r.dashboard != (r.name in dashboard):
            errors.append(f"{r.name}: dashboard={r.dashboard}, but a dashboard "
                          f"{'does' if not r.dashboard else 'does not'}"
                          " read it")
        if bool(r.unused) != (r.verdict == "unused"):
            errors.append(f"{r.name}: a reason is given exactly when neither an alert nor a dashboard reads it")
    return errors


def test_every_verdict_is_true_of_the_rules_and_dashboards():
    assert not verdict_errors(ROWS)


def test_a_false_verdict_is_reported():
    """The check can fail: a row naming an alert that does not read it, one hiding a reader, a wrong dashboard
    flag, a used metric with a reason."""
    row = BY_NAME["kueue_cluster_queue_status"]
    wrong = (EngineMetric(row.engine, row.name, row.type, row.source, ("OpenpodJobHung",), True),
             EngineMetric(row.engine, "kueue_build_info", "gauge", row.source, dashboard=True),
             EngineMetric(row.engine, "kube_node_status_capacity", "gauge", row.source, unused="not read"))
    errors = verdict_errors(wrong)
    assert any("kueue_cluster_queue_status" in e and "OpenpodJobHung" in e for e in errors)
    assert any(e.startswith("kueue_build_info: dashboard=True") for e in errors)
    assert sum(e.startswith("kube_node_status_capacity") for e in errors) == 2   # hides its alert; has a reason


def test_every_engine_metric_a_rule_or_dashboard_reads_is_a_row():
    by_alert, dashboard = readers()
    read = set(by_alert) | dashboard
    read |= {n for g in rule_groups()["groups"] for r in g["rules"] for n in metric_names(r["expr"])}
    missing = {n for n in read if n.startswith(ENGINE_PREFIXES) and n not in BY_NAME
               and n.removesuffix("_bucket") not in BY_NAME}
    assert not missing, f"read by a rule or dashboard but not in observability/engine_metrics: {sorted(missing)}"


def test_the_metric_table_and_the_engine_table_agree():
    """Each upstream row of observability/metrics.py is an engine row with the same source line and type."""
    for m in METRICS:
        if m.exporter in ENGINE_JOBS:
            row = BY_NAME.get(m.name)
            assert row, f"{m.name}: in observability/metrics.py, not in observability/engine_metrics"
            assert (row.source, row.type) == (m.source, m.type), m.name


def test_rows_are_well_formed():
    for r in ROWS:
        assert r.engine in ENGINES and r.type in {"counter", "gauge", "histogram", "label"}, r.name
        assert "\n" not in r.unused and len(r.unused) < 260, r.name
        assert r.source.split(":")[-1].isdigit() or r.source.startswith("platform_constructs/"), r.name
    assert sum(c["families"] for _, c in coverage()) == len(ROWS)
    assert all(sum(c[v] for v in VERDICTS) == c["families"] for _, c in coverage())


def test_the_docs_show_the_coverage_per_engine():
    from observability.docs import observability_md

    page = observability_md()
    for engine, c in coverage():
        assert f"| {engine} | {c['families']} | {c['alert']} | {c['dashboard']} | {c['unused']} |" in page


def test_the_alerts_and_node_agent_rules_a_reason_names_exist():
    """A reason that says who covers the failure instead names alerts and node agent rules that exist."""
    import re

    from node_agent.rules import RULES
    from observability.rules import AlertThresholds, alerts

    names = {a.name for a in alerts(AlertThresholds())}
    for r in ROWS:
        for alert in re.findall(r"\bOpenpod\w+", r.unused):
            assert alert in names, (r.name, alert)
        for rule in re.findall(r"\b(gpu-[a-z-]+)\b", r.unused):
            assert rule in RULES, (r.name, rule)


def test_dcgm_exporter_collects_the_charts_rows_and_the_pcie_link():
    """The platform's counters list (it replaces the chart's) is the chart's rows, each of the engine table not
    marked "not collected", with their types, and the two link fields the PCIe replay bound reads."""
    from observability.engine_metrics import dcgm
    from platform_constructs.exporters import DCGM_COUNTERS, chart_values, dcgm_counters_csv

    ours = {name: typ for name, typ, _ in DCGM_COUNTERS}
    chart = {r.name: r.type for r in dcgm.ROWS if "not collected" not in r.unused and not r.source.startswith(
        dcgm.FIELDS)}
    assert ours == {**chart, "DCGM_FI_DEV_PCIE_LINK_GEN": "gauge", "DCGM_FI_DEV_PCIE_LINK_WIDTH": "gauge"}
    assert chart_values({})["dcgm-exporter"]["customMetrics"] == dcgm_counters_csv()
    assert all(len(line.split(", ")) == 3 for line in dcgm_counters_csv().splitlines())
