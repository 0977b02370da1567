"""Every metric family each engine serves at its pinned version, and what the platform does with it: read by an
alert (named), shown on a dashboard only, or unused (and why, a fact). The failure-mode table
(observability/failure_modes.py) is our enumeration; this is the engines' own (Kueue's and JobSet's managers serve
controller-runtime's families beside their own: a table of its own), so a signal nobody reads is seen.
tests/observability/test_engine_metrics.py keeps each verdict true against the rules and dashboards, and every
engine metric a rule or dashboard reads is a row here; docs/observability.md prints the coverage per engine."""

from __future__ import annotations

from collections import defaultdict

from observability.engine_metrics import controller_runtime, dcgm, jobset, ksm, kueue
from observability.engine_metrics.model import VERDICTS, EngineMetric

__all__ = ["ENGINES", "ROWS", "VERDICTS", "EngineMetric", "coverage", "readers"]

ENGINES: tuple[str, ...] = (kueue.ENGINE, jobset.ENGINE, controller_runtime.ENGINE, dcgm.ENGINE, ksm.ENGINE)
ROWS: tuple[EngineMetric, ...] = kueue.ROWS + jobset.ROWS + controller_runtime.ROWS + dcgm.ROWS + ksm.ROWS
BY_NAME: dict[str, EngineMetric] = {r.name: r for r in ROWS}
assert len(BY_NAME) == len(ROWS), "duplicate families in the engine tables"


def coverage() -> list[tuple[str, dict[str, int]]]:
    """Per engine: its families and how many of them each verdict holds."""
    out = []
    for engine in ENGINES:
        rows = [r for r in ROWS if r.engine == engine]
        out.append((engine, {"families": len(rows), **{v: sum(r.verdict == v for r in rows) for v in VERDICTS}}))
    return out


def readers() -> tuple[dict[str, set[str]], set[str]]:
    """(family -> the alerts that read it, the families a dashboard reads), through recording rules; histogram
    series (``_bucket``, ``_sum``, ``_count``) count for their family."""
    from observability.dashboards import DASHBOARDS, expressions
    from observability.promql import metric_names
    from observability.rules import AlertThresholds, alerts, records

    recs = {r.record: r.expr for r in records()}

    def reads(expr: str) -> set[str]:
        seen: set[str] = set()
        todo = metric_names(expr)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo |= metric_names(recs.get(name, ""))
        return {_family(n) for n in seen}

    by_alert: dict[str, set[str]] = defaultdict(set)
    for a in alerts(AlertThresholds()):
        for name in reads(a.expr):
            by_alert[name].add(a.name)
    dashboard = set().union(*(reads(e) for d in DASHBOARDS for e in expressions(d)))
    return dict(by_alert), dashboard


def _family(series: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        base = series.removesuffix(suffix)
        if base != series and BY_NAME.get(base) and BY_NAME[base].type == "histogram":
            return base
    return series
