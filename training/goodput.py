"""Goodput accounting: where the job's wall-clock time went, across restarts.

Categories: ``productive`` (steps never run before), ``startup`` (process start to
first step, restore excluded), ``restore``, ``checkpoint_blocking``, ``replayed``
(steps redone after a failure), ``rescheduling`` (from the previous incarnation's
last heartbeat to this process's start). Rank 0 keeps a ledger in the run directory
so totals accumulate over restarts, and exports them as Prometheus metrics (a
textfile and optionally an HTTP endpoint) and a JSON summary.

The checkpoint gauges hold what an alert needs between scrapes (docs/observability.md, "Public metrics"):
``openpod_checkpoint_failures`` counts save-path failures over all incarnations of the job (it only grows,
so ``increase()`` sees each one whenever it is scraped); ``openpod_checkpoint_restore_source_failures`` and
``openpod_checkpoint_restored_older`` describe this incarnation's restore and hold until the next one;
``openpod_checkpoint_last_durable_timestamp_seconds`` is when a checkpoint last became durable (the job's
first start while none has), carried over restarts by the ledger.
``openpod_checkpoint_final_step_not_durable{tier}`` says, at the end of a job, which shared tiers lack its last
step (the launcher's exit 4); the pod is not scraped once it ends, so :meth:`finished_not_durable` holds the
process until one scrape has read it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, start_http_server, write_to_textfile

from training.ft import clock
from training.storage_utils import atomic_write

log = logging.getLogger("training.goodput")

CATEGORIES = ("productive", "startup", "restore", "checkpoint_blocking", "replayed", "rescheduling")
LEDGER = "goodput.json"
# How long a job that ends with a shared tier behind waits for a scrape to read that (the scrape interval is 30 s,
# observability/scrape.py prometheus_config; twice that, and a margin). Only that ending waits.
FINAL_SCRAPE_WAIT_S = 65.0


class _Scrapes:
    """A collector with no families that counts the scrapes of the metrics port (so a process about to end can
    wait for one)."""

    def __init__(self) -> None:
        self.count = 0
        self.cond = threading.Condition()

    def describe(self):
        return []

    def collect(self):
        with self.cond:
            self.count += 1
            self.cond.notify_all()
        return []


def process_start_time() -> float:
    """Wall-clock start of this process (Linux /proc), so interpreter and import time count as start-up."""
    return time.time() - process_age()


def process_age() -> float:
    """Seconds since this process started, on the boot clock (Linux /proc: its start in clock ticks since boot),
    which no wall-clock step moves; 0.0 where /proc cannot tell."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        return max(0.0, clock.now() - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def durable_commits(checkpointer) -> int:
    """Checkpoints this rank has committed to a durable (shared) tier: promotions into the first shared tier, or
    commits when the first tier is itself shared (training/checkpoint/stats.py ``SaveStats``)."""
    from training.checkpoint.tiers import SHARED

    if checkpointer.durable is not None:
        return checkpointer.stats.promoted.get(checkpointer.durable.kind, 0)
    return checkpointer.stats.committed if checkpointer.first.kind in SHARED else 0


