"""The writer thread's job for one save: the staged state written with one DCP write into the first tier (and,
with ``direct_durable``, the first durable tier beside it), committed, sent to the buddy, queued for promotion."""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import time
from concurrent.futures import Future, wait as futures_wait

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.planner import SavePlan
from torch.distributed.tensor import DTensor

from training.checkpoint.hashing import Destination, TeeFileSystem
from training.checkpoint.peer import PeerClient
from training.checkpoint.promotion import Promoter
from training.checkpoint.rawfmt import BufferHead, writer_for
from training.checkpoint.staging import HostStager, Landing
from training.checkpoint.stats import SaveStats
from training.checkpoint.storage import DirTier, Marker
from training.checkpoint.tiers import TierPolicy
from training.config import CheckpointConfig
from training.faults import kill_point

log = logging.getLogger("training.checkpoint")


def _libc_malloc_trim():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_malloc_trim = _libc_malloc_trim()


def trim_heap() -> None:
    """Hand freed heap memory back to the OS (glibc's malloc_trim: every arena). Once a freed block was mmapped,
    glibc raises its mmap and trim thresholds (mallopt(3)), and memory freed in each thread's arena then stays
    resident up to twice that: the save's threads kept 1.04x-1.20x of DCP's peak memory on `medium`
    (benchmarks/checkpoint_vs_dcp.py, 2026-11-28), 0.98x with this trim after each save. The checkpointer also
    calls it before the first optimizer update after a save (``Checkpointer._before_optimizer_step``)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


class SavePlanner(DefaultSavePlanner):
    """DCP's default save planner with its plan caching, keyed by the staged layout (paths, shapes, dtypes).
    DCP keys its class-level caches by the planner's class name (torch 2.13.0 default_planner.py:91) and
    compares plans without dtypes (planner_helpers.py:42): the cached metadata of another state of the same
    shapes in the same process (an fp32 save, then a bf16 one) would describe this one wrongly. Keyed by the
    layout, a save of the same layout as the last skips the global plan and its validation (about 20 of ~75
    ms of the writer's CPU per save of `small`, cProfile 2026-11-29)."""

    # The local plan of the last save per cache key, with the structure it was made for (``_structure``): a save
    # of the same structure reuses it instead of making a write item per tensor again (2-16 ms of the writer's
    # time per save of `small`, 2026-11-29), and DCP's cache then finds it unchanged as before.
    _local_plans: dict[str, tuple[tuple, SavePlan]] = {}

    def __init__(self, layout_key: str, landed=None):
        super().__init__(enable_plan_caching=bool(layout_key))
        self._cached_plans_key = f"{type(self).__name__}:{layout_key}"
        self.landed = landed  # Landing.wait_tensor: DCP's torch-save writer resolves a tensor just before writing it

    def create_local_plan(self) -> SavePlan:
        structure = _structure(self.state_dict, self.is_coordinator) if self._enable_plan_caching else None
        hit = SavePlanner._local_plans.get(self._cached_plans_key)
        if structure is None or hit is None or hit[0] != structure:
            plan = super().create_local_plan()
            if structure is not None:
                SavePlanner._local_plans[self._cached_plans_key] = (structure, self.plan)
            return plan
        # DefaultSavePlanner.create_local_plan (torch 2.13.0 default_planner.py:107-131) with the plan it would make
        self.plan = dataclasses.replace(hit[1], planner_data=self.mappings)
        if SavePlanner._cached_save_plan.get(self._cached_plans_key) is hit[1]:
            return SavePlan([], usable=False)  # DCP's cache holds this very plan (its global plan and metadata)
        # DCP's cache holds another plan (a save failed before DCP cached this one): plan globally again
        SavePlanner._local_plans[self._cached_plans_key] = (structure, self.plan)
        self._pending_local_plan = self.plan  # cached by DCP once the global plan succeeds (finish_plan)
        return self.plan

    def resolve_data(self, write_item):
        obj = super().resolve_data(write_item)
        if self.landed is not None and isinstance(obj, torch.Tensor):
            self.landed(obj)  # its staging copy has landed
        return obj


def _structure(state_dict: dict, is_coordinator: bool) -> tuple | None:
    """What DCP's local save plan of a flattened state dict depends on (its ``_create_write_items``, torch 2.13.0
    planner_helpers.py:394-420): each key, a plain tensor's dtype, shape and properties, a DTensor's spec
    (mesh, placements, global shape and dtype) and its local shape, a non-tensor's mere presence. None for
    anything else (a ShardedTensor, a tensor subclass): that state is planned afresh."""
    out = []
    for fqn, obj in state_dict.items():
        if type(obj) is torch.Tensor:  # TensorProperties.create_from_tensor (metadata.py:102-110)
            out.append((fqn, obj.dtype, tuple(obj.shape), obj.requires_grad, obj.layout, obj.is_pinned()))
        elif type(obj) is DTensor:
            t = obj._local_tensor
            out.append((fqn, obj._spec, tuple(t.shape), t.dtype, t.requires_grad, t.layout, t.is_pinned()))
        elif isinstance(obj, torch.Tensor) or hasattr(obj, "__create_write_items__") or hasattr(obj, "local_shards"):
            return None
        else:
            out.append((fqn,))
    return (is_coordinator, *out)


class SnapshotWriter:
    """Persists staged saves, one at a time (the checkpointer runs :meth:`persist` on its writer thread)."""

    def __init__(self, cfg: CheckpointConfig, *, rank: int, world_size: int, first: DirTier,
                 direct: DirTier | None, stager: HostStager, policy: TierPolicy, promoter: Promoter,
                 stats: SaveStats, buddy: int | None, buddy_address: tuple[str, int] | None):
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.first, self.direct, self.stager = first, direct, stager
        self.policy, self.promoter, self.stats = policy, promoter, stats
        self.buddy, self.buddy_address = buddy, buddy_address

    def persist(self, step: int, staged: dict, meta: dict, copying: Future | None = None,
                replicated: bool = True, landing: Landing | None = None) -> None:
        """Write, commit, replicate and queue ``step`` (``copying``: the overlapped part of its staging, and
        ``landing`` how far it has got: the write starts at once and writes each piece of the staged buffer as it
        lands; without ``landing`` it starts once ``copying`` is done); a failure is counted and logged, never
        raised: a full disk fails this save, not the training."""
        t0 = time.perf_counter()
        tier = self.first
        direct = self.direct if self.direct is not None and self.policy.due_in(self.direct, step, replicated) else None
        failed = None
        direct_ok = False
        try:
            if copying is not None and landing is None:
                copying.result()  # the overlapped part of staging has landed in host memory
            # One DCP write fills the memory tier and the first durable tier (serialized and hashed once): the
            # durable tier's files as DCP writes them, the memory tier's from the same bytes once the durable
            # copy is committed (``fill``), so the memory copy is not on the way to durable.
            fs, results = self._write([tier, direct] if direct is not None else [tier], step, staged, meta,
                                      replicated, landing if copying is not None else None)
            if copying is not None:
                copying.result()  # all of staging landed (its failure fails the save before anything commits)
            if direct is not None:
                # Files written (the durable tier's; the memory tier's are kept for later), no marker of this step yet.
                kill_point("before_commit", step, self.rank)
                kill_point("during_promote", step, self.rank)  # the durable tier is written, not committed yet
                direct_ok = self._commit_direct(step, results[1])
                if direct_ok:  # a durable copy stays even when the memory tier fails
                    with self.promoter.cond:  # room for this step in memory: it is durable and newer than any there
                        if not self.promoter.abandoned:
                            self.promoter.retain_first(keep=self.first.keep - 1)
            if self.promoter.abandoned:  # outlived abandon()'s grace: the durable copy stays, memory is not ours now
                return
            marker = self._fill(fs, results, 0, step, meta, replicated)
            if isinstance(marker, BaseException):
                raise marker
            kill_point("before_commit", step, self.rank)
            with self.promoter.cond:
                if self.promoter.abandoned:
                    return
                tier.commit(marker)
            kill_point("after_commit", step, self.rank)
        except (Exception, CheckpointException) as e:  # a full disk fails this save, not the training
            failed = e
        if copying is not None:
            futures_wait([copying])  # a write that failed early: the next save reuses the buffer once it is done
        if direct_ok:
            self.promoter.direct_done[step] = True  # the promoter skips that tier (a failed direct copy: it retries it)
        if failed is not None:
            self.stats.failed += 1
            self.stats.last_error = f"{type(failed).__name__}: {failed}"
            try:
                tier.delete(step, self.rank)
            except Exception as ce:  # noqa: BLE001 - cleanup must never fail the next save
                log.warning("cleanup of step %d in %s failed: %s", step, tier.name, ce)
            if direct_ok and not self.promoter.abandoned:
                # A full memory tier must not freeze the further tiers at the last step that fit: they get this
                # step from the durable copy written beside it.
                log.warning("checkpoint of step %d failed in %s: %s; it is durable in %s and promoted from there; "
                            "training continues", step, tier.name, failed, self.direct.name)
                with self.promoter.cond:
                    self.promoter.queue(results[1], self.direct)
                    self.promoter.cond.notify_all()
            else:
                log.warning("checkpoint of step %d failed in %s: %s; training continues", step, tier.name, failed)
            return
        self.stats.committed += 1
        self.stats.last_write_seconds = time.perf_counter() - t0
        d = tier.snapshot_dir(step, self.rank)
        with self.promoter.cond:
            self.promoter.retain_first()
        if self.buddy is not None and self.buddy_address:
            try:
                PeerClient(self.buddy_address).put(marker, d)
                kill_point("after_replicate", step, self.rank)
            except OSError as e:
                log.warning("replicating step %d to buddy rank %d failed: %s", step, self.buddy, e)
        with self.promoter.cond:
            self.promoter.queue(marker)
            self.promoter.cond.notify_all()
        trim_heap()  # after the step is durable and queued: neither waits for it

    def _write(self, tiers: list[DirTier], step: int, staged: dict, meta: dict, replicated: bool,
               landing: Landing | None = None
               ) -> tuple[TeeFileSystem | None, list[Marker | Destination | BaseException]]:
        """One DCP write of ``staged`` into a new snapshot directory in each of ``tiers``: every tensor is
        serialized once and every byte hashed once, while it is written (no read back); with ``landing``, each
        staged byte once it has landed (planning and the first pieces overlap the staging copy). Returns the file
        system and, per tier, its marker (files written, not committed: ``DirTier.commit`` fsyncs), its
        deferred destination (a memory tier beside a durable one: :meth:`_fill` writes it) or the error
        that failed it."""
        errors: dict[int, BaseException] = {}
        dests: dict[int, Destination] = {}
        for i, t in enumerate(tiers):
            try:
                dests[i] = Destination(t.kind, t.prepare(step, self.rank), durable=t.fsync, step=step,
                                       o_direct=self.cfg.o_direct and t.kind == "nvme")  # the local disk only
            except Exception as e:  # noqa: BLE001 - this tier fails, the others are written
                errors[i] = e
        out: dict[int, Marker | Destination] = {}
        fs = None
        if dests:
            fs = TeeFileSystem(list(dests.values()), step=step, rank=self.rank, stable=self.stager.spans())
            # raw layout: the staged buffer's bytes in a few large writes from now on, while DCP plans (rawfmt.py);
            # torch-save: DCP's own zip per tensor
            raw, head = self.cfg.layout == "raw", None
            try:
                extra = {}
                if raw:
                    flat = self.stager.buffers()
                    head = BufferHead(fs, fs.primary, flat[0], landing and landing.wait) if flat else None
                    extra = {"head": head, "landed": landing and landing.wait}
                writer = writer_for(self.cfg.layout)(fs.primary, sync_files=False,
                                                     thread_count=self.cfg.write_threads, **extra)
                writer.fs = fs
                planner = SavePlanner(self.stager.layout_key,
                                      landed=None if raw or landing is None else landing.wait_tensor)
                dcp.save(staged, storage_writer=writer, planner=planner, no_dist=True)  # .metadata beside the data
                if head is not None:
                    head.wait()  # the data file is written
            except (Exception, CheckpointException) as e:
                for i, d in dests.items():
                    errors[i] = d.error or e
            finally:
                if head is not None:
                    head.cancel()  # a save that failed before the head's file was finished: it stops writing
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

    def _commit_direct(self, step: int, written: Marker | BaseException) -> bool:
        """Commit the first durable tier's copy written next to the memory tier. Returns whether it committed; if
        not, the promoter copies the step there from the memory tier (its retries; counted if they fail too)."""
        tier = self.direct
        try:
            if isinstance(written, BaseException):
                raise written
            tier.commit(written)
        except (Exception, CheckpointException) as e:
            self.stats.promote_retried += 1
            log.warning("writing step %d to %s failed: %s: %s; copying it from %s instead", step, tier.name,
                        type(e).__name__, e, self.first.name)
            try:
                tier.delete(step, self.rank)
            except Exception:  # noqa: BLE001 - best effort cleanup
                pass
            return False
        # Committed: durable. What follows costs space at worst, never this copy (a failed retention used to
        # delete the step just committed and leave it to the niced promoter, which a kill could then outrun).
        self.policy.seal(tier, written)
        try:
            with self.promoter.cond:
                self.policy.retain(tier, written.replicated, pinned=self.promoter.pins(tier))
        except Exception as e:  # noqa: BLE001 - retention costs space, not the copy
            log.warning("retention in %s failed: %s: %s", tier.name, type(e).__name__, e)
        self.stats.promoted[tier.kind] = self.stats.promoted.get(tier.kind, 0) + 1
        self.stats.behind.pop(tier.kind, None)
        return True

