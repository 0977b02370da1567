"""The checkpointing component: async save, tiered promotion, peer replication, verified restore.

:class:`Checkpointer` is the facade the training loop calls; it stages the state (``staging``) and wires the
parts that do the rest, each in its own module: the tiers and the rules for them (``tiers``), the writer of one
save (``writer``), the promoter (``promotion``), the restore path (``restore``) and the counts (``stats``)."""

from __future__ import annotations

import logging
import threading
import time
import warnings
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor

from training.checkpoint.collective import all_gather, all_ok
from training.checkpoint.fast_state import StateDicts
from training.checkpoint.final_flush import promote_last_step
from training.checkpoint.peer import PeerServer, buddy_of
from training.checkpoint.promotion import Promoter, background_priority
from training.checkpoint.reshard import state_layout
from training.checkpoint.restore import PeerSource, Restorer, RestoreInfo
from training.checkpoint.staging import HostStager, local_tensor
from training.checkpoint.stats import SaveStats, gauges_over_ranks, summary_over_ranks
from training.checkpoint.storage import DirTier
from training.checkpoint.tiers import SHARED, TierPolicy, build_tier
from training.checkpoint.writer import SnapshotWriter, trim_heap
from training.checkpoint.rawfmt import check_layout
from training.config import CheckpointConfig
from training.faults import kill_point

