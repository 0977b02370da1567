"""The restore path: every source's snapshots listed (retried), the newest step every rank can load picked,
each copy verified before it is loaded; a snapshot of another mesh is resharded from every old rank's part."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import set_state_dict

from training.checkpoint import legacy
from training.checkpoint.collective import all_gather, all_ok
from training.checkpoint.peer import PeerClient
from training.checkpoint.reshard import MergedShardsReader, directly_loadable, shard_sets, state_layout
from training.checkpoint.safe_load import SafeFileSystemReader, first_failure
from training.checkpoint.stats import SaveStats
from training.checkpoint.storage import CorruptCheckpoint, DirTier, Marker, verify_dir
from training.config import CheckpointConfig

log = logging.getLogger("training.checkpoint")


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
    origin: tuple | None = field(default=None, repr=False, compare=False)  # (source, marker) of a direct load


class PeerSource:
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


def load_into(reader, model, optimizer, where: str, state: dict, components: dict) -> None:
    """DCP-load a snapshot into the live model, optimizer and registered ``components``. ``state``: this rank's
    :meth:`Checkpointer.state`, built by the caller once for all the copies it tries."""
    state = dict(state)  # components may be dropped below
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
    for name in components:
        if name not in saved:  # a checkpoint from before the component was registered
            log.warning("checkpoint %s has no %r state; keeping its current value", where, name)
            state.pop(name)
    if hasattr(reader, "reset"):
        reader.reset()
    try:
        if fused:
            legacy.load_fused_qkv(state, reader, metadata)
        else:
            dcp.load(state, storage_reader=reader, no_dist=True)
    except CheckpointException as e:  # a corrupt item: its one-line error, not DCP's traceback text
        exc = first_failure(e)
        if isinstance(exc, CorruptCheckpoint):  # named by the copy (tier and step), not the reader's directory
            msg = str(exc)
            raise type(exc)(where + msg.removeprefix(str(reader.path))) from None
        raise exc from None
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    for name, c in components.items():
        if name in state:
            c.load_state_dict(state[name])


class Restorer:
    """Finds and loads the newest checkpoint every rank can load (see :meth:`restore`)."""

    def __init__(self, cfg: CheckpointConfig, *, rank: int, world_size: int, scratch: Path, stats: SaveStats,
                 components: dict, state):
        self.cfg, self.rank, self.world_size, self.scratch, self.stats = cfg, rank, world_size, scratch, stats
        self.components = components  # name -> Stateful: the checkpointer's, registered before or after this
        self.state = state            # (model, optimizer) -> this rank's state dict: Checkpointer.state

    def restore(self, sources: list, model: torch.nn.Module,
                optimizer: torch.optim.Optimizer) -> RestoreInfo | None:
        """Load the newest checkpoint every rank can load, verified; None for a fresh start.

        A rank loads its own snapshot when the step was saved on the same mesh (or is replicated); otherwise it
        reshards: it reads every old rank's snapshot of the step from whichever sources hold them - its node's
        memory and NVMe, the buddy copies its node holds, other nodes' memory over the peer channel, FSx, S3 -
        and DCP picks the pieces of its new shards. Resuming from an older step than the newest one any rank
        can see is said in one warning and counted (``stats.restored_older``). ``sources``: the tiers and peers,
        in the order their copies are tried."""
        t0 = time.perf_counter()
        failed_sources: list[str] = []
        listed = []
        for src in sources:
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
        gathered = all_gather((sorted(steps), seen), self.world_size)
        for other, _ in gathered:
            steps &= set(other)
        newest = max(s for _, s in gathered)
        info = None
        while steps:
            step = max(steps)
            info = self.load_step(step, direct.get(step, []), model, optimizer, state)
            if info is None:
                info = self.load_resharded(step, [s for s in sets.get(step, []) if s.complete], model, optimizer,
                                           state)
            if all_ok(info is not None, self.world_size):
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
        if not all_ok(not refuse, self.world_size):  # every rank refuses together
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
        reasons = [r for r in all_gather(why, self.world_size) if r]
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

    def load_resharded(self, step: int, sets: list, model, optimizer, state: dict) -> RestoreInfo | None:
        """Reshard ``step`` from a complete set of another mesh's snapshots: each old rank's snapshot from the
        first source whose copy verifies (fetched from a peer or S3 into scratch), read by one merged DCP reader."""
        for s in sets:
            dirs, names = [], []
            for r in range(s.world_size):
                for src, m in s.copies[r]:
                    where = f"{src.name}/{m.key}"
                    try:
                        if isinstance(src, PeerSource):  # into scratch: not this node's memory tier
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
                load_into(MergedShardsReader(dirs), model, optimizer, where, state, self.components)
            except IncompatibleCheckpoint:
                raise
            except (Exception, CheckpointException) as e:  # noqa: BLE001 - another set, or an older step
                log.warning("skipping checkpoint %s: %s: %s", where, type(e).__name__, e)
                continue
            log.info("resharded %s onto %d ranks", where, self.world_size)
            return RestoreInfo(step=step, source="+".join(names), seconds=0.0,
                               meta=s.copies[0][0][1].meta)
        return None

    def load_step(self, step: int, cands: list, model, optimizer, state: dict) -> RestoreInfo | None:
        """Load ``step`` from the first of ``cands`` (source, marker) whose copy verifies and loads; None if none."""
        for src, m in cands:
            where = f"{src.name}/{m.key}"
            try:
                d = src.materialize(m, self.scratch)
                where = f"{src.name}/{m.key}"
                if not getattr(src, "verified_on_fetch", False):
                    verify_dir(d, m, where)
                load_into(SafeFileSystemReader(d), model, optimizer, where, state, self.components)
                return RestoreInfo(step=step, source=src.name, seconds=0.0, meta=m.meta, origin=(src, m))
            except IncompatibleCheckpoint:
                raise
            except CorruptCheckpoint as e:
                log.warning("skipping corrupt checkpoint %s", e)
            except (Exception, CheckpointException) as e:  # noqa: BLE001 - any unreadable copy: next source
                log.warning("skipping checkpoint %s: %s: %s", where, type(e).__name__, e)
        return None
