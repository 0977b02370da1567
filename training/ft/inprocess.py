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

A worker does not wait for its collective to fail on its own: a watcher thread follows the
store's generation and, as soon as the launcher announces a new one, aborts the transport of
the current process group (:func:`abort_transport`) - a peer that hangs, or vanishes without
its sockets being closed (a frozen or powered-off host, a rank in an uninterruptible kernel
call), would otherwise hold the survivors' collective until the process-group timeout. Before
a generation's process group is formed every rank checks in (:meth:`InProcessRestart._assemble`),
and a rank whose generation is overtaken while it waits there goes on to the newer one, so
several failures in a row each cost one generation, never a rendezvous timeout.

An error that is not followed by a new generation within ``wait_s`` (a bug, not a lost
peer) is raised as before: the worker exits and the launcher treats it as a failure.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Callable

from training.ft import clock, jobbeats
from training.ft.heartbeat import forget, read_beats
from training.ft.watchdog import clear_state

log = logging.getLogger("training")

JOIN_TIMEOUT_S = 30.0  # forming a generation's process group, once every rank checked in
GENERATION_WAIT_S = 60.0  # a worker whose generation failed waits this long for the launcher's next one
GENERATION_KEY = "generation"
RESTARTS_KEY = "openpod/restarts"  # the job's in-process restarts so far, every node's launcher counting
FAILED_KEY = "openpod/failed"      # why a launcher gave up the job: every other launcher stops its workers too
EXIT_REFUSED = 3  # training.worker: refused a fresh start; restarting would refuse again

active: "InProcessRestart | None" = None  # the running worker's restarter (Runtime registers its abort hook)


def abort_transport(backend: str, keep_port: int) -> int:
    """Make this process's collectives in flight fail now; the number of TCP connections shut down.

    NCCL: ``_abort_process_group()`` aborts the communicators (torch 2.13.0
    torch/distributed/distributed_c10d.py:2460-2505: "currently only works with the NCCL backend").
    gloo has no abort: ``ProcessGroup.abort()`` calls each backend's ``abort()``
    (torch/include/torch/csrc/distributed/c10d/ProcessGroup.hpp:998-1001), whose default is empty
    (Backend.hpp:523-525), and ProcessGroupGloo.hpp overrides it only for send/recv work (lines 216,
    239) - a blocked all-reduce stays blocked (tried here on 2026-11-23). Shutting down this side's TCP
    connections does end it: gloo's pair reports "Connection closed by peer" and the collective raises.
    Every connected TCP socket of the process is shut down except those to ``keep_port`` (the store):
    the generation is being given up, and whatever else talked to peers is rebuilt with it.
    """
    if backend == "nccl":
        import torch.distributed as dist

        try:
            dist.distributed_c10d._abort_process_group()
        except Exception as e:  # noqa: BLE001 - already torn down; the sockets below still apply
            log.warning("process-group abort failed: %s", e)
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            s = socket.socket(fileno=int(fd))
        except OSError:
            continue
        try:
            if s.type == socket.SOCK_STREAM and s.family in (socket.AF_INET, socket.AF_INET6) \
                    and s.getpeername()[1] != keep_port:
                s.shutdown(socket.SHUT_RDWR)
                n += 1
        except OSError:
            pass  # not connected (a listener), or already closed
        finally:
            s.detach()  # the fd stays its owner's
    return n


def _resources() -> str:
    """What a generation must not leak, as logged at each join: open fds, threads (Python's and the kernel's)."""
    return (f"fds {len(os.listdir('/proc/self/fd'))}, threads {threading.active_count()} python "
            f"{len(os.listdir('/proc/self/task'))} os")


