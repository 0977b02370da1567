"""Counters the alerts read with ``increase()`` exist at 0 from the start, for every label set known then: a series
born at 1 has no increase (the first pair-check failure, the first drain deadline, one remediation error lost)."""

from __future__ import annotations

import re
from pathlib import Path

from node_agent.config import ControllerConfig
from node_agent.metrics import DETECTOR_CHECKS, PAIR_RESULTS, ControllerMetrics, DetectorMetrics
from node_agent.rules import RULES

ROOT = Path(__file__).resolve().parents[2]


def _samples(registry) -> dict[str, float]:
    """``name{a="x",b="y"}`` (labels in the order the test writes them) -> value, from the exposition."""
    out = {}
    for fam in registry.collect():
        for smp in fam.samples:
            out[smp.name + "{" + ",".join(f'{k}="{v}"' for k, v in smp.labels.items()) + "}"] = smp.value
    return out


def test_the_detector_exports_every_non_kernel_log_rule_and_check_at_zero():
    """Failed on the old code: no findings or check-error series until the first one."""
    got = _samples(DetectorMetrics().registry)
    deep = [r for r in RULES.values() if r.probe == "deep-check"]
    assert deep
    for r in deep:
        key = f'openpod_node_agent_findings_total{{rule="{r.id}",fault="{r.fault}",action="{r.action.value}"}}'
        assert got.get(key) == 0.0, key
    for check in DETECTOR_CHECKS:
        assert got[f'openpod_node_agent_check_errors_total{{check="{check}"}}'] == 0.0


def test_the_check_names_are_the_detectors():
    source = (ROOT / "node_agent" / "detector.py").read_text()
    used = set(re.findall(r'_guard\("([\w-]+)"', source)) | set(re.findall(r'check_errors\.labels\("([\w-]+)"\)', source))
    assert used and used <= set(DETECTOR_CHECKS), used - set(DETECTOR_CHECKS)


def test_the_pair_check_results_are_the_runners():
    source = (ROOT / "node_agent" / "pair_runner.py").read_text()
    used = set(re.findall(r'_(?:retry|fail)\(node, \w+, group, "(\w+)"', source))
    used |= set(re.findall(r'pair_checks\.labels\(group, "(\w+)"\)', source))
    used |= set(re.findall(r'outcome = \("(\w+)"', source))
    assert used and used <= set(PAIR_RESULTS), used - set(PAIR_RESULTS)


def test_the_controller_starts_each_groups_counters_at_zero():
    """Failed on the old code: openpod_pair_checks_total{result="BelowFloor"} and the drain, error and failure
    counters of a group appeared only at their first increment."""
    from node_agent.controller import Controller

    config = ControllerConfig.model_validate({"groups": {"p5": {}, "trn": {}}})
    ctl = Controller(cluster=None, cloud=None, config=config, metrics=ControllerMetrics())
    got = _samples(ctl.metrics.registry)
    for g in ("p5", "trn"):
        assert got[f'openpod_pair_checks_total{{group="{g}",result="BelowFloor"}}'] == 0.0
        assert got[f'openpod_drain_deadline_exceeded_total{{group="{g}"}}'] == 0.0
        assert got[f'openpod_remediation_errors_total{{group="{g}"}}'] == 0.0
        assert got[f'openpod_remediations_total{{group="{g}",action="replace"}}'] == 0.0
        assert got[f'openpod_remediation_failures_total{{group="{g}",reason="InstanceNotFound"}}'] == 0.0
        assert got[f'openpod_remediations_in_flight{{group="{g}"}}'] == 0.0
