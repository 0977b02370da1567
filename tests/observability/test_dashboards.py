"""Dashboards as code: valid for Grafana's own model, every query parses in Prometheus and reads known metrics."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from click.testing import CliRunner

from infra.cli.main import main
from observability.dashboards import DASHBOARDS, build, dashboard_json, expressions
from observability.promql import unknown_names

VARIABLES = {"$namespace": "team-a", "$training_job": "llm"}


def _concrete(expr: str) -> str:
    for k, v in VARIABLES.items():
        expr = expr.replace(k, v)
    return expr


@pytest.mark.parametrize("d", DASHBOARDS, ids=lambda d: d.uid)
def test_the_json_round_trips_through_grafanas_model(d):
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    data = dashboard_json(d)
    again = json.loads(JSONEncoder(sort_keys=True).encode(Dashboard.from_json(data)))
    assert again == data
    assert data["uid"] == d.uid and data["panels"], d.uid
    assert type(build(d)).__name__ == "Dashboard"


@pytest.mark.parametrize("d", DASHBOARDS, ids=lambda d: d.uid)
def test_every_panel_reads_only_documented_metrics(d):
    for expr in expressions(d):
        assert not unknown_names(expr), (expr, unknown_names(expr))


def test_the_name_check_catches_an_undocumented_metric():
    assert unknown_names('sum(rate(openpod_made_up_total[5m])) + up{job="x"}') == {"openpod_made_up_total"}


def test_every_panel_query_parses_in_promtool(promtool, tmp_path):
    rules = [{"record": f"dashboard:check_{i}", "expr": _concrete(e)}
             for i, e in enumerate(e for d in DASHBOARDS for e in expressions(d))]
    (tmp_path / "panels.yaml").write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    out = subprocess.run([promtool, "check", "rules", "panels.yaml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules)} rules found" in out.stdout


def test_openpod_dashboards_writes_one_file_per_dashboard(tmp_path):
    r = CliRunner().invoke(main, ["dashboards", "--out", str(tmp_path / "d")])
    assert r.exit_code == 0, r.output
    files = sorted((tmp_path / "d").glob("*.json"))
    assert [f.stem for f in files] == sorted(d.uid for d in DASHBOARDS)
    for d in DASHBOARDS:
        assert json.loads((tmp_path / "d" / f"{d.uid}.json").read_text()) == dashboard_json(d)


def test_openpod_rules_writes_the_rule_file_at_the_spec_thresholds(tmp_path, promtool):
    import copy

    from observability.rules import rules_yaml
    from observability.thresholds import AlertThresholds
    from tests.conftest import EXAMPLES

    data = copy.deepcopy(yaml.safe_load((EXAMPLES / "default.yaml").read_text()))
    data["observability"] = {"alerts": {"job_hang_minutes": 7}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(main, ["rules", "--spec", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "p" / "openpod-rules.yaml").read_text()
    assert text == rules_yaml(AlertThresholds(job_hang_minutes=7)) and "changes(openpod_training_step{job=\"openpod-training\"}[7m])" in text
    out = subprocess.run([promtool, "check", "rules", str(tmp_path / "p" / "openpod-rules.yaml")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert yaml.safe_load((tmp_path / "p" / "openpod-scrape.yaml").read_text())["scrape_configs"]


def test_the_accelerator_dashboard_shows_the_neuron_monitors_metrics():
    """Trainium nodes have their panels, reading names the Neuron monitor's exporter is documented to serve."""
    from observability.metrics import BY_NAME, JOB_EXPORTERS
    from openpod_core.facts.register import fact

    (acc,) = [d for d in DASHBOARDS if d.uid == "openpod-accelerators"]
    used = {n for e in expressions(acc) for n in BY_NAME if n in e}
    neuron = {"neuroncore_utilization_ratio", "neuron_runtime_memory_used_bytes", "execution_errors_total",
              "hardware_ecc_events_total"}
    assert neuron <= used
    documented = fact("neuron-monitor.metric-names").value
    for name in neuron:
        m = BY_NAME[name]
        assert m.exporter == JOB_EXPORTERS and name in documented, name
        assert m.source.startswith("facts: neuron-monitor.metric-names"), name
        for label in m.labels:
            assert label in documented, (name, label)


@pytest.mark.parametrize("d", DASHBOARDS, ids=lambda d: d.uid)
def test_every_panel_and_the_variable_name_the_amp_data_source_type(d):
    """Failed before: no panel named a data source and the variable was of type prometheus, which Amazon Managed
    Grafana no longer gives an AMP workspace (facts: grafana.amp-datasource-plugin)."""
    from observability.dashboards import DATASOURCE, DATASOURCE_TYPE
    from openpod_core.facts.register import fact

    assert DATASOURCE_TYPE in fact("grafana.amp-datasource-plugin").value
    data = dashboard_json(d)
    (var,) = [v for v in data["templating"]["list"] if v["type"] == "datasource"]
    assert var["query"] == DATASOURCE_TYPE
    ref = {"type": DATASOURCE_TYPE, "uid": DATASOURCE}
    for panel in data["panels"]:
        if panel["type"] == "row":
            continue
        assert panel.get("datasource") == ref, panel["title"]
        assert all(t["datasource"] == ref for t in panel["targets"]), panel["title"]
    for v in data["templating"]["list"]:
        if v["type"] == "query":
            assert v["datasource"] == ref, v["name"]


def test_the_dashboards_show_the_new_signals():
    text = " ".join(e for d in DASHBOARDS for e in expressions(d))
    for name in ("openpod_node_agent_check_errors_total", "openpod_checkpoint_last_durable_timestamp_seconds",
                 "openpod_train_straggler_score", "openpod_training_incarnations", "kueue_cluster_queue_status",
                 'action="none"'):
        assert name in text, name
    titles = [p.title for d in DASHBOARDS for _, ps in d.rows for p in ps]
    assert not any("(this incarnation)" in t for t in titles), "checkpoint failures count all incarnations"


def test_every_signal_of_the_failure_mode_table_is_on_a_dashboard():
    """Each Prometheus series a failure-mode row names is read by some panel (directly or through a record)."""
    import re

    from observability.failure_modes import ROWS
    from observability.rules import records

    text = " ".join(e for d in DASHBOARDS for e in expressions(d))
    text += " ".join(r.expr for r in records() if r.record in text)
    for r in ROWS:
        for name in re.findall(r"\b(?:openpod_|kube_|kueue_|DCGM_)\w+", r.signal):
            assert name in text, (r.component, r.mode, name)
