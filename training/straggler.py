"""Straggler metrics, computed when Prometheus scrapes.

Collectives hold every rank to the slowest one: a rank's step time (heartbeat to heartbeat) is the same on
every rank, so it cannot name the slow one. What differs is the time a rank computes before it reaches the
gradient collective (``Runtime.sync_gradients``): the slow rank's is long, the others' short (they then wait).
Each rank writes it into its heartbeat (training/ft/heartbeat.py ``compute_time``); each node's local rank 0
serves, for its node's ranks:

- ``openpod_train_compute_seconds{rank}``: that compute time (the rules compare it with the job-wide median);
- ``openpod_train_straggler_score{rank}``: it over the median of the node's ranks (1.0 = typical).

Under DDP the gradients are all-reduced in ``sync_gradients`` alone, so the time is the rank's own compute.
Under FSDP2 the forward and backward hold their own all-gathers and reduce-scatters: the fast ranks wait inside
them and the measure flattens toward the step time (a known limit; per-rank kernel timing would lift it).

The files are read by the scrape (a custom collector, prometheus_client's documented way to compute metrics on
demand), not after every optimizer step: the training step does no extra file reads, and a rank whose heartbeat
is gone is no longer exported.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily

from training.ft.heartbeat import Beat, read_beats, straggler_scores

METRIC = "openpod_train_straggler_score"
HELP = "Rank compute time before the gradient collective / the median over its node's ranks"
COMPUTE = "openpod_train_compute_seconds"
COMPUTE_HELP = "Seconds a rank's last step computed before the gradient collective"


def compute_scores(beats: list[Beat]) -> dict[int, float]:
    """Per-rank compute time over the median of ``beats`` (1.0 = typical); beats without a compute time (written
    by an older runtime) fall back to the step-time score."""
    times = {b.rank: b.compute_time for b in beats if b.compute_time > 0}
    if not times:
        return straggler_scores(beats)
    med = statistics.median(times.values())
    return {r: (t / med if med > 0 else 1.0) for r, t in times.items()}


class StragglerCollector:
    """Register on the metrics registry of the process that serves the node's metrics."""

    def __init__(self, heartbeat_dir: str | os.PathLike) -> None:
        self.dir = Path(heartbeat_dir)

    def describe(self):  # the names, without reading the files
        return [GaugeMetricFamily(METRIC, HELP, labels=["rank"]), GaugeMetricFamily(COMPUTE, COMPUTE_HELP,
                                                                                    labels=["rank"])]

    def collect(self):
        beats = read_beats(self.dir)
        score = GaugeMetricFamily(METRIC, HELP, labels=["rank"])
        for rank, value in sorted(compute_scores(beats).items()):
            score.add_metric([str(rank)], value)
        compute = GaugeMetricFamily(COMPUTE, COMPUTE_HELP, labels=["rank"])
        for b in sorted(beats, key=lambda b: b.rank):
            if b.compute_time > 0:
                compute.add_metric([str(b.rank)], b.compute_time)
        yield score
        yield compute
