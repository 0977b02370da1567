"""The metric families JobSet v0.12.0 registers beyond controller-runtime's
(kubernetes-sigs/jobset@v0.12.0:pkg/metrics/metrics.go, ``Register`` at 56-61), with the platform's use."""

from __future__ import annotations

from observability.engine_metrics.model import EngineMetric

ENGINE = "JobSet v0.12.0"
GO = "kubernetes-sigs/jobset@v0.12.0:pkg/metrics/metrics.go"

ROWS: tuple[EngineMetric, ...] = (
    EngineMetric(ENGINE, "jobset_failed_total", "counter", f"{GO}:30", ("OpenpodJobSetFailed",)),
    EngineMetric(ENGINE, "jobset_completed_total", "counter", f"{GO}:38",
                 unused="a JobSet that completed is the team's outcome, not a platform fault"),
)
