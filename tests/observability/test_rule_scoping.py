"""Rules select their series by scrape job and carry only their object's labels: a team pod serving the
platform's metric names raises nothing, and label churn (a new pod, an exporter restart) neither ends one alert
nor starts another (the promtool cases of test_rules.py, replayed)."""

from __future__ import annotations

import re

import pytest

from observability.promql import metric_names
from observability.rules import WATCHDOG, AlertThresholds, alerts, rule_groups
from tests.observability.test_rules import CASES, Case, _alert_test, _run_unit_tests, s


# ---------------------------------------------------------------------------- one alert per incident, per object
def test_every_alert_carries_only_the_labels_of_its_object():
    """A firing alert's labels are its object's (node, GPU, job, group, queue): no pod, instance or exporter
    label whose churn would end one alert and start another (failed on the old rules: the controller's alerts
    carried its pod and node, the Xid alert the exporter's Hostname)."""
    about = {a.name: set(a.about) for a in alerts(AlertThresholds())}
    for c in CASES:
        for labels in c.fires:
            assert set(labels) <= about[c.alert], (c.alert, labels)


# Alerts that fire on the absence of series: moving series elsewhere cannot silence them.
ABSENCE = {WATCHDOG, "OpenpodScrapeJobAbsent"}
TEAM_POD = {"job": "kubernetes-pods", "namespace": "team-x", "pod": "evil-0"}


def _as_team_pod(series: dict) -> dict:
    name, labels = re.fullmatch(r"([^{]+)\{(.*)\}", series["series"]).groups()
    pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
    return s(name, {**pairs, **TEAM_POD}, series["values"])


@pytest.mark.slow
def test_a_team_pod_serving_the_platforms_metric_names_raises_nothing(promtool, tmp_path):
    """Every firing case again, its series served by a team pod (scraped as kubernetes-pods, namespace team-x):
    no alert. Failed on the old rules, which matched metric names without a job (issue 35)."""
    cases = [Case(c.alert, c.at, [_as_team_pod(x) for x in c.series]) for c in CASES
             if c.fires and c.alert not in ABSENCE]
    out = _run_unit_tests(promtool, tmp_path, [_alert_test(c) for c in cases])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr


def test_every_selector_names_its_scrape_job():
    """Each metric selector of each rule has a job matcher (records excepted: they are the rules' own)."""
    for r in rule_groups()["groups"][0]["rules"] + rule_groups()["groups"][1]["rules"]:
        e = re.sub(r'"[^"]*"', '""', r["expr"])
        for m in re.finditer(r"(?<![\w:.])([a-zA-Z_][\w]*)(\{[^}]*\})?", e):
            name, sel = m.group(1), m.group(2) or ""
            if name in metric_names(r["expr"]) and ":" not in name and name != "vector":
                assert "job" in sel, f"{r.get('alert') or r.get('record')}: {name} without a job matcher"
