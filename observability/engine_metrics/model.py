"""One row of the engines' metric surface (observability/engine_metrics): a family, where it is defined, and what
the platform does with it."""

from __future__ import annotations

from dataclasses import dataclass

CHECKED = "2026-11-29"
VERDICTS = ("alert", "dashboard", "unused")


@dataclass(frozen=True)
class EngineMetric:
    """A metric family an engine serves at its pinned version. ``alerts`` names every alert that reads it
    (through recording rules too); ``dashboard`` says a dashboard panel reads it; ``unused`` says, as a fact,
    why neither does. tests/observability/test_engine_metrics.py keeps all three true."""

    engine: str
    name: str          # as scraped (counters keep their ``_total``; histograms without ``_bucket``)
    type: str          # counter | gauge | histogram | label
    source: str        # owner/repo@tag:path:line where it is defined
    alerts: tuple[str, ...] = ()
    dashboard: bool = False
    unused: str = ""

    @property
    def verdict(self) -> str:
        return "alert" if self.alerts else "dashboard" if self.dashboard else "unused"
