"""The checkpointing component: async save, tiered promotion, peer replication, verified restore."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import warnings
import weakref
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from training.checkpoint import legacy
from training.checkpoint.hashing import Destination, TeeFileSystem
from training.checkpoint.reshard import MergedShardsReader, directly_loadable, shard_sets, state_layout
from training.checkpoint.safe_load import SafeFileSystemReader
from training.checkpoint.peer import PeerClient, PeerServer, buddy_of
from training.checkpoint.staging import HostStager, local_tensor
from torch.distributed.tensor import DTensor
from training.checkpoint.storage import CorruptCheckpoint, DirTier, Marker, S3Tier, Tier, verify_dir
from training.config import CheckpointConfig, TierConfig
from training.faults import kill_point

log = logging.getLogger("training.checkpoint")
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")

NODE_LOCAL = ("memory", "nvme")   # per-node directories (a node id is appended)
SHARED = ("fsx", "s3")            # one copy for the whole job


def build_tier(t: TierConfig, node_id: str) -> Tier:
    if t.kind == "s3":
        return S3Tier(t.path, keep=t.keep, every=t.every, endpoint_url=t.endpoint_url)
    if t.kind not in NODE_LOCAL + SHARED:
        raise ValueError(f"unknown tier kind {t.kind!r}; allowed: memory, nvme, fsx, s3")
    root = Path(t.path) / node_id if t.kind in NODE_LOCAL else Path(t.path)
    return DirTier(t.kind, root, keep=t.keep, every=t.every, fsync=t.kind != "memory")


class RefusedFreshStart(RuntimeError):
    """No checkpoint could be restored while a checkpoint source failed: starting fresh could lose progress."""


class IncompatibleCheckpoint(RefusedFreshStart):
    """The checkpoint holds a different model (parameter names): loading it, or starting fresh, would be wrong."""


@dataclass
class RestoreInfo:
    step: int
    source: str                       # tier or peer the state came from
    seconds: float
    meta: dict = field(default_factory=dict)


@dataclass
class SaveStats:
    started: int = 0
    committed: int = 0
    failed: int = 0
    promoted: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    last_write_seconds: float = 0.0
    waited_seconds: float = 0.0       # optimizer steps held until an overlapped staging copy finished
    promote_failed: dict[str, int] = field(default_factory=dict)  # tier kind -> failed promotions
    source_failed: dict[str, str] = field(default_factory=dict)   # restore: source -> last error after retries
    memory_tier_short: bool = False   # the memory tier's file system is smaller than its steady state needs
    restored_older: int = 0           # restores that resumed from an older step than the newest one seen
    promote_retried: int = 0          # copies to a tier that failed once and were tried again
    behind: dict[str, int] = field(default_factory=dict)  # tier kind -> newest step due there whose copy failed

    @property
    def failures(self) -> int:
        """Save-path failures: saves that did not commit plus promotions that did not reach a tier. A restore's
        unreadable sources and fall-backs to an older step are exported on their own (``gauges``): they say
        nothing about whether saves work now."""
        return self.failed + sum(self.promote_failed.values())

    def gauges(self) -> dict[str, int]:
        """What ``Goodput.persist`` exports: openpod_checkpoint_failures, openpod_checkpoint_restore_source_failures
        and openpod_checkpoint_restored_older (this incarnation)."""
        return {"checkpoint_failures": self.failures, "restore_source_failures": len(self.source_failed),
                "restored_older": self.restored_older}


class _PeerSource:
    """Snapshots held in other nodes' memory, fetched over the peer side-channel into our memory tier."""

    name = "peer"
    verified_on_fetch = True  # every file checked against its marker hash while streaming; nothing is committed otherwise

    def __init__(self, addresses: list[tuple[str, int]], me: int, landing: DirTier):
        self.clients = [PeerClient(a) for i, a in enumerate(addresses) if i != me and a]
        self.landing = landing
        self._where: dict[str, PeerClient] = {}

    def markers(self) -> list[Marker]:
        out = []
        for c in self.clients:
            try:
                for m in c.list():
                    if m.key not in self._where:
                        self._where[m.key] = c
                        out.append(m)
            except OSError as e:
                log.warning("peer %s:%s unreachable: %s", *c.address, e)
        return out

    def materialize(self, marker: Marker, scratch: Path, landing: DirTier | None = None) -> Path:
        """Fetch ``marker``'s snapshot into ``landing`` (default: this node's memory tier), committed there."""
        c = self._where[marker.key]
        landing = landing or self.landing
        m = c.get(marker.step, marker.rank, landing)
        self.name = f"peer:{c.address[0]}:{c.address[1]}"
        return landing.snapshot_dir(m.step, m.rank)