class Goodput:
    def __init__(self, run_dir: str | Path, *, rank: int, metrics_port: int | None = None,
                 started: float | None = None, serve: bool | None = None):
        """``serve``: whether this process serves ``metrics_port`` (default: rank 0); the runtime serves from
        each node's local rank 0, so every pod of a job is a scrape target."""
        self.rank = rank
        self.dir = Path(run_dir)
        self.started = process_start_time() if started is None else started
        # The same moment on the boot clock, which start-up is measured on, and the wall-clock offset then: a
        # wall-clock step later is recorded (``wall_clock_step_s``), never booked as start-up or training.
        self._boot_started = clock.now() - (process_age() if started is None else max(0.0, time.time() - started))
        self._wall_offset = time.time() - clock.now()
        self.wall_clock_step_s = 0.0
        self.seconds = dict.fromkeys(CATEGORIES, 0.0)
        prev = self._read_ledger()
        self.prior = {k: float(prev.get("seconds", {}).get(k, 0.0)) for k in CATEGORIES}
        self.high_water = int(prev.get("high_water_step", 0))
        self.incarnation = int(prev.get("incarnations", 0)) + 1
        self.job_started = float(prev.get("job_started", self.started))
        # Checkpoint figures: failures of earlier incarnations, this one's (set by persist), and held values.
        self._prior_ckpt_failures = int(prev.get("checkpoint_failures", 0))
        self._ckpt = {"checkpoint_failures": 0, "restore_source_failures": 0, "restored_older": 0}
        self.last_durable = float(prev.get("last_durable", self.job_started))
        self._durable_count = None  # callable: durable commits so far (watch_durable)
        self._durable_seen = 0
        if prev and not prev.get("finished"):
            self.seconds["rescheduling"] = max(0.0, self.started - float(prev.get("last_alive", self.started)))
        self._http = None  # (server, thread) while serving metrics_port
        self._last_write = 0.0
        self._write_failed: set[str] = set()
        self.registry = CollectorRegistry()
        self._g_seconds = Gauge("openpod_training_seconds", "Wall-clock seconds by category, all incarnations",
                                ["category"], registry=self.registry)
        self._g_ratio = Gauge("openpod_goodput_ratio", "Productive seconds / all seconds", registry=self.registry)
        self._g_step = Gauge("openpod_training_step", "Last completed optimizer step", registry=self.registry)
        self._g_incarnations = Gauge("openpod_training_incarnations",
                                     "Starts of the job so far, this one included (from the ledger)",
                                     registry=self.registry)
        self._g_incarnations.set(self.incarnation)
        self._g_ckpt_fail = Gauge("openpod_checkpoint_failures", "Checkpoint saves and tier promotions that failed, "
                                  "all incarnations (only grows)", registry=self.registry)
        self._g_src_fail = Gauge("openpod_checkpoint_restore_source_failures",
                                 "Checkpoint sources still unreadable after retries at this incarnation's restore",
                                 registry=self.registry)
        self._g_older = Gauge("openpod_checkpoint_restored_older",
                              "1 if this incarnation resumed from an older step than the newest checkpoint seen",
                              registry=self.registry)
        self._g_durable = None  # openpod_checkpoint_last_durable_timestamp_seconds, once watch_durable is called
        self._g_final = Gauge("openpod_checkpoint_final_step_not_durable", "At the end of the job: 1 for each "
                              "shared tier that lacks its last step, 0 for the others", ["tier"],
                              registry=self.registry)
        self._tier_lag = None  # callable: {tier kind: saves behind} (watch_tier_lag)
        self._g_lag = None
        self._set_checkpoint_gauges()
        # Served over HTTP: the ledger's gauges and what only a scrape computes (``serve_also``), e.g. the
        # runtime's openpod_train_straggler_score (training/straggler.py). metrics.prom gets the gauges alone,
        # so writing it never runs a scrape-time collector on the training step.
        self.served = CollectorRegistry()
        self.served.register(self.registry)
        self._scrapes = _Scrapes()
        self.served.register(self._scrapes)
        if metrics_port is not None and (rank == 0 if serve is None else serve):
            self._http = start_http_server(metrics_port, addr="0.0.0.0", registry=self.served)

    def serve_also(self, collector) -> None:
        """Serve ``collector`` on the metrics port (collected at scrape time only, never into metrics.prom)."""
        self.served.register(collector)

    def watch_durable(self, commits) -> None:
        """Export when a checkpoint last became durable: ``commits()`` returns how many checkpoints this rank
        has committed to its durable tier so far (read at each :meth:`persist`, at most a second apart while
        steps run). Jobs that checkpoint call this once; the gauge starts at the last durable time the ledger
        holds, else at the job's first start, so a job that never reaches a durable tier ages from its start."""
        self._durable_count = commits
        self._durable_seen = commits()
        if self._g_durable is None:
            self._g_durable = Gauge("openpod_checkpoint_last_durable_timestamp_seconds",
                                    "Unix time a checkpoint last became durable (the job's first start while none "
                                    "has), over all incarnations", registry=self.registry)
        self._g_durable.set(self.last_durable)

    def watch_tier_lag(self, lag, bound: int, shared: tuple[str, ...] = ()) -> None:
        """Export how many saves each further checkpoint tier is behind this rank's newest save due there
        (``lag()``: {tier kind: saves}, read at each :meth:`persist`) as ``openpod_checkpoint_tier_lag_saves``,
        and the bound past which the checkpointer warns as ``openpod_checkpoint_tier_lag_bound_saves``. The
        ``shared`` tier kinds among them get ``openpod_checkpoint_final_step_not_durable`` 0 while the job runs
        (nothing missing yet), so that series exists before the end sets it."""
        self._tier_lag = lag
        self._g_lag = Gauge("openpod_checkpoint_tier_lag_saves", "Saves due in a checkpoint tier that this rank "
                            "has not copied there yet (each tier copies on its own thread)", ["tier"],
                            registry=self.registry)
        self._g_lag_bound = Gauge("openpod_checkpoint_tier_lag_bound_saves", "The lag "
                                  "(openpod_checkpoint_tier_lag_saves) past which the checkpointer warns",
                                  registry=self.registry)
        self._g_lag_bound.set(bound)
        self._set_tier_lag()
        for kind in sorted(set(lag()) & set(shared)):
            self._g_final.labels(tier=kind).set(0)

    def _set_tier_lag(self) -> None:
        if self._tier_lag is not None:
            for kind, n in self._tier_lag().items():
                self._g_lag.labels(tier=kind).set(n)

    def finished_not_durable(self, durable: dict, behind: dict, wait_s: float = FINAL_SCRAPE_WAIT_S) -> bool:
        """At the end of the job: export, per shared tier (``durable``'s keys), whether it lacks the last step
        (``behind``: the result's ``checkpoints.tiers_behind``), and write it out; with a tier behind and the
        metrics port served here, wait up to ``wait_s`` for one scrape to read it (a finished pod is not scraped).
        Returns whether a scrape read it (False when nothing was waited for)."""
        for kind in sorted(set(durable) | set(behind)):
            self._g_final.labels(tier=kind).set(1 if kind in behind else 0)
        with self._scrapes.cond:
            seen = self._scrapes.count
        self.persist(finished=True)
        if not behind or self._http is None:
            return False
        with self._scrapes.cond:
            self._scrapes.cond.wait_for(lambda: self._scrapes.count > seen, timeout=wait_s)
            read = self._scrapes.count > seen
        if not read:
            log.warning("no scrape read openpod_checkpoint_final_step_not_durable within %.0f s", wait_s)
        return read

    def close(self) -> None:
        """Stop serving metrics (an in-process restart builds a new Goodput on the same port)."""
        if self._http is not None:
            server, _thread = self._http
            server.shutdown()
            server.server_close()
            self._http = None

    def _read_ledger(self) -> dict:
        try:
            return json.loads((self.dir / LEDGER).read_text())
        except (OSError, ValueError):
            return {}

    @contextlib.contextmanager
    def phase(self, category: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(category, time.perf_counter() - t0)

    def add(self, category: str, seconds: float) -> None:
        self.seconds[category] += seconds

    def training_starts(self) -> None:
        """Everything from process start until now that was not restore is start-up."""
        self.seconds["startup"] = max(0.0, clock.now() - self._boot_started - self.seconds["restore"])
        self._note_wall_clock()

    def _note_wall_clock(self) -> None:
        """Record (log once per step, keep in the ledger) how far the wall clock stepped since this process began."""
        step = (time.time() - clock.now()) - self._wall_offset
        if abs(step - self.wall_clock_step_s) > 1.0:
            log.warning("the wall clock stepped %+.1f s (since this process started: %+.1f s); hang and start-up "
                        "timers run on the boot clock and are unaffected", step - self.wall_clock_step_s, step)
            self.wall_clock_step_s = step

    def step_done(self, step: int, seconds: float) -> None:
        """``step`` is the 0-based index of the optimizer step just finished."""
        self.add("replayed" if step < self.high_water else "productive", seconds)
        self.high_water = max(self.high_water, step + 1)
        self._g_step.set(step + 1)
        if time.monotonic() - self._last_write > 1.0:
            self.persist()

    def totals(self) -> dict[str, float]:
        return {k: self.prior[k] + self.seconds[k] for k in CATEGORIES}

    def summary(self) -> dict:
        tot = self.totals()
        wall = sum(tot.values())
        return {"seconds": {k: round(v, 4) for k, v in tot.items()},
                "goodput": round(tot["productive"] / wall, 4) if wall else 0.0,
                "incarnations": self.incarnation, "high_water_step": self.high_water}

    def persist(self, *, finished: bool = False, checkpoint_failures: int | None = None,
                restore_source_failures: int | None = None, restored_older: int | None = None) -> None:
        """Set the gauges and write the ledger and metrics.prom (rank 0). The checkpoint figures are
        ``SaveStats.gauges()`` of this incarnation: save-path failures, and the restore's unreadable sources and
        fall-back apart. One left out (None) keeps its last value: a periodic persist never clears them."""
        self._last_write = time.monotonic()
        self._note_wall_clock()
        given = {"checkpoint_failures": checkpoint_failures, "restore_source_failures": restore_source_failures,
                 "restored_older": restored_older}
        for k, v in given.items():
            if v is not None:
                if v < 0:
                    raise ValueError(f"Goodput.persist: {k} must be >= 0, got {v}")
                self._ckpt[k] = int(v)
        if self._durable_count is not None:
            n = self._durable_count()
            if n > self._durable_seen:
                self._durable_seen, self.last_durable = n, time.time()
        s = self.summary()
        for k, v in s["seconds"].items():
            self._g_seconds.labels(category=k).set(v)
        self._g_ratio.set(s["goodput"])
        self._set_checkpoint_gauges()
        self._set_tier_lag()
        if self.rank != 0:
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # reported by the writes below
        ledger = {"seconds": s["seconds"], "high_water_step": self.high_water, "last_alive": time.time(),
                  "finished": finished, "incarnations": self.incarnation, "job_started": self.job_started,
                  "checkpoint_failures": self.checkpoint_failures, "last_durable": self.last_durable,
                  "wall_clock_step_s": round(self.wall_clock_step_s, 3)}
        self._write("goodput ledger", lambda: atomic_write(self.dir / LEDGER, json.dumps(ledger).encode(),
                                                           fsync=False))
        self._write("metrics file", lambda: write_to_textfile(str(self.dir / "metrics.prom"), self.registry))

    @property
    def checkpoint_failures(self) -> int:
        """Save-path failures over all incarnations (earlier ones from the ledger, plus this one's)."""
        return self._prior_ckpt_failures + self._ckpt["checkpoint_failures"]

    def _set_checkpoint_gauges(self) -> None:
        self._g_ckpt_fail.set(self.checkpoint_failures)
        self._g_src_fail.set(self._ckpt["restore_source_failures"])
        self._g_older.set(min(self._ckpt["restored_older"], 1))
        if self._g_durable is not None:
            self._g_durable.set(self.last_durable)

    def _write(self, what: str, write) -> None:
        """A full or read-only disk (ENOSPC, EIO, EROFS) costs this write, never the training; warned once per file."""
        try:
            write()
            self._write_failed.discard(what)
        except OSError as e:
            if what not in self._write_failed:
                log.warning("writing the %s in %s failed: %s; training continues", what, self.dir, e)
            self._write_failed.add(what)
