"""The platform's Prometheus rules, run by the real promtool: each alert fires on its fault and stays silent
on the near miss; every expression reads only metrics the platform or pinned upstream exports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from observability.metrics import BY_NAME
from observability.promql import metric_names, unknown_names
from observability.rules import WATCHDOG, AlertThresholds, alerts, records, rule_groups, rules_yaml, runbook_url

from tests.observability.rule_cases import CASES, KUEUE, RULES_FILE, Case, s  # noqa: F401 (re-exported)


# Recording rules with a known value on known input.
RECORD_CASES = [
    ("openpod:job_goodput:ratio_window", "90m",
     next(c for c in CASES if c.alert == "OpenpodGoodputBelowTarget" and c.fires).series,
     [{"labels": 'openpod:job_goodput:ratio_window{namespace="team-a", training_job="llm"}', "value": 0.8}]),
    ("openpod:team_borrowed:sum", "5m",
     [s("kueue_cluster_queue_resource_usage", {**KUEUE, "cohort": "org", "cluster_queue": "team-a", "flavor": "p5",
                                               "resource": "nvidia.com/gpu"}, "24x10"),
      s("kueue_cluster_queue_nominal_quota", {**KUEUE, "cohort": "org", "cluster_queue": "team-a", "flavor": "p5",
                                              "resource": "nvidia.com/gpu"}, "16x10"),
      s("kueue_cluster_queue_resource_usage", {**KUEUE, "cohort": "org", "cluster_queue": "team-b", "flavor": "p5",
                                               "resource": "nvidia.com/gpu"}, "8x10"),
      s("kueue_cluster_queue_nominal_quota", {**KUEUE, "cohort": "org", "cluster_queue": "team-b", "flavor": "p5",
                                              "resource": "nvidia.com/gpu"}, "16x10")],
     [{"labels": 'openpod:team_borrowed:sum{cluster_queue="team-a", resource="nvidia.com/gpu"}', "value": 8},
      {"labels": 'openpod:team_borrowed:sum{cluster_queue="team-b", resource="nvidia.com/gpu"}', "value": 0}]),
]


def _render(template: str, labels: dict) -> str:
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)


def _alert_test(case: Case) -> dict:
    alert = {a.name: a for a in alerts(AlertThresholds())}[case.alert]
    exp = [{"exp_labels": {**labels, "severity": alert.severity},
            "exp_annotations": {"summary": summary, "description": _render(alert.description, labels),
                                "runbook": _render(alert.runbook, labels), "runbook_url": runbook_url(alert.name)}}
           for labels, summary in zip(case.fires, case.summaries, strict=True)]
    return {"interval": "1m", "input_series": case.series,
            "alert_rule_test": [{"eval_time": at, "alertname": case.alert, "exp_alerts": exp}
                                for at in (case.at, *case.also_at)]}


def _promtool(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_checked_in_rule_file_is_current():
    assert RULES_FILE.read_text() == rules_yaml(), "docs/prometheus-rules.yaml is stale: run `python -m infra docs`"


def test_promtool_check_rules_accepts_the_rule_file(promtool, tmp_path):
    out = _promtool(promtool, "check", "rules", str(RULES_FILE), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(records()) + len(alerts(AlertThresholds()))} rules found" in out.stdout


def test_promtool_check_rules_rejects_a_broken_expression(promtool, tmp_path):
    """The check is real: a syntax error in one expression fails it, naming the rule file."""
    groups = rule_groups()
    groups["groups"][1]["rules"][0]["expr"] = "openpod_node_agent_node_action =="
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(groups))
    out = _promtool(promtool, "check", "rules", "bad.yaml", cwd=tmp_path)
    assert out.returncode != 0 and "bad.yaml" in out.stdout + out.stderr


def test_every_alert_has_a_firing_and_a_silent_case():
    kinds = {(c.alert, c.kind) for c in CASES}
    for a in alerts(AlertThresholds()):
        assert (a.name, "fires") in kinds, f"{a.name}: no promtool case where it fires"
        assert (a.name, "silent") in kinds or a.name == WATCHDOG, f"{a.name}: no promtool case where it must not fire"


def rules_read_by(groups: dict, test: dict) -> dict:
    """``groups`` (the rule file, parsed) cut to what one promtool test group reads: the alert it tests (or the
    expression it evaluates) and, transitively, each recording rule an expression kept reads (``metric_names``);
    the groups and the order within them are kept, so the rules kept evaluate as in the whole file. promtool
    evaluates every rule of its file at every step of each test group and checks only the alert named, so the
    rest is work no assertion reads (the whole file: 43 s of CPU for the cases below, these: 3 s, 2026-11-29). An
    expression reading ``ALERTS`` keeps every alert."""
    rules = [r for g in groups["groups"] for r in g["rules"]]
    if "alert_rule_test" in test:
        names = {t["alertname"] for t in test["alert_rule_test"]}
        keep = [r for r in rules if r.get("alert") in names]
        assert keep, f"no alert named {sorted(names)} in the rule file"
    else:
        keep = []
    read = set().union(*(metric_names(e) for e in [r["expr"] for r in keep]
                         + [t["expr"] for t in test.get("promql_expr_test", [])]))
    while True:
        more = [r for r in rules if r not in keep and (
            r.get("record") in read or ("alert" in r and read & {"ALERTS", "ALERTS_FOR_STATE"}))]
        if not more:
            break
        keep += more
        read = read.union(*(metric_names(r["expr"]) for r in more))
    return {**groups, "groups": [{**g, "rules": [r for r in g["rules"] if r in keep]} for g in groups["groups"]
                                 if any(r in keep for r in g["rules"])]}


def _run_unit_tests(promtool: str, tmp_path: Path, tests: list[dict]) -> subprocess.CompletedProcess:
    """One promtool run; each test group in its own test file, with the rules it reads (``rules_read_by``)."""
    groups = yaml.safe_load(RULES_FILE.read_text())
    files = []
    for i, test in enumerate(tests):
        what = next((t["alertname"] for t in test.get("alert_rule_test", [])), "expr")
        files.append(f"{i:03d}-{what}.yaml")
        (tmp_path / f"rules-{files[-1]}").write_text(yaml.safe_dump(rules_read_by(groups, test), sort_keys=False))
        (tmp_path / files[-1]).write_text(yaml.safe_dump(
            {"rule_files": [f"rules-{files[-1]}"], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False))
    return _promtool(promtool, "test", "rules", *files, cwd=tmp_path)


@pytest.mark.slow
def test_promtool_test_rules_every_alert_fires_and_stays_silent(promtool, tmp_path):
    tests = [_alert_test(c) for c in CASES]
    tests += [{"interval": "1m", "input_series": series,
               "promql_expr_test": [{"expr": rec, "eval_time": at, "exp_samples": exp}]}
              for rec, at, series, exp in RECORD_CASES]
    out = _run_unit_tests(promtool, tmp_path, tests)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_test_rules_catches_a_silent_case_that_fires(promtool, tmp_path):
    """The harness can fail: expecting silence where the alert fires is reported by promtool."""
    firing = next(c for c in CASES if c.fires)
    out = _run_unit_tests(promtool, tmp_path, [_alert_test(Case(firing.alert, firing.at, firing.series))])
    assert out.returncode != 0 and firing.alert in out.stdout + out.stderr


# ---------------------------------------------------------------------------- metric names
def test_metric_names_parser_finds_the_series():
    assert metric_names('sum by (a) (rate(x_bucket{le="1"}[5m])) / on (b) y:z > 2 and up{job="j"}') == {
        "x_bucket", "y:z", "up"}


@pytest.mark.parametrize("rule", rule_groups()["groups"][0]["rules"] + rule_groups()["groups"][1]["rules"],
                         ids=lambda r: r.get("record") or r.get("alert"))
def test_every_expression_reads_only_known_metrics(rule):
    assert not unknown_names(rule["expr"]), "neither in observability/metrics.py nor a recording rule"


def test_the_deep_check_alert_names_real_node_agent_rules():
    from node_agent.rules import RULES

    expr = next(a.expr for a in alerts(AlertThresholds()) if a.name == "OpenpodDeepCheckFailing")
    names = re.search(r'rule=~"([^"]+)"', expr).group(1).split("|")
    assert names and all(RULES[n].probe == "deep-check" for n in names)
    assert "openpod_node_agent_findings_total" in BY_NAME


def test_every_alert_says_what_to_do_and_the_docs_show_it():
    from observability.docs import observability_md
    from observability.runbooks import runbooks_md

    page, runbooks = observability_md(), runbooks_md()
    for a in alerts(AlertThresholds()):
        assert len(a.runbook) > 40 and a.severity in ("critical", "warning", "info"), a.name
        assert f"[{a.name}](runbooks.md#{a.name.lower()})" in page, a.name
        assert re.sub(r"\{\{ \$labels\.(\w+) \}\}", r"<\1>", a.runbook).split(";")[0][:30] in runbooks, a.name


def test_promtool_check_config_accepts_every_scrape_job(promtool, tmp_path):
    """Every job and relabeling parses (Debian's Prometheus lacks Kubernetes discovery: file_sd stands in)."""
    from observability.scrape import SA_TOKEN, prometheus_config

    config = prometheus_config()
    (tmp_path / "token").write_text("t")
    (tmp_path / "targets.json").write_text("[]")
    for job in config["scrape_configs"]:
        assert job.pop("kubernetes_sd_configs")[0]["role"] in ("pod", "endpoints")
        job["file_sd_configs"] = [{"files": [str(tmp_path / "targets.json")]}]
        if job.get("authorization", {}).get("credentials_file") == SA_TOKEN:
            job["authorization"]["credentials_file"] = str(tmp_path / "token")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    out = _promtool(promtool, "check", "config", "prometheus.yml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_xid_alert_says_what_clears_a_held_xid():
    """DCGM writes the Xid field only when an Xid arrives and keeps it in the exporter's embedded host engine's
    memory (fact dcgm.xid.last-value-held): a GPU reset does not clear it, restarting the exporter pod does."""
    xid = next(a for a in alerts(AlertThresholds()) if a.name == "OpenpodGPUXidError")
    assert "until the GPU is reset" not in xid.description
    assert "dcgm-exporter pod" in xid.description and "dcgm-exporter pod" in xid.runbook
