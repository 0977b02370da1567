"""Hang watchdog for the per-node launcher, plus the worker-side stack-dump hook.

Workers call :func:`install_stack_dump` once; the watchdog, on a hang, sends
SIGUSR1 to each worker (faulthandler writes every thread's Python stack to
``<dir>/stacks-rank-<r>.txt``), waits briefly, then SIGKILLs the workers so the
launcher's existing restart path runs (:meth:`Watchdog.check`). The in-process
launcher kills only the ranks that fell behind (:meth:`Watchdog.culprits`).
"""
from __future__ import annotations

import faulthandler
import os
import signal
import time
from pathlib import Path

from training.ft import clock
from training.ft.heartbeat import Beat, behind, hang_bound, is_hung, read_beats

_STACK_FILES: dict[Path, object] = {}  # the file faulthandler writes to, kept alive (one per process)


def clear_state(directory: str | os.PathLike, beats_dir: str | os.PathLike | None = None) -> None:
    """Remove a node's rank heartbeats (in ``beats_dir``, default ``directory``) and worker pid files (before the
    workers start, after a hang)."""
    d = Path(directory)
    b = Path(beats_dir) if beats_dir is not None else d
    for stale in [*d.glob("rank-*.json"), *b.glob("rank-*.json"), *d.glob("pid-*")]:
        stale.unlink(missing_ok=True)


def install_stack_dump(directory: str | os.PathLike, rank: int) -> Path:
    """SIGUSR1 writes every thread's stack to ``stacks-rank-<rank>.txt``. Idempotent: an in-process restart's
    next generation calls it again and keeps the open file (each call used to open one more: +1 fd a generation)."""
    path = Path(directory) / f"stacks-rank-{rank}.txt"
    if path in _STACK_FILES:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a")  # noqa: SIM115 - must outlive this call
    faulthandler.register(signal.SIGUSR1, file=f, all_threads=True)
    for old in _STACK_FILES.values():  # no longer faulthandler's
        old.close()
    _STACK_FILES.clear()
    _STACK_FILES[path] = f
    return path


class Watchdog:
    def __init__(self, directory: str | os.PathLike, floor_s: float = 60.0, multiple: float = 10.0,
                 dump_wait_s: float = 1.0, beats_dir: str | os.PathLike | None = None) -> None:
        self.dir = Path(directory)  # pid files and stack dumps
        self.beats_dir = Path(beats_dir) if beats_dir is not None else self.dir  # heartbeats (node-local)
        self.floor_s, self.multiple, self.dump_wait_s = floor_s, multiple, dump_wait_s

    def beats(self):
        return read_beats(self.beats_dir)

    def pids(self) -> list[int]:
        """The local workers' PIDs, from the pid files they write at start."""
        return [int(p.read_text()) for p in self.dir.glob("pid-*") if p.read_text().strip().isdigit()]

    def _beats(self, beats: list[Beat] | None) -> list[Beat]:
        """``beats`` to judge (the whole job's, from its store: training/ft/jobbeats.py), else this node's files."""
        return read_beats(self.beats_dir) if beats is None else beats

    def bound(self, beats: list[Beat] | None = None) -> float:
        return hang_bound(self._beats(beats), self.floor_s, self.multiple)

    def hung(self, now: float | None = None, beats: list[Beat] | None = None) -> bool:
        """No rank advanced for the bound."""
        return is_hung(self._beats(beats), clock.now() if now is None else now, self.floor_s, self.multiple)

    def quiet(self, now: float | None = None, beats: list[Beat] | None = None) -> float:
        """Seconds since a rank last advanced (0 with no beats)."""
        beats = self._beats(beats)
        return (clock.now() if now is None else now) - max(b.advanced for b in beats) if beats else 0.0

    def culprits(self, beats: list[Beat] | None = None) -> list[int]:
        """The ranks that did not begin the step their peers began (heartbeat.behind); empty if none lags."""
        return behind(self._beats(beats))

    def dump_stacks(self, pids: list[int]) -> None:
        """SIGUSR1 to ``pids`` (faulthandler writes their stacks), then wait ``dump_wait_s`` for the files."""
        for pid in pids:
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(self.dump_wait_s)

    def check(self, pids: list[int], now: float | None = None) -> bool:
        """Return True (after dumping stacks and killing ``pids``) when the job is hung."""
        if not self.hung(now):
            return False
        self.dump_stacks(pids)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return True