class InProcessRestart:
    """Worker side: run ``fn`` in the process group of the current generation; re-form it after a peer is lost."""

    def __init__(self, *, store_addr: str, rank: int, world_size: int, backend: str, pg_timeout_s: float,
                 max_restarts: int, wait_s: float = GENERATION_WAIT_S):
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
        self._store_addr = (host, int(port))
        self._lock = threading.Lock()
        self._armed: int | None = None  # the generation whose process group the watcher may abort
        self._stopped = threading.Event()

    def on_abort(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when this generation is given up (release threads, ports, buffers; never block long)."""
        self._aborts.append(fn)

    def summary(self) -> dict:
        return {"mode": "in-process", "restarts": self.restarts, "generation": self.generation}

    def _watch(self, poll_s: float = 0.1) -> None:
        """Watcher thread: abort the current generation's transport once the launcher announces a newer one."""
        import torch.distributed as dist

        try:
            store = dist.TCPStore(*self._store_addr, is_master=False, timeout=timedelta(seconds=60))  # own link
        except Exception as e:  # noqa: BLE001 - then collectives end only by failing on their own
            log.warning("rank %d: no generation watcher (%s)", self.rank, e)
            return
        while not self._stopped.wait(poll_s):
            try:
                g = int(store.get(GENERATION_KEY))
            except Exception:  # noqa: BLE001 - the launcher is gone: die_with_parent ends this process
                continue
            with self._lock:
                if self._armed is None or g <= self._armed:
                    continue
                t0 = time.perf_counter()
                n = abort_transport(self.backend, self._store_addr[1])
                log.warning("rank %d: generation %d announced while in generation %d: transport aborted "
                            "(%d connections shut down) in %.3fs", self.rank, g, self._armed, n,
                            time.perf_counter() - t0)
                self._armed = None

    def _assemble(self, poll_s: float = 0.02) -> None:
        """Check in to the current generation and wait until all ranks did; if the launcher moves on to a
        newer generation meanwhile (another rank failed), go on to that one. Then forming the process
        group waits for no one (a rendezvous on a generation that was overtaken would wait its timeout). A
        generation already overtaken when the last rank checks in is left too: a rank that checked in may have
        died since (a replacement killed as soon as it was assigned)."""
        while True:
            key = f"openpod/gen-{self.generation}/assembled"
            n = self.store.add(key, 1)
            while (g := self._store_generation()) <= self.generation and n < self.world_size:
                time.sleep(poll_s)
                n = self.store.add(key, 0)
            if g <= self.generation:
                return
            log.warning("rank %d: generation %d overtaken by %d before it formed", self.rank, self.generation, g)
            self.generation = g

    def _join(self) -> None:
        import torch.distributed as dist

        t0 = time.perf_counter()
        self._assemble()
        store = dist.PrefixStore(f"openpod/gen-{self.generation}/", self.store)
        # Every rank checked in, so the rendezvous waits for live peers only: bound it by JOIN_TIMEOUT_S, not the
        # process-group timeout, so a rank that dies in between costs seconds (this generation fails, the next
        # one follows). The group then gets its full timeout for collectives (new_group uses its own default).
        join = min(self.pg_timeout, timedelta(seconds=JOIN_TIMEOUT_S))
        try:
            dist.init_process_group(self.backend, store=store, rank=self.rank, world_size=self.world_size,
                                    timeout=join)
        except Exception:
            # The failed init numbered a group that does not exist: the next generation's default group must get
            # the same number (it is part of its store keys) on survivors and on a replacement's first group alike,
            # as destroy_process_group() ensures for a group that did form (distributed_c10d.py:2420-2427, 2.13.0).
            dist.distributed_c10d._world.group_count = 0
            raise
        if join < self.pg_timeout:
            dist.distributed_c10d._set_pg_timeout(self.pg_timeout)
        log.info("rank %d joined the process group of generation %d in %.2fs (%s)", self.rank, self.generation,
                 time.perf_counter() - t0, _resources())

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
        gc.collect()  # the generation's objects (see run()) are destroyed here, not during the next one
        log.info("rank %d: runtime released in %.2fs, process group in %.2fs", self.rank, t1 - t0,
                 time.perf_counter() - t1)

    def run(self, fn: Callable[[], dict]) -> dict:
        """``fn()``'s result once it returns; after a lost peer, ``fn`` runs again in the next generation."""
        global active
        from training.checkpoint import RefusedFreshStart

        active = self
        watcher = threading.Thread(target=self._watch, name="openpod-generation-watch", daemon=True)
        watcher.start()
        try:
            while True:
                try:
                    self._join()  # a peer lost while the group forms fails here: the same recovery
                    with self._lock:
                        self._armed = self.generation
                    os.environ["OPENPOD_GENERATION"] = str(self.generation)  # the heartbeat's (jobbeats.current)
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
                    with self._lock:  # from here on the watcher leaves this process's sockets alone
                        self._armed = None
                    # The failed generation's model, optimizer and DDP reducer (which holds the old process group)
                    # are reachable from the traceback's frames: let them go now, so _abort() destroys them here,
                    # on this thread, before the next generation exists - not in a garbage collection at a random
                    # moment of the next generation, on whichever thread allocates (CI saw one survivor abort with
                    # "terminate called without an active exception" 0.6 s into generation 1).
                    traceback.clear_frames(e.__traceback__)
                    e.__traceback__ = None
                    self._abort()
                    self.generation, self.restarts = g, self.restarts + 1
                    log.warning("rank %d: re-forming the process group in generation %d (same process, pid %d; "
                                "%.2fs after the failure)", self.rank, g, os.getpid(), time.monotonic() - t0)
        finally:
            with self._lock:
                self._armed = None
            self._stopped.set()
            # Let the watcher end (it polls every 0.1 s) and drop its TCPStore link on its own thread, before the
            # interpreter exits: a daemon thread still inside the store client at exit can end the process with
            # "terminate called without an active exception" (CI saw a replacement rank exit -6 that way after its
            # result was written).
            watcher.join(timeout=5.0)
            active = None


def standby_assignment(store_addr: str, standby_id: str, poll_s: float = 0.02) -> tuple[int, int, int]:
    """A warm spare (``OPENPOD_STANDBY`` = ``<node>/<id>``): block until the launcher assigns it a rank;
    (global rank, generation, local rank).

    Call it after the expensive imports: the spare has paid its start-up before any fault."""
    import torch.distributed as dist

    host, _, port = store_addr.rpartition(":")
    store = dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=60))
    key = f"standby/{standby_id}"
    while not store.check([key]):
        time.sleep(poll_s)
    rank, generation, local = (int(x) for x in store.get(key).decode().split(":"))
    return rank, generation, local


