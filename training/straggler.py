"""``openpod_train_straggler_score{rank}``, computed when Prometheus scrapes.

Each node's local rank 0 serves the score of its node's ranks: a rank's last step time divided by
their median (training/ft/heartbeat.py ``straggler_scores``), read from the ranks' heartbeat files.
The files are read by the scrape (a custom collector, prometheus_client's documented way to compute
metrics on demand), not after every optimizer step: the training step does no extra file reads, and a
rank whose heartbeat is gone is no longer exported.
"""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily

from training.ft.heartbeat import read_beats, straggler_scores

METRIC = "openpod_train_straggler_score"
HELP = "Rank step time / job median step time"


class StragglerCollector:
    """Register on the metrics registry of the process that serves the node's metrics."""

    def __init__(self, heartbeat_dir: str | os.PathLike) -> None:
        self.dir = Path(heartbeat_dir)

    def describe(self):
        return [GaugeMetricFamily(METRIC, HELP, labels=["rank"])]  # the name, without reading the files

    def collect(self):
        g = GaugeMetricFamily(METRIC, HELP, labels=["rank"])
        for rank, score in sorted(straggler_scores(read_beats(self.dir)).items()):
            g.add_metric([str(rank)], score)
        yield g
