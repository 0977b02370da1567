"""In-process restart (``--restart in-process``): survivors re-form the process group inside their own processes.

Two halves, both built on torch.distributed's own store and process-group API:

* the launcher (:func:`supervise_ranks`) starts one worker per local rank itself, with a
  ``TCPStore`` it hosts. When a worker exits with an error it starts a replacement for that
  rank alone and moves the job to the next *generation* (the store key ``generation``);
* a worker (:class:`InProcessRestart`) joins the process group of its generation through a
  ``PrefixStore`` (``openpod/gen-<g>/``), so every generation rendezvouses on fresh keys of
  the same store. When the training function raises (the collective with the dead peer
  fails), it waits for the launcher's next generation, drops the process group and
  whatever the runtime registered with :meth:`InProcessRestart.on_abort`, joins the new
  generation's group and calls the training function again: the runtime restores the
  newest step every rank holds (node memory or the buddy's copy) and goes on. The
  interpreter, imported modules, the data set's mapped cache - and on GPUs the CUDA
  context - are kept.

An error that is not followed by a new generation within ``wait_s`` (a bug, not a lost
peer) is raised as before: the worker exits and the launcher treats it as a failure.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable

from training.ft.watchdog import clear_state

log = logging.getLogger("training")

GENERATION_KEY = "generation"
EXIT_REFUSED = 3  # training.worker: refused a fresh start; restarting would refuse again

active: "InProcessRestart | None" = None  # the running worker's restarter (Runtime registers its abort hook)


class InProcessRestart:
    """Worker side: run ``fn`` in the process group of the current generation; re-form it after a peer is lost."""

    def __init__(self, *, store_addr: str, rank: int, world_size: int, backend: str, pg_timeout_s: float,
                 max_restarts: int, wait_s: float = 60.0):
        import torch.distributed as dist

        host, _, port = store_addr.rpartition(":")
        # Its timeout bounds each generation's rendezvous too: a replacement may take minutes to start (no spare).
        self.store = dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=pg_timeout_s))
        self.rank, self.world_size, self.backend = rank, world_size, backend
        self.pg_timeout = timedelta(seconds=pg_timeout_s)
        self.max_restarts, self.wait_s = max_restarts, wait_s
        self.generation = int(os.environ.get("OPENPOD_GENERATION", "0"))
        self.restarts = 0
        self._aborts: list[Callable[[], None]] = []

    def on_abort(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when this generation is given up (release threads, ports, buffers; never block long)."""
        self._aborts.append(fn)

    def summary(self) -> dict:
        return {"mode": "in-process", "restarts": self.restarts, "generation": self.generation}

    def _join(self) -> None:
        import torch.distributed as dist

        t0 = time.perf_counter()
        store = dist.PrefixStore(f"openpod/gen-{self.generation}/", self.store)
        dist.init_process_group(self.backend, store=store, rank=self.rank, world_size=self.world_size,
                                timeout=self.pg_timeout)
        log.info("rank %d joined the process group of generation %d in %.2fs", self.rank, self.generation,
                 time.perf_counter() - t0)

    def _store_generation(self) -> int:
        return int(self.store.get(GENERATION_KEY))

    def _wait_next_generation(self) -> int | None:
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            g = self._store_generation()
            if g > self.generation:
                return g
            time.sleep(0.02)
        return None

    def _abort(self) -> None:
        import torch.distributed as dist

        t0 = time.perf_counter()
        for fn in self._aborts:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - a half-broken generation: release what can be released
                log.warning("rank %d: abort hook %s failed: %s", self.rank, getattr(fn, "__qualname__", fn), e)
        self._aborts.clear()
        t1 = time.perf_counter()
        if dist.is_initialized():
            try:  # NCCL: abort the communicators first (a destroy would wait for the stuck kernels)
                dist.distributed_c10d._abort_process_group()
            except Exception:  # noqa: BLE001 - gloo, or already torn down
                pass
            if dist.is_initialized():
                dist.destroy_process_group()
        log.info("rank %d: runtime released in %.2fs, process group in %.2fs", self.rank, t1 - t0,
                 time.perf_counter() - t1)

    def run(self, fn: Callable[[], dict]) -> dict:
        """``fn()``'s result once it returns; after a lost peer, ``fn`` runs again in the next generation."""
        global active
        from training.checkpoint import RefusedFreshStart

        active = self
        try:
            while True:
                self._join()
                try:
                    return fn()
                except RefusedFreshStart:
                    raise
                except Exception as e:  # noqa: BLE001 - the launcher decides: a new generation means a lost peer
                    t0 = time.monotonic()
                    log.warning("rank %d: generation %d failed (%s: %s); waiting for the launcher's next generation",
                                self.rank, self.generation, type(e).__name__, str(e).splitlines()[0][:200])
                    g = self._wait_next_generation()
                    log.info("rank %d: generation %s announced %.2fs after the failure", self.rank, g,
                             time.monotonic() - t0)
                    if g is None or self.restarts >= self.max_restarts:
                        log.error("rank %d: %s", self.rank, "no new generation within %.0fs" % self.wait_s
                                  if g is None else f"in-process restarts exhausted ({self.max_restarts})")
                        raise
                    self._abort()
                    self.generation, self.restarts = g, self.restarts + 1
                    log.warning("rank %d: re-forming the process group in generation %d (same process, pid %d; "
                                "%.2fs after the failure)", self.rank, g, os.getpid(), time.monotonic() - t0)
        finally:
            active = None


