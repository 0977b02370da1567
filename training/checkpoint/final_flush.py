"""The final flush: a finished job's last step (saved or restored here) copied into every shared tier that lacks
it, whatever their cadence, before the job ends (:meth:`Checkpointer.finalize`)."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

from training.checkpoint.restore import PeerSource
from training.checkpoint.stats import SaveStats
from training.checkpoint.storage import DirTier, Marker, Tier, verify_dir
from training.checkpoint.tiers import SHARED

log = logging.getLogger("training.checkpoint")


def promote_last_step(step: int | None, *, rank: int, replicated: bool, tiers: list[Tier], promoter,
                      stats: SaveStats, scratch: Path, restored: tuple | None, catch_up: set[int]) -> list[str]:
    """Copy rank ``rank``'s part of ``step`` from the node tier that holds it into each shared tier that lacks it
    and wait for it (replicated state: rank 0's part is the step). ``restored``: (source, marker) of the part
    this process restored, the source when no node tier holds it; ``catch_up`` gets the indices of the tiers it
    is queued for. Returns the kinds of those tiers."""
    if step is None or (replicated and rank != 0):
        return []
    src = next((t for t in tiers  # node tiers first (the order of the config)
                if isinstance(t, DirTier) and t.marker_path(step, rank).exists()), None)
    marker, origin = None, None
    if src is not None:
        try:
            marker = Marker.from_json(src.marker_path(step, rank).read_text())
        except (OSError, ValueError, TypeError) as e:
            log.warning("step %d: cannot read its marker in %s (%s); not promoted", step, src.name, e)
            return []
    else:  # restored from S3 or another rank's replicated part? Copied below if a shared tier lacks it
        origin, part = remote_origin(restored, step, rank, replicated)
        marker = dataclasses.replace(part, rank=rank) if part is not None else None
    missing = set()
    for i, tier in enumerate(tiers[1:], 1):
        if tier.kind not in SHARED or stats.behind.get(tier.kind) == step or tier in (src, origin):
            continue  # not shared, its copy of this very step failed already (after its retries), or the source
        try:
            listed = rank in tier.index().get(step, set())
        except Exception as e:  # noqa: BLE001 - copy it: the copy's retries say whether the tier is there
            log.warning("cannot list %s: %s: %s", tier.name, type(e).__name__, e)
            listed = False
        if listed and marker is not None:
            try:  # there as the source holds it? A damaged copy (or another save's) is copied again
                tier.check_copy(marker)
            except Exception as e:  # noqa: BLE001 - whatever the reason, it is not the source's part
                log.warning("step %d: rank %d's part in %s is not the one in %s (%s: %s); copying it again",
                            step, rank, tier.name, (src or origin).name, type(e).__name__, e)
                listed = False
        if not listed:
            missing.add(i)
    if missing and src is None and origin is not None:
        src = land(origin, part, tiers[0], rank, scratch)
    if not missing or src is None:
        if missing:
            log.warning("step %d: no node-local copy of rank %d's part to promote", step, rank)
        return []
    with promoter.cond:
        queued = promoter.queue(marker, src, force=True, only=missing)
        promoter.cond.notify_all()
    catch_up |= {i for i in missing if tiers[i].kind in queued}
    if queued:
        log.info("promoting the last step %d to %s before the job ends", step, ", ".join(queued))
    promoter.wait_idle()
    return queued


def remote_origin(restored: tuple | None, step: int, rank: int, replicated: bool) -> tuple:
    """(tier, marker) of the part of ``step`` this process restored, where no node directory holds this rank's
    own part: one fetched from S3, or - replicated state, where any rank's part is the step - another rank's
    part in a node tier (this rank was killed before committing its own). Else (None, None)."""
    tier, marker = restored or (None, None)
    if marker is None or marker.step != step or isinstance(tier, PeerSource):
        return None, None
    if marker.rank != rank:
        return (tier, marker) if replicated and marker.replicated else (None, None)
    return (None, None) if isinstance(tier, DirTier) else (tier, marker)


def land(tier, marker: Marker, first: DirTier, rank: int, scratch: Path) -> DirTier | None:
    """Copy the restored part ``marker`` from ``tier`` (fetched again, verified) into ``first`` as rank ``rank``'s,
    committed there: the source for the shared tiers that lack the step (a rerun of a finished job whose FSx
    lost the step S3 kept, or whose rank was killed before committing its replicated part)."""
    landing = scratch / "landing"
    try:
        d = tier.materialize(marker, landing)
        verify_dir(d, marker, f"{tier.name}/{marker.key}")
        first.put(d, dataclasses.replace(marker, rank=rank))
    except Exception as e:  # noqa: BLE001 - the tier stays behind, and the result says so
        log.warning("step %d: copying the restored part from %s to promote it failed: %s: %s", marker.step,
                    tier.name, type(e).__name__, e)
        return None
    finally:
        shutil.rmtree(landing, ignore_errors=True)
    return first
