"""The metric table (observability/metrics.py) against what the exporters really register."""

from __future__ import annotations

import re

import pytest
from prometheus_client.metrics import MetricWrapperBase

from node_agent.metrics import ControllerMetrics, DetectorMetrics
from observability.metrics import JOB_CONTROLLER, JOB_DETECTOR, JOB_KUEUE, JOB_TRAINING, METRICS
from training.goodput import Goodput
from training.straggler import StragglerCollector

SUFFIX = {"counter": "_total"}  # prometheus_client exposes a counter ``x`` as ``x_total``


def _families(obj) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Wire name -> (type, label names) of every metric an exporter object holds."""
    out = {}
    for m in vars(obj).values():
        if isinstance(m, MetricWrapperBase):
            out[m._name + SUFFIX.get(m._type, "")] = (m._type, tuple(m._labelnames))
    return out


def _collected(collector) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The same for a custom collector (families computed at scrape time), from its describe()."""
    return {f.name: (f.type, tuple(f._labelnames)) for f in collector.describe()}


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    g = Goodput(tmp_path_factory.mktemp("run"), rank=1)
    g.watch_durable(lambda: 0)  # the runtime does, for a job that checkpoints
    g.watch_tier_lag(lambda: {"fsx": 0}, 2)  # likewise
    training = {**_families(g),
                **_collected(StragglerCollector(tmp_path_factory.mktemp("ft")))}  # registered by the runtime
    return {JOB_DETECTOR: _families(DetectorMetrics()), JOB_CONTROLLER: _families(ControllerMetrics()),
            JOB_TRAINING: training}


@pytest.mark.parametrize("job", [JOB_DETECTOR, JOB_CONTROLLER, JOB_TRAINING])
def test_the_table_lists_exactly_what_our_exporters_register(job, registered):
    have = registered[job]
    rows = {m.name: m for m in METRICS if m.exporter == job}
    for name, m in rows.items():
        if m.pending:
            assert name not in have, f"{name} is registered now: drop its pending={m.pending!r} mark"
            continue
        assert name in have, f"{name}: in the table, not registered by {job}"
        assert have[name] == (m.type, m.labels), f"{name}: table says {(m.type, m.labels)}, code has {have[name]}"
    missing = set(have) - set(rows)
    assert not missing, f"registered by {job} but not in observability/metrics.py: {sorted(missing)}"


def test_upstream_rows_cite_the_pinned_file_and_line():
    for m in METRICS:
        if m.name.startswith("DCGM_"):
            assert re.fullmatch(r"NVIDIA/dcgm-exporter@4\.5\.3-4\.8\.2:etc/default-counters\.csv:\d+|"
                                r"NVIDIA/DCGM@v4\.5\.3:dcgmlib/dcgm_fields\.h:\d+", m.source), m.name
        if m.exporter == JOB_KUEUE:
            assert re.fullmatch(r"kubernetes-sigs/kueue@v0\.19\.2:pkg/metrics/metrics\.go:\d+", m.source), m.name
            assert m.name.startswith("kueue_")


def test_our_names_follow_prometheus_conventions():
    for m in METRICS:
        if not m.name.startswith("openpod_"):
            continue  # upstream names are as upstream exports them
        assert re.fullmatch(r"[a-z][a-z0-9_]*", m.name), m.name
        assert (m.type == "counter") == m.name.endswith("_total"), f"{m.name}: only counters end in _total"
        if m.unit == "seconds":
            assert "seconds" in m.name, f"{m.name}: a seconds metric says so in its name"


def test_the_kueue_workload_rows_are_what_kube_state_metrics_is_configured_to_export():
    """kube-state-metrics names a custom resource metric <metricNamePrefix>_<name> with the labels of
    labelsFromPath (kubernetes/kube-state-metrics@v2.20.0:docs/metrics/extend/customresourcestate-metrics.md)."""
    from observability.metrics import BY_NAME, JOB_KSM
    from platform_constructs.exporters import KUEUE_WORKLOAD_RBAC, KUEUE_WORKLOAD_STATE, chart_values

    kinds = [res["groupVersionKind"] for res in KUEUE_WORKLOAD_STATE["spec"]["resources"]]
    assert kinds == [{"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": k} for k in ("Workload", "LocalQueue")]
    for res in KUEUE_WORKLOAD_STATE["spec"]["resources"]:
        for m in res["metrics"]:
            row = BY_NAME[f"{res['metricNamePrefix']}_{m['name']}"]
            extra = tuple(m["each"][m["each"]["type"].lower()].get("labelsFromPath", {}))
            assert row.exporter == JOB_KSM and row.labels == (*res["labelsFromPath"], *extra), row.name
    ksm = chart_values({})["kube-state-metrics"]
    assert ksm["customResourceState"] == {"enabled": True, "config": KUEUE_WORKLOAD_STATE}
    assert ksm["rbac"]["extraRules"] == KUEUE_WORKLOAD_RBAC   # read-only: list and watch
    assert KUEUE_WORKLOAD_RBAC[0]["verbs"] == ["list", "watch"]