def standby_assignment(store_addr: str, standby_id: str, poll_s: float = 0.02) -> tuple[int, int]:
    """A warm spare (``OPENPOD_STANDBY``): block until the launcher assigns it a rank; (rank, generation).

    Call it after the expensive imports: the spare has paid its start-up before any fault."""
    import torch.distributed as dist

    host, _, port = store_addr.rpartition(":")
    store = dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=60))
    key = f"standby/{standby_id}"
    while not store.check([key]):
        time.sleep(poll_s)
    rank, generation = (int(x) for x in store.get(key).decode().split(":"))
    return rank, generation


def supervise_ranks(cmd: list[str], env: dict, *, nproc: int, host: str, max_restarts: int, stop_timeout: float,
                    echo: Callable[[str], None], ft_dir: Path | None = None, watchdog=None,
                    spares: int = 0) -> tuple[int, bool]:
    """Launcher side: run ``nproc`` workers (``cmd``) on this node; replace a failed one alone.

    ``spares`` warm standby workers (interpreter started, torch and the trainer imported, waiting on
    the store) take a failed rank's place at once; a new standby is started behind each one used.
    Each replacement moves the job to the next generation (at most ``max_restarts`` times).
    SIGTERM is passed to every worker, which get ``stop_timeout`` seconds before SIGKILL. A
    hang declared by ``watchdog`` (training/ft/watchdog.py) kills every local worker; each is
    replaced. Returns (exit status, signalled): 0 once every worker exited 0.
    """
    import torch.distributed as dist

    store = dist.TCPStore(host, 0, is_master=True, wait_for_workers=False)
    generation = 0
    store.set(GENERATION_KEY, str(generation))
    base = dict(env, MASTER_ADDR=host, MASTER_PORT=str(store.port), OPENPOD_RESTART_STORE=f"{host}:{store.port}",
                WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc))

    def start(rank: int) -> subprocess.Popen:
        e = dict(base, RANK=str(rank), LOCAL_RANK=str(rank), OPENPOD_GENERATION=str(generation))
        return subprocess.Popen(cmd, env=e, stdout=sys.stderr)

    standby: list[tuple[subprocess.Popen, int]] = []
    next_standby = 0

    def start_standby() -> None:
        nonlocal next_standby
        standby.append((subprocess.Popen(cmd, env=dict(base, OPENPOD_STANDBY=str(next_standby)), stdout=sys.stderr),
                        next_standby))
        next_standby += 1

    def replace(rank: int) -> tuple[subprocess.Popen, str]:
        while standby:
            p, sid = standby.pop(0)
            if p.poll() is None:
                store.set(f"standby/{sid}", f"{rank}:{generation}")
                start_standby()
                return p, f"standby worker {sid} (pid {p.pid})"
        if spares:
            start_standby()
        return start(rank), "a new worker"

    procs = {r: start(r) for r in range(nproc)}
    for _ in range(spares):
        start_standby()
    done: set[int] = set()
    restarts = 0
    signalled: list[int] = []
    deadline = None

    def forward(signum, frame):
        nonlocal deadline
        signalled.append(signum)
        echo("launcher: SIGTERM, asking the workers to checkpoint and stop")
        deadline = time.monotonic() + stop_timeout
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    def stop_all() -> None:
        everyone = [*procs.values(), *(p for p, _ in standby)]
        for p in everyone:
            if p.poll() is None:
                p.kill()
        for p in everyone:
            p.wait()

    previous = signal.signal(signal.SIGTERM, forward)
    next_watch = 0.0
    try:
        while True:
            if deadline is not None and time.monotonic() > deadline:
                stop_all()
                return 128 + signal.SIGKILL, True
            failed = []
            for r, p in procs.items():
                rc = p.poll()
                if rc is None or r in done:
                    continue
                if rc == 0:
                    done.add(r)
                else:
                    failed.append((r, rc))
            if len(done) == nproc:
                return 0, bool(signalled)
            if failed:
                worst = failed[0][1]
                if signalled or done or any(rc == EXIT_REFUSED for _, rc in failed) \
                        or restarts + 1 > max_restarts:
                    why = ("stopping" if signalled else "a rank already finished" if done
                           else "refused to start" if any(rc == EXIT_REFUSED for _, rc in failed)
                           else f"--max-restarts {max_restarts} used up")
                    echo(f"launcher: rank(s) {', '.join(str(r) for r, _ in failed)} exited ({worst}); {why}")
                    stop_all()
                    return (EXIT_REFUSED if any(rc == EXIT_REFUSED for _, rc in failed) else worst), bool(signalled)
                restarts += 1
                generation += 1
                store.set(GENERATION_KEY, str(generation))  # survivors re-form their process group on this
                for r, rc in failed:
                    procs[r], who = replace(r)
                    echo(f"launcher: rank {r} exited ({rc}); {who} replaces it alone, generation "
                         f"{generation} (in-process restart {restarts} of {max_restarts})")
            elif watchdog is not None and ft_dir is not None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + 1.0  # as often as the torchrun launcher's (the bound is seconds)
                pids = watchdog.pids()
                if pids and watchdog.check(pids):
                    echo(f"watchdog: no rank advanced for the bound ({watchdog.bound():.1f}s); stacks in {ft_dir}; "
                         "replacing the workers")
                    clear_state(ft_dir)
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop_all()
