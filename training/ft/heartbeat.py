"""Per-rank step heartbeats and the hang bound the launcher's watchdog uses.

Each rank writes ``<dir>/rank-<r>.json`` ({"rank", "step", "time", "step_time"})
atomically after every step. The watchdog reads them all; a hang is declared
when no rank has advanced for ``max(floor_s, multiple * median recent step time)``.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Beat:
    rank: int
    step: int
    time: float
    step_time: float


class Heartbeat:
    """Written by one rank after each step (cheap: one small atomic file write)."""

    def __init__(self, directory: str | os.PathLike, rank: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self._last: float | None = None

    def beat(self, step: int, now: float | None = None) -> Beat:
        now = time.time() if now is None else now
        step_time = 0.0 if self._last is None else now - self._last
        self._last = now
        b = Beat(self.rank, step, now, step_time)
        path = self.dir / f"rank-{self.rank}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(b.__dict__))
        os.replace(tmp, path)
        return b


def read_beats(directory: str | os.PathLike) -> list[Beat]:
    beats = []
    for p in sorted(Path(directory).glob("rank-*.json")):
        try:
            beats.append(Beat(**json.loads(p.read_text())))
        except (OSError, ValueError, TypeError):
            continue  # partially visible or foreign file: skip this round
    return beats


def hang_bound(beats: list[Beat], floor_s: float = 60.0, multiple: float = 10.0) -> float:
    times = [b.step_time for b in beats if b.step_time > 0]
    if not times:
        return floor_s
    return max(floor_s, multiple * statistics.median(times))


def is_hung(beats: list[Beat], now: float, floor_s: float = 60.0, multiple: float = 10.0) -> bool:
    """True when no rank has advanced for longer than the bound."""
    if not beats:
        return False
    newest = max(b.time for b in beats)
    return now - newest > hang_bound(beats, floor_s, multiple)


def straggler_scores(beats: list[Beat]) -> dict[int, float]:
    """Per-rank step time divided by the job median (1.0 = typical)."""
    times = [b.step_time for b in beats if b.step_time > 0]
    if not times:
        return {}
    med = statistics.median(times)
    return {b.rank: (b.step_time / med if med > 0 else 1.0) for b in beats if b.step_time > 0}


def export_straggler_metrics(directory: str | os.PathLike, registry=None):
    """Set ``openpod_train_straggler_score{rank}`` from the current heartbeats."""
    from prometheus_client import REGISTRY, Gauge

    registry = REGISTRY if registry is None else registry
    gauge = getattr(registry, "_openpod_straggler", None)
    if gauge is None:
        gauge = Gauge("openpod_train_straggler_score", "Rank step time / job median step time",
                      ["rank"], registry=registry)
        registry._openpod_straggler = gauge
    for rank, score in straggler_scores(read_beats(directory)).items():
        gauge.labels(rank=str(rank)).set(score)
    return gauge