def supervise_ranks(cmd: list[str], env: dict, *, nproc: int, host: str, max_restarts: int, stop_timeout: float,
                    echo: Callable[[str], None], ft_dir: Path | None = None, watchdog=None,
                    spares: int = 0, nnodes: int = 1, node_rank: int = 0,
                    endpoint: str | None = None, node_timeout: float = 30.0,
                    node_wait: float = 600.0) -> tuple[int, bool]:
    """Launcher side: run ``nproc`` workers (``cmd``) on this node; replace a failed one alone.

    With ``nnodes`` > 1 every node's launcher runs this: node 0's hosts the job's store at ``endpoint``
    (host:port), the others connect to it; node ``i`` runs global ranks ``i * nproc ..``; the
    generation is one counter in that store, so a replacement on any node moves every rank on.

    ``spares`` warm standby workers (interpreter started, torch and the trainer imported, waiting on
    the store) take a failed rank's place at once; a new standby is started behind each one used.
    Each replacement moves the job to the next generation (at most ``max_restarts`` times in the whole job:
    the count is one counter in the store, so N nodes do not get N times the budget). A launcher that gives
    the job up says why in the store (``openpod/failed``); the others stop their workers at their next poll.
    A node whose launcher stops publishing its beat to the store (training/ft/jobbeats.py) for
    ``node_timeout`` seconds - an instance gone with its launcher and ranks - is declared lost by the
    first launcher to notice: its ranks count as failed (a new generation; the survivors leave the
    broken process group and wait for a full world) and every launcher waits up to ``node_wait``
    seconds for a launcher with that ``node_rank`` to join (a replacement pod), which starts that
    node's ranks in the current generation; on expiry the job stops with an error naming the node.
    SIGTERM is passed to every worker, which get ``stop_timeout`` seconds before SIGKILL. A
    hang declared by ``watchdog`` (training/ft/watchdog.py) dumps every local worker's stack and
    kills the ranks that fell behind (did not begin the step the others began; every local worker
    if none did); they are replaced like any failed worker and the others, released by the new
    generation, re-form in their processes. Returns (exit status, signalled): 0 once every worker
    exited 0.
    """
    import torch
    import torch.distributed as dist

    from training import worker_start

    try:
        how = worker_start.start_method(env.get(worker_start.ENV, "auto"), torch.backends.cuda.is_built())
    except ValueError as e:
        echo(f"error: {e}")
        return 2, False
    if how == "fork":
        worker_start.preload()  # once: every worker, standby and replacement is forked with it imported

    def popen(e: dict) -> subprocess.Popen | worker_start.ForkedWorker:
        if how == "fork":
            return worker_start.ForkedWorker(cmd, e)
        return subprocess.Popen(cmd, env=dict(e, **{worker_start.ENV: "exec"}), stdout=sys.stderr)

    if nnodes > 1:
        shost, _, sport = endpoint.rpartition(":")
        store = dist.TCPStore(shost, int(sport), is_master=node_rank == 0, wait_for_workers=False,
                              timeout=timedelta(seconds=600))  # a client waits this long for node 0's launcher
    else:
        shost, store = host, dist.TCPStore(host, 0, is_master=True, wait_for_workers=False)
    if node_rank == 0:
        jobbeats.init(store, nnodes)
        store.set(GENERATION_KEY, "0")
    else:
        store.wait([GENERATION_KEY])
    incarnation = store.add(f"openpod/node-{node_rank}/incarnation", 1)
    if incarnation > 1 and store.add(f"openpod/lost/node-{node_rank}/inc-{incarnation - 1}", 1) == 1:
        # This launcher replaces one that vanished before any other noticed: its ranks failed with it.
        used = store.add(RESTARTS_KEY, 1)
        if used > max_restarts:
            echo(f"launcher: node {node_rank} replaced; --max-restarts {max_restarts} used up")
            store.set(FAILED_KEY, f"node {node_rank}: replaced; --max-restarts {max_restarts} used up")
            return 1, False
        g = store.add(GENERATION_KEY, 1)
        echo(f"launcher: replacing node {node_rank}'s launcher (incarnation {incarnation}); generation {g} "
             f"(in-process restart {used} of {max_restarts})")
    generation = int(store.get(GENERATION_KEY))
    if incarnation > 1:
        echo(f"launcher: node {node_rank} rejoins the job in generation {generation}")
    first = node_rank * nproc  # this node's first global rank
    seen: dict[int, tuple] = {}  # other node -> (its last published beat, when this launcher saw it change)
    lost: dict[int, float] = {}  # node -> deadline for its replacement (monotonic)
    base = dict(env, MASTER_ADDR=shost, MASTER_PORT=str(store.port), OPENPOD_RESTART_STORE=f"{shost}:{store.port}",
                WORLD_SIZE=str(nnodes * nproc), LOCAL_WORLD_SIZE=str(nproc))

    def start(local: int) -> subprocess.Popen | worker_start.ForkedWorker:
        e = dict(base, RANK=str(first + local), LOCAL_RANK=str(local), OPENPOD_GENERATION=str(generation))
        return popen(e)

    standby: list[tuple[subprocess.Popen | worker_start.ForkedWorker, int]] = []
    next_standby = 0

    def start_standby() -> None:
        nonlocal next_standby
        standby.append((popen(dict(base, OPENPOD_STANDBY=f"{node_rank}/{next_standby}")), next_standby))
        next_standby += 1

    def replace(local: int) -> tuple[subprocess.Popen | worker_start.ForkedWorker, str]:
        while standby:
            p, sid = standby.pop(0)
            if p.poll() is None:
                store.set(f"standby/{node_rank}/{sid}", f"{first + local}:{generation}:{local}")
                start_standby()
                return p, f"standby worker {sid} (pid {p.pid})"
        if spares:
            start_standby()
        return start(local), "a new worker"

    procs = {r: start(r) for r in range(nproc)}
    for _ in range(spares):
        start_standby()
    done: set[int] = set()
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

    def give_up(why: str) -> None:
        """Tell the other launchers; node 0 (the store's host) waits a little for them to read it."""
        try:
            store.set(FAILED_KEY, why)
            wait_until = time.monotonic() + 10.0
            while node_rank == 0 and store.add(FAILED_KEY + "/seen", 0) < nnodes - 1 - len(lost) \
                    and time.monotonic() < wait_until:
                time.sleep(0.1)
        except RuntimeError:
            pass  # the store is gone: the other launchers find that out themselves

    def note_beats(nodes: list[jobbeats.NodeBeats], now: float) -> None:
        """Record when each other node's beat last moved; a lost node whose beat moves has a new launcher."""
        for n in nodes:
            j = n.node
            if j != node_rank and (j not in seen or seen[j][0] != n.time):
                seen[j] = (n.time, now)
                if j in lost and n.time is not None:
                    del lost[j]
                    echo(f"launcher: node {j} rejoined (a new launcher with --node-rank {j})")

    def watch_nodes(nodes: list[jobbeats.NodeBeats]) -> str | None:
        """Declare a node lost whose launcher went silent; why the job must stop, if it must."""
        nonlocal generation
        now = clock.now()
        note_beats(nodes, now)
        for n in nodes:
            j = n.node
            if j == node_rank:
                continue
            quiet = now - seen[j][1]
            if n.time is None or j in lost or quiet <= node_timeout or store.check([f"openpod/done/node-{j}"]):
                continue
            lost[j] = now + node_wait
            inc = store.add(f"openpod/node-{j}/incarnation", 0)
            ranks = f"{j * nproc}..{(j + 1) * nproc - 1}" if nproc > 1 else str(j * nproc)
            wait = f"waiting up to {node_wait:.0f}s for a launcher with --node-rank {j} to replace it"
            if store.add(f"openpod/lost/node-{j}/inc-{inc}", 1) > 1:
                echo(f"launcher: node {j} lost (declared by another launcher); {wait}")
                continue
            used = store.add(RESTARTS_KEY, 1)
            if used > max_restarts:
                return f"node {j} lost; --max-restarts {max_restarts} used up (the job's: {used - 1} so far)"
            generation = store.add(GENERATION_KEY, 1)  # its ranks failed: the survivors move on
            echo(f"launcher: node {j} lost: its launcher silent for {quiet:.1f}s (bound {node_timeout:.0f}s), rank(s) "
                 f"{ranks} with it; generation {generation} (in-process restart {used} of {max_restarts}); {wait}")
        for j, deadline in lost.items():
            if now > deadline:
                return f"node {j} lost and no launcher with --node-rank {j} joined within {node_wait:.0f}s"
        return None

    previous = signal.signal(signal.SIGTERM, forward)
    next_watch = 0.0
    judge = watchdog is not None and ft_dir is not None  # hangs are judged here (from the job's beats)
    beats_dir = watchdog.beats_dir if watchdog is not None else ft_dir  # node-local heartbeats
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
                if lost:  # a replacement may have joined and finished the job between two polls: say it rejoined
                    note_beats(jobbeats.gather(store, nnodes), clock.now())
                if nnodes > 1:  # node 0's launcher keeps the store up until every node's workers are done
                    store.set(f"openpod/done/node-{node_rank}", "1")  # its beat stops: not a lost node
                    store.add("nodes-done", 1)
                    wait_until = time.monotonic() + max(stop_timeout, 60.0)
                    while node_rank == 0 and store.add("nodes-done", 0) < nnodes and time.monotonic() < wait_until:
                        time.sleep(0.1)
                return 0, bool(signalled)
            if failed:
                worst = failed[0][1]
                refused = any(rc == EXIT_REFUSED for _, rc in failed)
                restarts = 0 if signalled or done or refused else store.add(RESTARTS_KEY, 1)  # the job's count
                if signalled or done or refused or restarts > max_restarts:
                    why = ("stopping" if signalled else "a rank already finished" if done
                           else "refused to start" if refused
                           else f"--max-restarts {max_restarts} used up (the job's: {restarts - 1} restart"
                                f"{'' if restarts == 2 else 's'} so far)")
                    msg = f"rank(s) {', '.join(str(first + r) for r, _ in failed)} exited ({worst}); {why}"
                    echo(f"launcher: {msg}")
                    if nnodes > 1:
                        give_up(f"node {node_rank}: {msg}")
                    stop_all()
                    return (EXIT_REFUSED if refused else worst), bool(signalled)
                # survivors (on every node) re-form their process group on this; add: launchers never collide
                generation = store.add(GENERATION_KEY, 1)
                for r, rc in failed:
                    if beats_dir is not None:
                        forget(beats_dir, first + r)
                    procs[r], who = replace(r)
                    echo(f"launcher: rank {first + r} exited ({rc}); {who} replaces it alone, generation "
                         f"{generation} (in-process restart {restarts} of {max_restarts})")
            elif time.monotonic() >= next_watch:
                next_watch = time.monotonic() + 1.0  # as often as the torchrun launcher's (the bound is seconds)
                jobbeats.publish(store, node_rank, read_beats(beats_dir) if beats_dir is not None else [])
                why = store.get(FAILED_KEY).decode() if nnodes > 1 and store.check([FAILED_KEY]) else None
                if why:
                    echo(f"launcher: the job stopped on {why}")
                    store.add(FAILED_KEY + "/seen", 1)
                    stop_all()
                    return 1, bool(signalled)
                nodes = jobbeats.gather(store, nnodes) if nnodes > 1 or judge else []  # one read per poll
                if nnodes > 1:
                    why = watch_nodes(nodes)
                    if why:
                        echo(f"launcher: {why}; stopping")
                        give_up(f"node {node_rank}: {why}")
                        stop_all()
                        return 1, bool(signalled)
                if judge:
                    # The whole job's beats of the current generation: a culprit on another node is named here too
                    beats, node_of = jobbeats.current(nodes, int(store.get(GENERATION_KEY)), seen, node_rank)
                    if watchdog.hung(beats=beats):
                        quiet, bound = watchdog.quiet(beats=beats), watchdog.bound(beats)
                        culprits = watchdog.culprits(beats)
                        live = {r: p for r, p in procs.items() if r not in done and p.poll() is None}
                        lagging = [r - first for r in culprits if r - first in live]  # local ranks
                        elsewhere = [r for r in culprits if not first <= r < first + nproc]
                        watchdog.dump_stacks([p.pid for p in live.values()])
                        if lagging or not elsewhere:
                            for r in lagging or live:  # the next poll replaces them; the others re-form in-process
                                live[r].kill()
                            clear_state(ft_dir, beats_dir)
                        who = (f"rank(s) {', '.join(str(first + r) for r in lagging)} fell behind (did not begin "
                               "the step the others began): replacing them alone" if lagging
                               else f"rank(s) {', '.join(map(str, elsewhere))} on node(s) "
                                    f"{', '.join(str(n) for n in sorted({node_of[r] for r in elsewhere}))} fell "
                                    "behind: keeping this node's workers (their node's launcher replaces them)"
                               if elsewhere else "every rank began the same step: replacing every local worker")
                        echo(f"watchdog: no rank advanced for {quiet:.1f}s (bound {bound:.1f}s); stacks in "
                             f"{ft_dir}; {who}")
                        next_watch = time.monotonic() + bound  # the recovery's new generation, not a second verdict
            time.sleep(0.05)
    except dist.DistError as e:  # a store call failed: node 0's launcher, which hosts the store, is gone
        if nnodes == 1:
            raise
        echo(f"launcher: the job's store at {shost}:{store.port} is unreachable ({str(e).splitlines()[0][:120]}): "
             "node 0's launcher is gone and the job with it; stopping this node's workers (on EKS the JobSet "
             "restarts the job: docs/training.md, \"node 0 is the job's rendezvous\")")
        stop_all()
        return 1, bool(signalled)
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop_all()
