"""The promoter: one background thread that copies committed snapshots down the further tiers, oldest pending
step first, with retries, per-tier cadence and retention."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path

from training.checkpoint.stats import SaveStats
from training.checkpoint.storage import DirTier, Marker, Tier
from training.checkpoint.tiers import TierPolicy
from training.config import CheckpointConfig
from training.faults import kill_point

log = logging.getLogger("training.checkpoint")


def background_priority() -> None:
    """Checkpoint threads yield the CPU to the training loop (Linux: nice is per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


class Promoter:
    """Copies each committed step to the further tiers it is due on. The writer hands steps over with
    :meth:`queue` and prunes the first tier with :meth:`retain_first`, both under :attr:`cond`, the lock that
    also orders its commits against :meth:`abandon`."""

    def __init__(self, cfg: CheckpointConfig, tiers: list[Tier], policy: TierPolicy, stats: SaveStats, *,
                 rank: int, direct: DirTier | None):
        self.cfg, self.tiers, self.policy, self.stats, self.rank = cfg, tiers, policy, stats, rank
        self.first: DirTier = tiers[0]
        self.direct = direct  # the first durable tier when the writer fills it beside the memory tier
        self._pinned: set[int] = set()
        self.cond = threading.Condition()
        # Per further tier (index into self.tiers): the newest committed step due there and not copied yet.
        # Which steps are due is decided from the step number alone, the same on every rank; a busy promoter
        # replaces a tier's pending step only with a newer step due on that same tier.
        self._pending: dict[int, Marker] = {}
        self._from: dict[int, DirTier] = {}  # step -> the tier its pending copies are read from
        self._closing = False
        self.abandoned = False  # abandon(): the memory tier now belongs to the next generation
        self._promoting = False
        self.direct_done: dict[int, bool] = {}  # step -> written directly (the promoter skips that tier)
        self._thread = threading.Thread(target=self._promote_loop, name="ckpt-promoter", daemon=True)
        self._thread.start()

    def queue(self, marker: Marker, source: DirTier | None = None) -> None:
        """Hand ``marker`` to the promoter for every further tier it is due on (caller holds ``cond``); its
        files are copied from ``source`` (default: the first tier)."""
        direct = self.direct_done.pop(marker.step, False)
        for i, tier in enumerate(self.tiers[1:], 1):
            if (direct and tier is self.direct) or tier is source:
                continue  # written from the staged copy already
            if self.policy.due_in(tier, marker.step, marker.replicated):
                self._pending[i] = marker
                self._from[marker.step] = source or self.first

    def retain_first(self, keep: int | None = None) -> None:
        """Apply the first tier's retention (caller holds ``cond``); a failure costs space, not the job.
        ``keep``: fewer than the tier's own, to make room before a newer step is written into it."""
        pinned = self._pinned | {m.step for m in self._pending.values()}  # steps still to be copied from here
        try:
            self.first.retain(self.rank, pinned, keep=keep)
        except OSError as e:
            log.warning("retention in %s failed: %s", self.first.name, e)

    def busy(self) -> bool:
        """True while a step waits to be copied or is being copied."""
        with self.cond:
            return bool(self._pending) or self._promoting

    def wait_idle(self) -> None:
        """Wait until every queued step is copied (or its copies failed)."""
        with self.cond:
            while self._pending or self._promoting:
                self.cond.wait()

    def close(self) -> None:
        """Stop the thread once nothing is pending."""
        with self.cond:
            self._closing = True
            self.cond.notify_all()
        self._thread.join()

    def abandon(self) -> None:
        """Drop what is pending and stop; a write still running leaves the memory tier to the next generation."""
        with self.cond:
            self.abandoned = True
            self._closing = True
            self._pending = {}
            self.cond.notify_all()

    def _promote_loop(self) -> None:
        background_priority()
        while True:
            with self.cond:
                while not self._pending and not self._closing:
                    self.cond.wait()
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
                with self.cond:
                    self._pinned.discard(marker.step)
                    # A save committed during this promotion could not drop this step
                    # (it was pinned); drop it now if it fell out of the first tier's window.
                    self.retain_first()
                    self._promoting = False
                    self.cond.notify_all()

    def _promote(self, marker: Marker, tiers: list[int]) -> None:
        with self.cond:
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
                if attempt == attempts or self._closing and self.abandoned:
                    self.stats.last_error = f"{type(err).__name__}: {err}"
                    self.stats.promote_failed[tier.kind] = self.stats.promote_failed.get(tier.kind, 0) + 1
                    self.stats.behind[tier.kind] = max(marker.step, self.stats.behind.get(tier.kind, 0))
                    return
                self.stats.promote_retried += 1
                if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                    try:
                        self.policy.retain(tier, marker.replicated, keep=max(1, tier.keep - 1))
                    except Exception as re:  # noqa: BLE001 - the retry says whether it helped
                        log.warning("making room in %s failed: %s", tier.name, re)
                time.sleep(self.cfg.promote_retry_s * attempt)
        self.stats.promoted[tier.kind] = self.stats.promoted.get(tier.kind, 0) + 1
        self.stats.behind.pop(tier.kind, None)
        self.policy.seal(tier, marker)
        try:
            self.policy.retain(tier, marker.replicated)
        except Exception as e:  # noqa: BLE001 - retention costs space, not the copy
            log.warning("retention in %s failed: %s", tier.name, e)