log = logging.getLogger("training.checkpoint")
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


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
        check_layout(cfg.layout)
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.tiers = [build_tier(t, node_id) for t in cfg.tiers]
        if not isinstance(self.tiers[0], DirTier):
            raise ValueError("the first checkpoint tier must be a directory (memory, nvme or fsx)")
        self.first: DirTier = self.tiers[0]
        self.scratch = Path(scratch_dir)
        self._restored_origin = None  # (source, marker) of the step restored by this process (RestoreInfo.origin)
        self.stager = HostStager()
        self._state_dicts = StateDicts()  # get_state_dict, its names learned once (fast_state.py)
        self.stats = SaveStats()
        self._inflight: Future | None = None
        # The first durable tier, written straight from the staged copy next to the memory tier.
        self._direct: DirTier | None = None
        if (cfg.direct_durable and self.first.kind == "memory" and len(self.tiers) > 1
                and isinstance(self.tiers[1], DirTier) and self.tiers[1].fsync):
            self._direct = self.tiers[1]
        self.policy = TierPolicy(cfg, self.tiers, rank=rank, world_size=world_size)
        # The first shared tier (FSx, else S3): what outlives this node. save_durably() forces a step there.
        self.durable = self.policy.durable
        self.promoter = Promoter(cfg, self.tiers, self.policy, self.stats, rank=rank, direct=self._direct)
        # Overlapped staging runs at normal priority: the next optimizer step waits for it.
        self._copier = ThreadPoolExecutor(1, thread_name_prefix="ckpt-stager")
        self._staged: Future | None = None
        self._trim_due = False  # trim the heap before the first optimizer update after a save (_before_optimizer_step)
        self._hooks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimizer -> pre-hook handle
        self._waited = 0.0
        # The writer fills the memory tier and, with direct_durable, the first durable tier in the same write.
        # When it writes a durable tier (that one, or a first tier on disk) it runs at normal priority, as
        # torch's own async_save writer: until it lands, the step exists only in this node's memory. (Niced like
        # the other checkpoint threads, it waited behind a busy training loop: 5.9x DCP's time to durable
        # instead of 2.0x in benchmarks/checkpoint_vs_dcp.py, 2026-11-23.) Only a writer of the memory tier
        # alone yields to the training loop.
        writes_durable = self._direct is not None or self.first.fsync
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="ckpt-writer",
                                          initializer=None if writes_durable else background_priority)
        self._budget_checked = False
        self._local_world_size = local_world_size
        self._replicated = True
        self.last_step: int | None = None  # the newest step this process saved or restored (finalize)
        self._catch_up: set[int] = set()  # shared tiers (indices) the last step was queued for after a restore
        self.components: dict[str, object] = {}  # name -> Stateful, see register()

        self.peer_server = None
        self.peers: list[tuple[str, int] | None] = [None] * world_size
        self.buddy = None
        if cfg.peer_replication:
            held = DirTier("memory", self.first.root.parent / f"{self.first.root.name}.held",
                           keep=self.first.keep, fsync=False)
            self.peer_server = PeerServer(held, self.first, host=cfg.peer_host)
            self.peers = [tuple(a) if a else None for a in all_gather(list(self.peer_server.address), world_size)]
            self.buddy = buddy_of(rank, world_size, local_world_size)
        self.snapshot_writer = SnapshotWriter(
            cfg, rank=rank, world_size=world_size, first=self.first, direct=self._direct, stager=self.stager,
            policy=self.policy, promoter=self.promoter, stats=self.stats, buddy=self.buddy,
            buddy_address=self.peers[self.buddy] if self.buddy is not None else None)
        self.restorer = Restorer(cfg, rank=rank, world_size=world_size, scratch=self.scratch, stats=self.stats,
                                 components=self.components, state=self.state)

    # ------------------------------------------------------------ job-wide
    def job_gauges(self) -> dict[str, int]:
        """``stats.gauges()`` over every rank, for ``Goodput.persist``: save-path failures summed (with sharded
        state every rank writes its own part of each step: rank 0's count alone missed the others'), the
        restore's figures the largest of any rank (every rank reads the same sources). Collective: every rank
        calls it at the same point (restore, a save, the end)."""
        return gauges_over_ranks(self.stats, self.world_size)

    def job_summary(self) -> dict:
        """The result's ``checkpoints`` section, the same on every rank (collective): every rank's saves and
        failures summed, the ranks that failed, each tier's ranks behind, (rank 0's listing) the newest step
        complete and verified in each shared tier, the job's last step and the shared tiers that do not hold it
        (``tiers_behind``), and those this process copied it into after finding it missing there (a rerun catching
        up: ``promoted_last_step``)."""
        return summary_over_ranks(self.stats, self.rank, self.world_size, self.durable_steps,
                                  last_step=self.last_step, promoted_last_step=self.caught_up())

    def finalize(self) -> list[str]:
        """Make the last step (saved or restored here) durable in every shared tier, whatever their cadence, and
        wait for it: a job is finished only once its last step is in every shared tier (a rerun of a job killed
        during its final flush finds that step in node memory alone). Each rank copies its own part from the
        node tier that holds it, into each shared tier that lacks it (``final_flush.py``). Returns the tiers it
        queued it for."""
        self.flush()
        return promote_last_step(
            self.last_step, rank=self.rank, replicated=self._replicated, tiers=self.tiers, promoter=self.promoter,
            stats=self.stats, scratch=self.scratch, restored=self._restored_origin, catch_up=self._catch_up)

    def caught_up(self) -> list[str]:
        """The shared tiers this process copied its last step into after finding it missing there."""
        return sorted(self.tiers[i].kind for i in self._catch_up if self.promoter.copied(i) == self.last_step)

    def durable_steps(self) -> dict[str, int | None]:
        """Per shared tier: the newest step every rank's part of which is committed there (None: no such step;
        the tier unreadable is said in the log)."""
        return self.policy.durable_steps(self._replicated)

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
        msd, osd = self._state_dicts(model, optimizer)
        return {"model": msd, "optim": osd, **{n: c.state_dict() for n, c in self.components.items()}}

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
                self._trim_due = True
        else:
            staged = self.stager.stage(state)
        self.stats.started += 1
        self.last_step = step
        replicated = self._replicated = not _has_dtensor(state)  # sharded: each rank's snapshot holds its shards
        if not self._budget_checked:
            self._check_memory_budget(replicated)
        meta = {**(meta or {}), "layout": state_layout(state)}  # restore: same mesh, or reshard
        self._inflight = self._writer.submit(self.snapshot_writer.persist, step, staged, meta, copying, replicated,
                                             self.stager.landing if copying is not None else None)
        return time.perf_counter() - t0

    def _check_memory_budget(self, replicated: bool) -> None:
        """Once, at the first save: warn (and count) when the memory tier cannot hold what it may have to."""
        self._budget_checked = True
        if self.first.kind != "memory":
            return
        from training.checkpoint import budget

        # Buddy copies arrive only from another node (buddy_of: none on a single node). Copies read the memory
        # tier for every further tier but the one the writer fills beside it; replicated state goes to the
        # shared tiers from rank 0 alone (on the first node).
        peer = self.buddy is not None
        copied = [t for t in self.tiers[1:] if t is not self._direct]
        ranks = max(1, self._local_world_size)
        to_shared = (1 if self.rank < ranks else 0) if replicated else ranks
        pinned = (ranks * budget.pinned_steps(self.first.keep, [t.every for t in copied if t.kind not in SHARED])
                  + to_shared * budget.pinned_steps(self.first.keep, [t.every for t in copied if t.kind in SHARED]))
        b = budget.check(self.first.root, self.stager.nbytes, keep=self.first.keep,
                         local_ranks=self._local_world_size, peer=peer, pinned=pinned)
        if not b.fits:
            self.stats.memory_tier_short = True
            log.warning("%s", b.message(self.first.root, self.first.keep, self._local_world_size, peer, pinned))

    def save_durably(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     meta: dict | None = None) -> str | None:
        """Save ``step`` and wait until it is committed in the durable tier whatever its cadence (before the node
        goes away). Collective: returns that tier's name if every rank's snapshot got there, else None."""
        if self.durable is not None:
            self.policy.forced.add(step)
        self.save(step, model, optimizer, meta)
        self.flush()
        self.policy.forced.discard(step)
        # Replicated state has one copy in shared tiers, written by rank 0; every other rank writes its own shards.
        writes = not (self._replicated and self.rank != 0)
        ok = self.durable is not None and (not writes or self.rank in self.durable.index().get(step, set()))
        return self.durable.kind if all_ok(ok, self.world_size) else None

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
        if self._trim_due:
            # The update's own buffers (AdamW's foreach temporaries: most of a step's peak) come next, while the
            # save is written. Heap memory freed since (the loop's activations, the save's objects) would stay
            # resident beside them: glibc's main arena kept 4-9 MiB more than in DCP's column at that peak on
            # `medium` (docs/training.md, issue 38 item 7). Handing it back here puts the peak at the loop's
            # live bytes; once per save, counted as held time.
            self._trim_due = False
            t0 = time.perf_counter()
            trim_heap()
            self._waited += time.perf_counter() - t0

    def busy(self) -> bool:
        """True while a save is being written, replicated or promoted."""
        return self.promoter.busy() or (self._inflight is not None and not self._inflight.done())

    def flush(self) -> None:
        """Wait until the in-flight save and its promotion are done."""
        self.wait()
        self.promoter.wait_idle()

    def close(self) -> None:
        self.flush()
        self.promoter.close()
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
        self.promoter.abandon()  # a write still running leaves the memory tier to the next generation
        self._writer.shutdown(wait=False, cancel_futures=True)
        self._copier.shutdown(wait=False, cancel_futures=True)
        for handle in list(self._hooks.values()):
            handle.remove()
        self._hooks.clear()
        if self.peer_server:  # its serve_forever notices a shutdown only at its next poll: do not wait
            threading.Thread(target=self.peer_server.close, name="peer-server-close", daemon=True).start()

    # -------------------------------------------------------------- restore
    def _sources(self) -> list:
        sources: list = [self.first]
        if self.peer_server is not None:  # this node's memory also holds buddies' snapshots
            sources += [self.peer_server.held, PeerSource(self.peers, self.rank, self.first)]
        return sources + self.tiers[1:]

    def restore(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> RestoreInfo | None:
        """Load the newest checkpoint every rank can load, verified; None for a fresh start (collective; see
        :meth:`Restorer.restore`: the copies tried, resharding, when it refuses to start fresh)."""
        # sharded (DTensor parameters): each rank's snapshot holds its shards; read off the module, since the
        # restorer builds the state dict once and a second get_state_dict would double restore's set-up
        self._replicated = not any(isinstance(t, DTensor) for t in (*model.parameters(), *model.buffers()))
        info = self.restorer.restore(self._sources(), model, optimizer)
        self._restored_origin = info.origin if info is not None else None
        if info is not None:
            self.last_step = info.step
            self._promote_restored(info)
        return info

    def _promote_restored(self, info: RestoreInfo) -> None:
        """A step restored from this rank's own copy in a directory tier (memory, NVMe, a peer's copy landed in
        memory, FSx) goes on to the shared tiers it is due in and missing from, as if just saved (a rerun after a
        kill during promotion)."""
        src, marker = info.origin or (None, None)
        if marker is None or marker.rank != self.rank or (self._replicated and self.rank != 0):
            return
        if isinstance(src, PeerSource):
            src = self.first  # fetched into this node's memory tier, committed there
        if not isinstance(src, DirTier) or not src.marker_path(marker.step, self.rank).exists():
            return
        missing = set()
        for i, tier in enumerate(self.tiers[1:], 1):
            try:
                if tier.kind in SHARED and self.rank not in tier.index().get(marker.step, set()):
                    missing.add(i)
            except Exception:  # noqa: BLE001 - the copy's retries report an unreachable tier
                missing.add(i)
        if missing:
            with self.promoter.cond:
                queued = self.promoter.queue(marker, src, only=missing)
                self.promoter.cond.notify_all()
            self._catch_up |= {i for i in missing if self.tiers[i].kind in queued}
            if queued:
                log.info("restored step %d is in no %s yet: promoting it", marker.step, ", ".join(queued))


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