class Checkpointer:
    """Saves and restores a model + optimizer; see docs/training.md for the guarantees.

    ``save`` blocks only while the state is copied to host buffers; a single
    background thread writes it with DCP into the first tier, commits it, sends it
    to the buddy and hands it to the promoter, which copies it down the remaining
    tiers with per-tier cadence and retention.

    With ``overlap_staging`` (the default) even that copy leaves the loop: tensors
    the optimizer owns (parameters and optimizer state) change only inside
    ``optimizer.step()``, so a stager thread copies them while the next step's
    forward and backward run, and a step pre-hook on the optimizer holds that
    step's update until the copy has landed. Other tensors (buffers) and plain
    values are copied before ``save`` returns.
    """

    def __init__(self, cfg: CheckpointConfig, *, rank: int, world_size: int, local_world_size: int,
                 node_id: str, scratch_dir: str | Path):
        if not cfg.tiers:
            raise ValueError("checkpoint.tiers is empty: configure at least one tier")
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.tiers = [build_tier(t, node_id) for t in cfg.tiers]
        if not isinstance(self.tiers[0], DirTier):
            raise ValueError("the first checkpoint tier must be a directory (memory, nvme or fsx)")
        self.first: DirTier = self.tiers[0]
        self.scratch = Path(scratch_dir)
        self.stager = HostStager()
        self.stats = SaveStats()
        self._inflight: Future | None = None
        self._pinned: set[int] = set()
        self._cond = threading.Condition()
        # Per further tier (index into self.tiers): the newest committed step due there and not copied yet.
        # Which steps are due is decided from the step number alone, the same on every rank; a busy promoter
        # replaces a tier's pending step only with a newer step due on that same tier.
        self._pending: dict[int, Marker] = {}
        self._from: dict[int, DirTier] = {}  # step -> the tier its pending copies are read from
        self._closing = False
        self._abandoned = False  # abandon(): the memory tier now belongs to the next generation
        self._promoting = False
        self._promoter = threading.Thread(target=self._promote_loop, name="ckpt-promoter", daemon=True)
        self._promoter.start()
        # Overlapped staging runs at normal priority: the next optimizer step waits for it.
        self._copier = ThreadPoolExecutor(1, thread_name_prefix="ckpt-stager")
        self._staged: Future | None = None
        self._hooks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimizer -> pre-hook handle
        self._waited = 0.0
        # The first durable tier, written straight from the staged copy next to the memory tier.
        self._direct: DirTier | None = None
        if (cfg.direct_durable and self.first.kind == "memory" and len(self.tiers) > 1
                and isinstance(self.tiers[1], DirTier) and self.tiers[1].fsync):
            self._direct = self.tiers[1]
        # The writer fills the memory tier and, with direct_durable, the first durable tier in the same write.
        # When it writes a durable tier (that one, or a first tier on disk) it runs at normal priority, as
        # torch's own async_save writer: until it lands, the step exists only in this node's memory. (Niced like
        # the other checkpoint threads, it waited behind a busy training loop: 5.9x DCP's time to durable
        # instead of 2.0x in benchmarks/checkpoint_vs_dcp.py, 2026-11-23.) Only a writer of the memory tier
        # alone yields to the training loop.
        writes_durable = self._direct is not None or self.first.fsync
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="ckpt-writer",
                                          initializer=None if writes_durable else _background_priority)
        self._direct_done: dict[int, bool] = {}  # step -> written directly (the promoter skips that tier)
        # The first shared tier (FSx, else S3): what outlives this node. save_durably() forces a step there.
        self.durable = next((t for t in self.tiers[1:] if t.kind in SHARED), None)
        self._forced: set[int] = set()
        self._budget_checked = False
        self._local_world_size = local_world_size
        self._replicated = True
        self.components: dict[str, object] = {}  # name -> Stateful, see register()

        self.peer_server = None
        self.peers: list[tuple[str, int] | None] = [None] * world_size
        self.buddy = None
        if cfg.peer_replication:
            held = DirTier("memory", self.first.root.parent / f"{self.first.root.name}.held",
                           keep=self.first.keep, fsync=False)
            self.peer_server = PeerServer(held, self.first, host=cfg.peer_host)
            self.peers = [tuple(a) if a else None for a in _all_gather(list(self.peer_server.address), world_size)]
            self.buddy = buddy_of(rank, world_size, local_world_size)

    # ------------------------------------------------------------ job-wide
    def job_gauges(self) -> dict[str, int]:
        """``stats.gauges()`` over every rank, for ``Goodput.persist``: save-path failures summed (with sharded
        state every rank writes its own part of each step: rank 0's count alone missed the others'), the
        restore's figures the largest of any rank (every rank reads the same sources). Collective: every rank
        calls it at the same point (restore, a save, the end)."""
        g = self.stats.gauges()
        failures = _all_reduce([g["checkpoint_failures"]], self.world_size)[0]
        src, older = _all_reduce([g["restore_source_failures"], g["restored_older"]], self.world_size, "max")
        return {"checkpoint_failures": failures, "restore_source_failures": src, "restored_older": older}

    def job_summary(self) -> dict:
        """The result's ``checkpoints`` section, the same on every rank (collective): every rank's saves and
        failures summed, the ranks that failed, each tier's ranks behind, and (rank 0's listing) the newest step
        complete in each shared tier - every rank's part there."""
        st = self.stats
        mine = {"committed": st.committed, "failed": st.failed, "promote_failed": dict(st.promote_failed),
                "promote_retried": st.promote_retried, "behind": dict(st.behind), "last_error": st.last_error,
                "memory_tier_short": st.memory_tier_short, "restored_older": st.restored_older}
        if self.rank == 0:
            mine["durable"] = self.durable_steps()
        every = _all_gather(mine, self.world_size)
        out = {"committed": sum(r["committed"] for r in every), "failed": sum(r["failed"] for r in every),
               "promote_failed": {}, "promote_retried": sum(r["promote_retried"] for r in every), "behind": {},
               "failed_ranks": [i for i, r in enumerate(every) if r["failed"] or r["promote_failed"]],
               "last_error": next((f"rank {i}: {r['last_error']}" for i, r in enumerate(every) if r["last_error"]),
                                  None),
               "memory_tier_short": any(r["memory_tier_short"] for r in every),
               "restored_older": max(r["restored_older"] for r in every),
               "durable": every[0].get("durable", {})}
        for i, r in enumerate(every):
            for kind, n in r["promote_failed"].items():
                out["promote_failed"][kind] = out["promote_failed"].get(kind, 0) + n
            for kind, step in r["behind"].items():
                out["behind"].setdefault(kind, {})[str(i)] = step
        return out

    def durable_steps(self) -> dict[str, int | None]:
        """Per shared tier: the newest step every rank's part of which is committed there (None: no such step;
        the tier unreadable is said in the log)."""
        out: dict[str, int | None] = {}
        for tier in self.tiers:
            if tier.kind not in SHARED:
                continue
            try:
                steps = tier.complete_steps(1 if self._replicated else self.world_size)
            except Exception as e:  # noqa: BLE001 - a report, not the job
                log.warning("cannot list %s: %s: %s", tier.name, type(e).__name__, e)
                steps = []
            out[tier.kind] = steps[0] if steps else None
        return out

    # ----------------------------------------------------------------- save
    def due(self, step: int) -> bool:
        return self.cfg.enabled and self.cfg.every > 0 and step % self.cfg.every == 0

    def register(self, name: str, obj) -> None:
        """Save and restore ``obj`` (anything with ``state_dict()``/``load_state_dict()``: an LR schedule,
        a data loader position, RNG, a GradScaler, user objects) under ``name`` with every checkpoint."""
        if name in ("model", "optim") or not name.isidentifier():
            raise ValueError(f"component name {name!r}: must be an identifier other than 'model' and 'optim'")
        if not (callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))):
            raise ValueError(f"component {name!r}: {type(obj).__name__} has no state_dict()/load_state_dict()")
        self.components[name] = obj

    def state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        msd, osd = get_state_dict(model, optimizer)
        return {"model": msd, "optim": osd, **{n: c.state_dict() for n, c in self.components.items()}}

    def _load_into(self, reader, model, optimizer, where: str, state: dict | None = None) -> None:
        """DCP-load a snapshot into the live model, optimizer and registered components. ``state``: this
        rank's :meth:`state`, built by the caller once for all the copies it tries (default: built here)."""
        state = dict(self.state(model, optimizer) if state is None else state)  # components may be dropped below
        metadata = reader.read_metadata()
        keys = set(metadata.state_dict_metadata)
        want = {f"model.{k}" for k, v in state["model"].items() if isinstance(v, torch.Tensor)}  # DCP flattens the rest
        fused = not want <= keys and legacy.explains(want - keys, keys)  # saved before the q, k, v split
        if not want <= keys and not fused:
            extra = sorted(k for k in keys - want if k.startswith("model."))
            raise IncompatibleCheckpoint(
                f"checkpoint {where} holds another model: it lacks {', '.join(sorted(want - keys)[:3])}"
                + (f" and has {', '.join(extra[:3])}" if extra else ""))
        saved = {k.split(".", 1)[0] for k in keys}
        for name in self.components:
            if name not in saved:  # a checkpoint from before the component was registered
                log.warning("checkpoint %s has no %r state; keeping its current value", where, name)
                state.pop(name)
        if hasattr(reader, "reset"):
            reader.reset()
        if fused:
            legacy.load_fused_qkv(state, reader, metadata)
        else:
            dcp.load(state, storage_reader=reader, no_dist=True)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        for name, c in self.components.items():
            if name in state:
                c.load_state_dict(state[name])

    def save(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             meta: dict | None = None) -> float:
        """Stage the state and start writing it; returns the seconds the caller was blocked."""
        t0 = time.perf_counter()
        self.wait()  # one save in flight: the staging buffers are reused
        kill_point("during_stage", step, self.rank)
        state = self.state(model, optimizer)
        copying = None
        if self.cfg.overlap_staging:
            owned = _optimizer_tensors(optimizer)
            staged, deferred = self.stager.plan(state, defer=lambda t: local_tensor(t).data_ptr() in owned)
            if deferred:
                self._hook(optimizer)
                copying = self._staged = self._copier.submit(self.stager.copy, deferred, self.stager.ready_event())
        else:
            staged = self.stager.stage(state)
        self.stats.started += 1
        if not self._budget_checked:
            self._check_memory_budget()
        replicated = self._replicated = not _has_dtensor(state)  # sharded: each rank's snapshot holds its shards
        meta = {**(meta or {}), "layout": state_layout(state)}  # restore: same mesh, or reshard
        self._inflight = self._writer.submit(self._persist, step, staged, meta, copying, replicated)
        return time.perf_counter() - t0

    def _check_memory_budget(self) -> None:
        """Once, at the first save: warn (and count) when the memory tier cannot hold its steady state."""
        self._budget_checked = True
        if self.first.kind != "memory":
            return
        from training.checkpoint import budget

        b = budget.check(self.first.root, self.stager.nbytes, keep=self.first.keep,
                         local_ranks=self._local_world_size, peer=self.peer_server is not None)
        if not b.fits:
            self.stats.memory_tier_short = True
            log.warning("%s", b.message(self.first.root, self.first.keep, self._local_world_size,
                                        self.peer_server is not None))

    def save_durably(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     meta: dict | None = None) -> str | None:
        """Save ``step`` and wait until it is committed in the durable tier whatever its cadence (before the node
        goes away). Collective: returns that tier's name if every rank's snapshot got there, else None."""
        if self.durable is not None:
            self._forced.add(step)
        self.save(step, model, optimizer, meta)
        self.flush()
        self._forced.discard(step)
        # Replicated state has one copy in shared tiers, written by rank 0; every other rank writes its own shards.
        writes = not (self._replicated and self.rank != 0)
        ok = self.durable is not None and (not writes or self.rank in self.durable.index().get(step, set()))
        return self.durable.kind if _all_ok(ok, self.world_size) else None

    def wait(self) -> None:
        if self._inflight is not None:
            self._inflight.result()
            self._inflight = None

    def take_waited(self) -> float:
        """Seconds optimizer steps were held for overlapped staging since the last call."""
        w, self._waited = self._waited, 0.0
        return w

    def _hook(self, optimizer: torch.optim.Optimizer) -> None:
        if optimizer not in self._hooks:
            self._hooks[optimizer] = optimizer.register_step_pre_hook(self._before_optimizer_step)

    def _before_optimizer_step(self, optimizer, args, kwargs) -> None:
        copying = self._staged
        if copying is not None and not copying.done():
            t0 = time.perf_counter()
            futures_wait([copying])  # a failed copy is reported by the writer, not here
            dt = time.perf_counter() - t0
            self._waited += dt
            self.stats.waited_seconds += dt

    def _persist(self, step: int, staged: dict, meta: dict, copying: Future | None = None,
                 replicated: bool = True) -> None:
        t0 = time.perf_counter()
        tier = self.first
        direct = self._direct if self._direct is not None and self._due_in(self._direct, step, replicated) else None
        failed = None
        direct_ok = False
        try:
            if copying is not None:
                copying.result()  # the overlapped part of staging has landed in host memory
            # One DCP write fills the memory tier and the first durable tier (serialized and hashed once): the
            # durable tier's files as DCP writes them, the memory tier's from the same bytes once the durable
            # copy is committed (``fill``), so the memory copy is not on the way to durable.
            fs, results = self._write([tier, direct] if direct is not None else [tier], step, staged, meta,
                                      replicated)
            if direct is not None:
                # Files written (the durable tier's; the memory tier's are kept for later), no marker of this step yet.
                kill_point("before_commit", step, self.rank)
                kill_point("during_promote", step, self.rank)  # the durable tier is written, not committed yet
                direct_ok = self._commit_direct(step, results[1])
                if direct_ok:  # a durable copy stays even when the memory tier fails
                    with self._cond:  # room for this step in memory: it is durable and newer than any there
                        if not self._abandoned:
                            self._retain_first(keep=self.first.keep - 1)
            if self._abandoned:  # outlived abandon()'s grace: the durable copy stays, memory is not ours now
                return
            marker = self._fill(fs, results, 0, step, meta, replicated)
            if isinstance(marker, BaseException):
                raise marker
            kill_point("before_commit", step, self.rank)
            with self._cond:
                if self._abandoned:
                    return
                tier.commit(marker)
            kill_point("after_commit", step, self.rank)
        except (Exception, CheckpointException) as e:  # a full disk fails this save, not the training
            failed = e
        if direct_ok:
            self._direct_done[step] = True  # the promoter skips that tier (a failed direct copy: it retries it)
        if failed is not None:
            self.stats.failed += 1
            self.stats.last_error = f"{type(failed).__name__}: {failed}"
            try:
                tier.delete(step, self.rank)
            except Exception as ce:  # noqa: BLE001 - cleanup must never fail the next save
                log.warning("cleanup of step %d in %s failed: %s", step, tier.name, ce)
            if direct_ok and not self._abandoned:
                # A full memory tier must not freeze the further tiers at the last step that fit: they get this
                # step from the durable copy written beside it.
                log.warning("checkpoint of step %d failed in %s: %s; it is durable in %s and promoted from there; "
                            "training continues", step, tier.name, failed, self._direct.name)
                with self._cond:
                    self._queue(results[1], self._direct)
                    self._cond.notify_all()
            else:
                log.warning("checkpoint of step %d failed in %s: %s; training continues", step, tier.name, failed)
            return
        self.stats.committed += 1
        self.stats.last_write_seconds = time.perf_counter() - t0
        d = tier.snapshot_dir(step, self.rank)
        with self._cond:
            self._retain_first()
        if self.buddy is not None and self.peers[self.buddy]:
            try:
                PeerClient(self.peers[self.buddy]).put(marker, d)
                kill_point("after_replicate", step, self.rank)
            except OSError as e:
                log.warning("replicating step %d to buddy rank %d failed: %s", step, self.buddy, e)
        with self._cond:
            self._queue(marker)
            self._cond.notify_all()

    def _queue(self, marker: Marker, source: DirTier | None = None) -> None:
        """Hand ``marker`` to the promoter for every further tier it is due on (caller holds ``_cond``); its
        files are copied from ``source`` (default: the first tier)."""
        direct = self._direct_done.pop(marker.step, False)
        for i, tier in enumerate(self.tiers[1:], 1):
            if (direct and tier is self._direct) or tier is source:
                continue  # written from the staged copy already
            if self._due_in(tier, marker.step, marker.replicated):
                self._pending[i] = marker
                self._from[marker.step] = source or self.first

    def _write(self, tiers: list[DirTier], step: int, staged: dict, meta: dict,
               replicated: bool) -> tuple[TeeFileSystem | None, list[Marker | Destination | BaseException]]:
        """One DCP write of ``staged`` into a new snapshot directory in each of ``tiers``: every tensor is
        serialized once and every byte hashed once, while it is written (no read back). Returns the file
        system and, per tier, its marker (files written, not committed: ``DirTier.commit`` fsyncs), its
        deferred destination (a memory tier beside a durable one: :meth:`_fill` writes it) or the error
        that failed it."""
        errors: dict[int, BaseException] = {}
        dests: dict[int, Destination] = {}
        for i, t in enumerate(tiers):
            try:
                dests[i] = Destination(t.kind, t.prepare(step, self.rank), durable=t.fsync, step=step)
            except Exception as e:  # noqa: BLE001 - this tier fails, the others are written
                errors[i] = e
        out: dict[int, Marker | Destination] = {}
        fs = None
        if dests:
            fs = TeeFileSystem(list(dests.values()), step=step, rank=self.rank, stable=self.stager.spans())
            writer = FileSystemWriter(fs.primary, sync_files=False, thread_count=self.cfg.write_threads)
            writer.fs = fs
            try:
                dcp.save(staged, storage_writer=writer, no_dist=True)
            except (Exception, CheckpointException) as e:
                for i, d in dests.items():
                    errors[i] = d.error or e
            finally:
                fs.close()
            for i, d in dests.items():
                if i in errors or d.error is not None:
                    errors.setdefault(i, d.error)
                    continue
                if d.deferred:
                    out[i] = d
                    continue
                try:
                    out[i] = Marker(step=step, rank=self.rank, world_size=self.world_size,
                                    files=fs.describe(d), replicated=replicated, meta=meta)
                except OSError as e:
                    errors[i] = e
        return fs, [out[i] if i in out else errors[i] for i in range(len(tiers))]

    def _fill(self, fs: TeeFileSystem | None, results: list, i: int, step: int, meta: dict,
              replicated: bool) -> Marker | BaseException:
        """Tier ``i``'s marker, writing its files first if they were deferred (from the staged bytes)."""
        got = results[i]
        if not isinstance(got, Destination):
            return got
        fs.fill()
        if got.error is not None:
            return got.error
        try:
            return Marker(step=step, rank=self.rank, world_size=self.world_size, files=fs.describe(got),
                          replicated=replicated, meta=meta)
        except OSError as e:
            return e

    def _cadence_due(self, tier: Tier, step: int) -> bool:
        """Whether ``step`` goes to ``tier``: decided from the step number alone, so every rank copies the same
        steps whatever its own failures or timing (a per-rank count of copies drifted apart after one rank's
        failed copy, leaving no step every rank held)."""
        if step in self._forced and tier is self.durable:
            return True
        return (step // max(self.cfg.every, 1)) % max(tier.every, 1) == 0

    def _job_world(self, tier: Tier, replicated: bool) -> int | None:
        """What a step of ``tier`` needs to be complete, for its retention: the ranks of the job (a shared tier;
        replicated state has rank 0's part alone there), None for a node's own tier (each rank on its own)."""
        if tier.kind not in SHARED:
            return None
        return 1 if replicated else self.world_size

    def _seal(self, tier: Tier, marker: Marker) -> None:
        """Write the step's manifest in a shared tier if this rank's part completed it (best effort: readers
        fall back to the per-rank markers)."""
        world = self._job_world(tier, marker.replicated)
        if world is None or world <= 1:
            return
        try:
            tier.seal(marker.step, world)
        except Exception as e:  # noqa: BLE001 - an optimisation for readers, never a failed copy
            log.warning("writing the manifest of step %d in %s failed: %s: %s", marker.step, tier.name,
                        type(e).__name__, e)

    def _retain(self, tier: Tier, replicated: bool, keep: int | None = None) -> None:
        tier.retain(self.rank, keep=keep, world_size=self._job_world(tier, replicated))

    def _due_in(self, tier: Tier, step: int, replicated: bool) -> bool:
        """Whether the promoter would copy this step to ``tier`` (cadence; one copy of replicated state in shared tiers)."""
        if not self._cadence_due(tier, step):
            return False
        return not (tier.kind in SHARED and replicated and self.rank != 0)

    def _commit_direct(self, step: int, written: Marker | BaseException) -> bool:
        """Commit the first durable tier's copy written next to the memory tier. Returns whether it committed; if
        not, the promoter copies the step there from the memory tier (its retries; counted if they fail too)."""
        tier = self._direct
        try:
            if isinstance(written, BaseException):
                raise written
            tier.commit(written)
            self._seal(tier, written)
            with self._cond:
                self._retain(tier, written.replicated)
            self.stats.promoted[tier.kind] = self.stats.promoted.get(tier.kind, 0) + 1
            self.stats.behind.pop(tier.kind, None)
            return True
        except (Exception, CheckpointException) as e:
            self.stats.promote_retried += 1
            log.warning("writing step %d to %s failed: %s: %s; copying it from %s instead", step, tier.name,
                        type(e).__name__, e, self.first.name)
            try:
                tier.delete(step, self.rank)
            except Exception:  # noqa: BLE001 - best effort cleanup
                pass
            return False

    def _retain_first(self, keep: int | None = None) -> None:
        """Apply the first tier's retention (caller holds ``_cond``); a failure costs space, not the job.
        ``keep``: fewer than the tier's own, to make room before a newer step is written into it."""
        pinned = self._pinned | {m.step for m in self._pending.values()}  # steps still to be copied from here
        try:
            self.first.retain(self.rank, pinned, keep=keep)
        except OSError as e:
            log.warning("retention in %s failed: %s", self.first.name, e)

    def _promote_loop(self) -> None:
        _background_priority()
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                marker = min(self._pending.values(), key=lambda m: m.step)  # the oldest pending step first
                tiers = sorted(i for i, m in self._pending.items() if m.step == marker.step)
                for i in tiers:
                    del self._pending[i]
                self._pinned.add(marker.step)
                self._promoting = True
            try:
                self._promote(marker, tiers)
            finally:
                with self._cond:
                    self._pinned.discard(marker.step)
                    # A save committed during this promotion could not drop this step
                    # (it was pinned); drop it now if it fell out of the first tier's window.
                    self._retain_first()
                    self._promoting = False
                    self._cond.notify_all()

    def _promote(self, marker: Marker, tiers: list[int]) -> None:
        with self._cond:
            source = self._from.get(marker.step, self.first)
            for old in [s for s in self._from if s < marker.step]:  # nothing older is pending any more
                del self._from[old]
        src = source.snapshot_dir(marker.step, marker.rank)
        for i in tiers:
            self._copy(self.tiers[i], src, marker)

    def _copy(self, tier: Tier, src: Path, marker: Marker) -> None:
        """Copy one committed snapshot into ``tier``, tried ``cfg.promote_attempts`` times: a step is durable in a
        shared tier only once every rank's part is there, so one rank's transient failure must not cost the job
        that step. A full tier gets room first (its retention down to one step fewer, never the newest step
        complete job-wide). A copy that still fails is counted and the tier reported behind (``stats.behind``)."""
        attempts = max(1, self.cfg.promote_attempts)
        for attempt in range(1, attempts + 1):
            try:
                kill_point("during_promote", marker.step, self.rank)
                tier.put(src, marker)
                break
            except Exception as e:  # noqa: BLE001 - a failed copy never fails training
                err = e
                log.warning("promoting step %d to %s failed (attempt %d of %d): %s: %s", marker.step, tier.name,
                            attempt, attempts, type(e).__name__, e)
                try:
                    tier.delete(marker.step, self.rank)
                except Exception:  # noqa: BLE001 - best effort cleanup
                    pass
                if attempt == attempts or self._closing and self._abandoned:
                    self.stats.last_error = f"{type(err).__name__}: {err}"
                    self.stats.promote_failed[tier.kind] = self.stats.promote_failed.get(tier.kind, 0) + 1
                    self.stats.behind[tier.kind] = max(marker.step, self.stats.behind.get(tier.kind, 0))
                    return
                self.stats.promote_retried += 1
                if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                    try:
                        self._retain(tier, marker.replicated, keep=max(1, tier.keep - 1))
                    except Exception as re:  # noqa: BLE001 - the retry says whether it helped
                        log.warning("making room in %s failed: %s", tier.name, re)
                time.sleep(self.cfg.promote_retry_s * attempt)
        self.stats.promoted[tier.kind] = self.stats.promoted.get(tier.kind, 0) + 1
        self.stats.behind.pop(tier.kind, None)
        self._seal(tier, marker)
        try:
            self._retain(tier, marker.replicated)
        except Exception as e:  # noqa: BLE001 - retention costs space, not the copy
            log.warning("retention in %s failed: %s", tier.name, e)

    def busy(self) -> bool:
        """True while a save is being written, replicated or promoted."""
        with self._cond:
            promoting = bool(self._pending) or self._promoting
        return promoting or (self._inflight is not None and not self._inflight.done())

    def flush(self) -> None:
        """Wait until the in-flight save and its promotion are done."""
        self.wait()
        with self._cond:
            while self._pending or self._promoting:
                self._cond.wait()

    def close(self) -> None:
        self.flush()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._promoter.join()
        self._writer.shutdown()
        self._copier.shutdown()
        for handle in list(self._hooks.values()):
            handle.remove()
        self._hooks.clear()
        if self.peer_server:
            self.peer_server.close()

    def abandon(self, wait_s: float = 10.0) -> None:
        """Stop without flushing (an in-process restart gives up this generation): the write in flight gets
        ``wait_s`` seconds to commit or fail, pending promotions are dropped, threads and the peer server stop."""
        if self._inflight is not None:
            try:
                self._inflight.result(timeout=wait_s)
            except Exception:  # noqa: BLE001 - a failed or stuck write: its snapshot is not committed
                pass
        with self._cond:
            self._abandoned = True  # a write still running leaves the memory tier to the next generation
            self._closing = True
            self._pending = {}
            self._cond.notify_all()
        self._writer.shutdown(wait=False, cancel_futures=True)
        self._copier.shutdown(wait=False, cancel_futures=True)
        for handle in list(self._hooks.values()):
            handle.remove()
        self._hooks.clear()
        if self.peer_server:  # its serve_forever notices a shutdown only at its next poll (0.5 s): do not wait
            threading.Thread(target=self.peer_server.close, name="peer-server-close", daemon=True).start()

    # -------------------------------------------------------------- restore
    def _sources(self) -> list:
        sources: list = [self.first]
        if self.peer_server is not None:  # this node's memory also holds buddies' snapshots
            sources += [self.peer_server.held, _PeerSource(self.peers, self.rank, self.first)]
        return sources + self.tiers[1:]

    def restore(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> RestoreInfo | None:
        """Load the newest checkpoint every rank can load, verified; None for a fresh start.

        A rank loads its own snapshot when the step was saved on the same mesh (or is replicated); otherwise it
        reshards: it reads every old rank's snapshot of the step from whichever sources hold them - its node's
        memory and NVMe, the buddy copies its node holds, other nodes' memory over the peer channel, FSx, S3 -
        and DCP picks the pieces of its new shards. Resuming from an older step than the newest one any rank
        can see is said in one warning and counted (``stats.restored_older``)."""
        t0 = time.perf_counter()
        failed_sources: list[str] = []
        listed = []
        for src in self._sources():
            markers = self._list_with_retries(src, failed_sources)
            if markers is not None:
                listed.append((src, markers))
        state = self.state(model, optimizer)  # built once: its layout picks the sources, every load fills it
        layout = state_layout(state)
        direct: dict[int, list[tuple[object, Marker]]] = {}
        for src, markers in listed:
            for m in markers:
                if directly_loadable(m, self.rank, self.world_size, layout):
                    direct.setdefault(m.step, []).append((src, m))
        for cands in direct.values():  # our own rank's snapshot first within a source order
            cands.sort(key=lambda sm: 0 if sm[1].rank == self.rank else 1)
        sets = shard_sets(listed)
        steps = set(direct) | {s for s, ss in sets.items() if ss[0].complete}
        seen = max((m.step for _, markers in listed for m in markers), default=0)
        gathered = _all_gather((sorted(steps), seen), self.world_size)
        for other, _ in gathered:
            steps &= set(other)
        newest = max(s for _, s in gathered)
        info = None
        while steps:
            step = max(steps)
            info = self._load_step(step, direct.get(step, []), model, optimizer, state)
            if info is None:
                info = self._load_resharded(step, [s for s in sets.get(step, []) if s.complete], model, optimizer,
                                            state)
            if _all_ok(info is not None, self.world_size):
                break
            info = None
            steps.discard(step)
        shutil.rmtree(self.scratch, ignore_errors=True)
        if newest > (info.step if info is not None else 0):
            self._say_older(newest, info, direct, sets)
        if info is not None:
            info.seconds = time.perf_counter() - t0
            return info
        refuse = bool(failed_sources) and not self.cfg.allow_fresh_start
        if not _all_ok(not refuse, self.world_size):  # every rank refuses together
            why = (f"checkpoint source {failed_sources[0]} could not be read" if refuse
                   else "another rank could not read a checkpoint source")
            raise RefusedFreshStart(f"{why}; refusing to start from step 0, which could lose progress "
                                    f"(fix the source, or pass --allow-fresh-start)")
        if newest > 0 and not self.cfg.allow_fresh_start:  # known steps, none loaded (same answer on every rank)
            raise RefusedFreshStart(f"checkpoints up to step {newest} exist but none could be loaded; refusing to "
                                    "start from step 0, which would lose their progress (the warnings above name "
                                    "each copy and why; fix it, or pass --allow-fresh-start)")
        if failed_sources:
            log.warning("starting from step 0 although %s could not be read (allow_fresh_start)",
                        ", ".join(failed_sources))
        return None

    def _say_older(self, newest: int, info: RestoreInfo | None, direct: dict, sets: dict) -> None:
        """One warning (rank 0) and a counter (every rank): a newer step exists than the one restored."""
        self.stats.restored_older += 1
        why = ""
        if newest not in direct:
            cand = sets.get(newest)
            if cand:
                s = cand[0]
                missing = ", ".join(map(str, s.missing))
                why = (f"the shards of rank {missing} of {s.world_size} are in no reachable tier or peer" if s.missing
                       else f"its shards from {s.world_size} ranks could not be read")
            else:
                why = "this rank sees no copy of it"
        else:
            why = "no copy of it could be read"
        reasons = [r for r in _all_gather(why, self.world_size) if r]
        if self.rank == 0:
            back = (f"resuming from step {info.step} ({info.source})" if info is not None
                    else "starting from step 0")
            log.warning("newest checkpoint step %d cannot be restored on this mesh of %d ranks (%s); %s",
                        newest, self.world_size, reasons[0] if reasons else "another rank could not read it", back)

    def _list_with_retries(self, src, failed: list[str]) -> list[Marker] | None:
        """``src.markers()``, tried ``cfg.source_attempts`` times; None (and ``src`` named in ``failed``) if all fail."""
        attempts = max(1, self.cfg.source_attempts)
        for i in range(attempts):
            try:
                return src.markers()
            except Exception as e:  # noqa: BLE001 - an outage of one source: retry, then report it
                last = f"{type(e).__name__}: {e}"
                log.warning("checkpoint source %s unavailable (attempt %d of %d): %s", src.name, i + 1, attempts, last)
                if i + 1 < attempts:
                    time.sleep(float(i + 1))
        self.stats.source_failed[src.name] = last
        failed.append(f"{src.name} ({last})")
        return None

    def _load_resharded(self, step: int, sets: list, model, optimizer, state: dict) -> RestoreInfo | None:
        """Reshard ``step`` from a complete set of another mesh's snapshots: each old rank's snapshot from the
        first source whose copy verifies (fetched from a peer or S3 into scratch), read by one merged DCP reader."""
        for s in sets:
            dirs, names = [], []
            for r in range(s.world_size):
                for src, m in s.copies[r]:
                    where = f"{src.name}/{m.key}"
                    try:
                        if isinstance(src, _PeerSource):  # into scratch: not this node's memory tier
                            d = src.materialize(m, self.scratch, landing=DirTier("memory", self.scratch / "peers",
                                                                                 keep=1 << 30, fsync=False))
                        else:
                            d = src.materialize(m, self.scratch)
                            verify_dir(d, m, where)
                        dirs.append(d)
                        names += [src.name] if src.name not in names else []
                        break
                    except (Exception, CheckpointException) as e:  # noqa: BLE001 - next copy of this rank's shards
                        log.warning("skipping checkpoint %s: %s: %s", where, type(e).__name__, e)
                else:
                    break  # no readable copy of rank r's shards
            if len(dirs) < s.world_size:
                continue
            where = f"{'+'.join(names)}/step_{step:09d} (saved by {s.world_size} ranks)"
            try:
                self._load_into(MergedShardsReader(dirs), model, optimizer, where, state)
            except IncompatibleCheckpoint:
                raise
            except (Exception, CheckpointException) as e:  # noqa: BLE001 - another set, or an older step
                log.warning("skipping checkpoint %s: %s: %s", where, type(e).__name__, e)
                continue
            log.info("resharded %s onto %d ranks", where, self.world_size)
            return RestoreInfo(step=step, source="+".join(names), seconds=0.0,
                               meta=s.copies[0][0][1].meta)
        return None

    def _load_step(self, step: int, cands: list, model, optimizer, state: dict) -> RestoreInfo | None:
        for src, m in cands:
            where = f"{src.name}/{m.key}"
            try:
                d = src.materialize(m, self.scratch)
                where = f"{src.name}/{m.key}"
                if not getattr(src, "verified_on_fetch", False):
                    verify_dir(d, m, where)
                self._load_into(SafeFileSystemReader(d), model, optimizer, where, state)
                return RestoreInfo(step=step, source=src.name, seconds=0.0, meta=m.meta)
            except IncompatibleCheckpoint:
                raise
            except CorruptCheckpoint as e:
                log.warning("skipping corrupt checkpoint %s", e)
            except (Exception, CheckpointException) as e:  # noqa: BLE001 - any unreadable copy: next source
                log.warning("skipping checkpoint %s: %s: %s", where, type(e).__name__, e)
        return None


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> set[int]:
    """Storage addresses of what ``optimizer.step()`` mutates: its parameters and its state tensors."""
    out = {local_tensor(p).data_ptr() for g in optimizer.param_groups for p in g["params"]}
    for st in optimizer.state.values():
        out.update(local_tensor(v).data_ptr() for v in st.values() if isinstance(v, torch.Tensor))
    out.discard(0)  # empty tensors share address 0: copy those eagerly
    return out


def _has_dtensor(obj) -> bool:
    if isinstance(obj, DTensor):
        return True
    if isinstance(obj, dict):
        return any(_has_dtensor(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_dtensor(v) for v in obj)
    return False


def _background_priority() -> None:
    """Checkpoint threads yield the CPU to the training loop (Linux: nice is per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def _all_gather(obj, world_size: int) -> list:
    if world_size <= 1 or not dist.is_initialized():
        return [obj]
    out = [None] * world_size
    dist.all_gather_object(out, obj)
    return out


def _all_reduce(values: list[int], world_size: int, op: str = "sum") -> list[int]:
    if world_size <= 1 or not dist.is_initialized():
        return list(values)
    dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor(values, dtype=torch.int64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return [int(v) for v in t.tolist()]


def _all_ok(ok: bool, world_size: int) -> bool:
    if world_size <= 1 or not dist.is_initialized():
        return ok
    dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([1 if ok else 0], dtype=torch.int32, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())
