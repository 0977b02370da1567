"""Per-rank step heartbeats and the hang bound the launcher's watchdog uses.

Each rank writes ``<dir>/rank-<r>.json`` ({"rank", "step", "time", "step_time", "started",
"started_time", "finished"}) atomically after every step (``step`` done at ``time``) and when
it begins one (``started`` at ``started_time``). Times are the node's boot clock (training/ft/clock.py): a
wall-clock step never looks like a hang. The watchdog reads them all; a hang is
declared when no rank has advanced (begun or completed a step) for ``max(floor_s, multiple *
median recent step time)``;
:func:`behind` names the ranks that did not begin the step their peers began (the culprits:
the peers wait for them in that step's collective).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from training.ft import clock

log = logging.getLogger("training.ft")


@dataclass(frozen=True)
class Beat:
    rank: int
    step: int
    time: float
    step_time: float
    started: int = -1  # the step this rank began last (-1: none yet)
    started_time: float = 0.0
    finished: bool = False  # its steps are over (Runtime.finish)
    generation: int = 0  # the in-process restart generation this process was in when it wrote the beat
    compute_time: float = 0.0  # seconds of its last step before the gradient collective (training/straggler.py)
    phase: str = ""      # a long phase outside the steps it is in: "restore", "first_step" (compile, warm-up)
    phase_time: float = 0.0  # when it entered that phase

    @property
    def advanced(self) -> float:
        """When this rank last began or completed a step."""
        return max(self.time, self.started_time)


class Heartbeat:
    """Written by one rank after each step (cheap: one small atomic file write)."""

    def __init__(self, directory: str | os.PathLike, rank: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.generation = int(os.environ.get("OPENPOD_GENERATION", "0"))  # set per generation (inprocess.py)
        self._last: float | None = None
        # Written at once: a new generation's rank (in-process restart) must not be judged by the beat of the
        # process it replaces, which may have begun a step later than the one the job restored.
        # (Its started_time is when this process joined: the watchdog's clock for it until it begins a step.)
        self._write(Beat(rank, 0, 0.0, 0.0, started_time=clock.now(), generation=self.generation))
        self._beat = Beat(rank, 0, 0.0, 0.0, generation=self.generation)

    def beat(self, step: int, now: float | None = None, compute_time: float = 0.0) -> Beat:
        """``step`` steps are done; ``compute_time``: what the last one computed before its gradient collective."""
        now = clock.now() if now is None else now
        step_time = 0.0 if self._last is None else now - self._last
        self._last = now
        return self._write(replace(self._beat, step=step, time=now, step_time=step_time, compute_time=compute_time,
                                   phase=""))

    def begin(self, step: int, now: float | None = None) -> Beat:
        """This rank begins ``step`` (it got past its data loading and fault hooks). This process's first step
        is a phase of its own (compilation, warm-up) until :meth:`beat`."""
        now = clock.now() if now is None else now
        first = self._last is None and not self._beat.phase
        return self._write(replace(self._beat, started=step, started_time=now,
                                   **({"phase": "first_step", "phase_time": now} if first else {})))

    @contextlib.contextmanager
    def phase(self, name: str):
        """Say that this rank is in ``name`` (e.g. "restore") until the block ends: the watchdog gives it up to
        :data:`PHASE_LIMIT_S` instead of the step-time bound."""
        self._write(replace(self._beat, phase=name, phase_time=clock.now()))
        try:
            yield
        finally:
            self._write(replace(self._beat, phase="", started_time=clock.now()))

    def finished(self) -> Beat:
        """The steps are over (the final flush and exit follow): the watchdog no longer counts this rank -
        it watches steps, and a final durable write may take longer than the bound."""
        return self._write(replace(self._beat, finished=True))

    def _write(self, b: Beat) -> Beat:
        """A full or failing disk (ENOSPC, EIO, EROFS) costs this beat, never the training: warned once. (The
        watchdog then sees no progress from this rank and judges it as it would a silent one.)"""
        self._beat = b
        path = self.dir / f"rank-{self.rank}.json"
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(b.__dict__))
            os.replace(tmp, path)
            self._failed = False
        except OSError as e:
            if not getattr(self, "_failed", False):
                log.warning("writing heartbeat %s failed: %s; training continues", path, e)
            self._failed = True
        return b


def forget(directory: str | os.PathLike, rank: int) -> None:
    """Drop a dead rank's beat (the launcher, as it replaces the rank): until its replacement starts, the
    watchdog judges only the live ranks."""
    Path(directory, f"rank-{rank}.json").unlink(missing_ok=True)


def read_beats(directory: str | os.PathLike) -> list[Beat]:
    beats = []
    for p in sorted(Path(directory).glob("rank-*.json")):
        try:
            beats.append(Beat(**json.loads(p.read_text())))
        except (OSError, ValueError, TypeError):
            continue  # partially visible or foreign file: skip this round
    return beats


# How long a rank may stay in a phase before the watchdog judges it hung: a restore reads a whole checkpoint
# (1.3 GiB from S3 took 242 s, over the 300 s floor for larger ones); a first step compiles. Beyond this, a
# phase is judged as steps are.
PHASE_LIMIT_S = 3600.0


def hang_bound(beats: list[Beat], floor_s: float = 60.0, multiple: float = 10.0) -> float:
    times = [b.step_time for b in beats if b.step_time > 0]
    if not times:
        return floor_s
    return max(floor_s, multiple * statistics.median(times))


def is_hung(beats: list[Beat], now: float, floor_s: float = 60.0, multiple: float = 10.0) -> bool:
    """True when no rank has advanced for longer than the bound (ranks whose steps are over do not count)."""
    beats = [b for b in beats if not b.finished]
    if not beats:
        return False
    # A rank restoring, or every rank in its first step together (compiling): progress is not measured in steps
    # there. A first step that some rank never began is a hang like any other (its peers wait for it).
    lagging = behind(beats)
    if any(b.phase and now - b.phase_time <= max(PHASE_LIMIT_S, floor_s)
           and (b.phase != "first_step" or not lagging) for b in beats):
        return False
    newest = max(b.advanced for b in beats)
    return now - newest > hang_bound(beats, floor_s, multiple)


def behind(beats: list[Beat]) -> list[int]:
    """The ranks that did not begin the newest step another rank began: in a hang, the ranks the others
    wait for in that step's collectives. Empty when every rank began the same step (stuck together)."""
    beats = [b for b in beats if not b.finished]
    newest = max((b.started for b in beats), default=-1)
    return sorted(b.rank for b in beats if b.started < newest)


def straggler_scores(beats: list[Beat]) -> dict[int, float]:
    """Per-rank step time divided by the job median (1.0 = typical)."""
    times = [b.step_time for b in beats if b.step_time > 0]
    if not times:
        return {}
    med = statistics.median(times)
    return {b.rank: (b.step_time / med if med > 0 else 1.0) for b in beats if b.step_time > 0}

