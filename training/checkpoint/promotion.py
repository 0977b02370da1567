"""The promoter: a background thread per further tier that copies committed snapshots into it, the newest due
step next, with retries, per-tier cadence and retention."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path

from training.checkpoint.stats import SaveStats
from training.checkpoint.storage import DirTier, Marker, Tier
from training.checkpoint.tiers import SHARED, TierPolicy
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
    """Copies each committed step to the further tiers it is due on: one thread per further tier, so a slow tier
    (S3) never holds a faster one (FSx) back. Each tier holds at most one step waiting (the newest due there: a
    newer one replaces it) and one being copied, so none falls further behind than one copy's duration; how far
    each is behind (:meth:`lag`, in saves) is exported as a metric and warned about past ``cfg.tier_lag_saves``.
    The newest step a newer one replaced is the tier's fallback, kept in the first tier: when the newer step's copy
    fails (after its retries), the tier gets the fallback instead of staying at an older step.
    The writer hands steps over with :meth:`queue` and prunes the first tier with :meth:`retain_first`, both under
    :attr:`cond`, the lock that also orders its commits against :meth:`abandon`."""

    def __init__(self, cfg: CheckpointConfig, tiers: list[Tier], policy: TierPolicy, stats: SaveStats, *,
                 rank: int, direct: DirTier | None):
        self.cfg, self.tiers, self.policy, self.stats, self.rank = cfg, tiers, policy, stats, rank
        self.first: DirTier = tiers[0]
        self.direct = direct  # the first durable tier when the writer fills it beside the memory tier
        self._pinned: dict[int, int] = {}  # step -> copies reading it now
        self.cond = threading.Condition()
        # Per further tier (index into self.tiers): the newest committed step due there and not copied yet.
        # Which steps are due is decided from the step number alone, the same on every rank; a busy tier's
        # pending step is replaced only with a newer step due on that same tier.
        self._pending: dict[int, Marker] = {}
        # Per further tier: the newest step due there that a newer pending one replaced, newer than the tier's
        # newest copy; pinned in the first tier and queued if the step that replaced it fails to copy.
        self._fallback: dict[int, Marker] = {}
        self._from: dict[int, DirTier] = {}  # step -> the tier its pending copies are read from
        self._closing = False
        self.abandoned = False  # abandon(): the memory tier now belongs to the next generation
        self._promoting: set[int] = set()  # tiers copying now
        self._due: dict[int, int] = {}     # tier -> the newest step due there (queued)
        self._copied: dict[int, int] = {}  # tier -> the newest step this rank copied there (or wrote directly)
        self._over: set[int] = set()       # tiers past the lag bound (warned once per crossing)
        self.direct_done: dict[int, bool] = {}  # step -> written directly (the promoter skips that tier)
        self._threads = [threading.Thread(target=self._promote_loop, args=(i,), name=f"ckpt-promoter-{t.kind}",
                                          daemon=True) for i, t in enumerate(tiers) if i > 0]
        for t in self._threads:
            t.start()

    def queue(self, marker: Marker, source: DirTier | None = None, *, force: bool = False,
              only: set[int] | None = None) -> list[str]:
        """Hand ``marker`` to the promoter for every further tier it is due on (caller holds ``cond``); its
        files are copied from ``source`` (default: the first tier). ``force``: every shared tier whatever its
        cadence (the job's last step, :meth:`Checkpointer.finalize`); ``only``: these tiers (indices) alone.
        Returns the kinds of the tiers queued."""
        direct = self.direct_done.pop(marker.step, False)
        out = []
        for i, tier in enumerate(self.tiers[1:], 1):
            if only is not None and i not in only:
                continue
            if (direct and tier is self.direct) or tier is source:
                if direct and tier is self.direct:
                    self._copied[i] = max(marker.step, self._copied.get(i, 0))
                    self._due[i] = max(marker.step, self._due.get(i, 0))
                continue  # written from the staged copy already
            due = self.policy.due_in(tier, marker.step, marker.replicated)
            if force and tier.kind in SHARED and not (marker.replicated and self.rank != 0):
                due = True
            if due and (i not in self._pending or self._pending[i].step <= marker.step):
                old = self._pending.get(i)
                if old is not None and old.step < marker.step and old.step > self._copied.get(i, 0):
                    self._fallback[i] = old  # the newest replaced step: what the tier gets if this one fails
                self._pending[i] = marker
                self._from[marker.step] = source or self.first
                self._due[i] = max(marker.step, self._due.get(i, 0))
                out.append(tier.kind)
        self._check_lag()
        return out

    def copied(self, i: int) -> int | None:
        """The newest step this rank copied into tier ``i`` (or wrote there directly), None if none."""
        with self.cond:
            return self._copied.get(i)

    def lag(self) -> dict[str, int]:
        """Per further tier: saves due there since the newest one this rank copied there (0: up to date)."""
        with self.cond:
            return {self.tiers[i].kind: self._lag_of(i) for i in range(1, len(self.tiers))}

    def _lag_of(self, i: int) -> int:
        behind = self._due.get(i, 0) - self._copied.get(i, 0)
        return max(0, -(-behind // max(1, self.cfg.every * self.tiers[i].every)))

    def _check_lag(self) -> None:
        """Warn once when a tier falls past ``cfg.tier_lag_saves`` behind (caller holds ``cond``)."""
        bound = self.cfg.tier_lag_saves
        for i in range(1, len(self.tiers)):
            n = self._lag_of(i)
            if n > bound and i not in self._over:
                self._over.add(i)
                log.warning("checkpoint tier %s is %d saves behind (bound %d): its copies are slower than the "
                            "saves; the other tiers go on (openpod_checkpoint_tier_lag_saves)",
                            self.tiers[i].name, n, bound)
            elif n <= bound:
                self._over.discard(i)

    def retain_first(self, keep: int | None = None) -> None:
        """Apply the first tier's retention (caller holds ``cond``); a failure costs space, not the job.
        ``keep``: fewer than the tier's own, to make room before a newer step is written into it."""
        pinned = self._wanted()  # steps still to be copied from here (or that may be)
        try:
            self.first.retain(self.rank, pinned, keep=keep)
        except OSError as e:
            log.warning("retention in %s failed: %s", self.first.name, e)

    def _retain_direct(self) -> None:
        """Apply the direct tier's retention once a step copies read from it no longer needs it (holds ``cond``)."""
        try:
            self.policy.retain(self.direct, False, pinned=self.pins(self.direct))
        except OSError as e:
            log.warning("retention in %s failed: %s", self.direct.name, e)

    def _wanted(self) -> set[int]:
        """Steps a copy reads now, waits to read, or may read (a fallback); caller holds ``cond``."""
        return (set(self._pinned) | {m.step for m in self._pending.values()}
                | {m.step for m in self._fallback.values()})

    def pins(self, tier: Tier) -> set[int]:
        """Steps a copy reads from ``tier`` now, waits to read or may read (a fallback): its retention keeps them
        (caller holds ``cond``). The first tier is the source of most copies (:meth:`retain_first`); the writer's
        direct tier is one when the memory tier failed a save, and its own retention ran on its own keep, deleting
        a fallback's source before the fallback was copied."""
        return {s for s in self._wanted() if self._from.get(s, self.first) is tier}

    def _retain(self, tier: Tier, replicated: bool, keep: int | None = None) -> None:
        """Apply ``tier``'s retention (after a copy into it), keeping the steps copies read from it."""
        with self.cond:
            pinned = self.pins(tier)
        self.policy.retain(tier, replicated, keep=keep, pinned=pinned)

    def busy(self) -> bool:
        """True while a step waits to be copied or is being copied."""
        with self.cond:
            return bool(self._pending) or bool(self._promoting)

    def wait_idle(self) -> None:
        """Wait until every queued step is copied (or its copies failed)."""
        with self.cond:
            while self._pending or self._promoting:
                self.cond.wait()

    def close(self) -> None:
        """Stop the threads once nothing is pending."""
        with self.cond:
            self._closing = True
            self.cond.notify_all()
        for t in self._threads:
            t.join()

    def abandon(self) -> None:
        """Drop what is pending and stop; a write still running leaves the memory tier to the next generation."""
        with self.cond:
            self.abandoned = True
            self._closing = True
            self._pending = {}
            self._fallback = {}
            self.cond.notify_all()

    def _promote_loop(self, i: int) -> None:
        background_priority()
        while True:
            with self.cond:
                while i not in self._pending and not self._closing:
                    self.cond.wait()
                if i not in self._pending:
                    return
                marker = self._pending.pop(i)
                source = self._from.get(marker.step, self.first)
                self._pinned[marker.step] = self._pinned.get(marker.step, 0) + 1
                self._promoting.add(i)
            ok = False
            try:
                kill_point("during_promote", marker.step, self.rank)
                ok = self._copy(self.tiers[i], source.snapshot_dir(marker.step, marker.rank), marker)
            finally:
                with self.cond:
                    if ok:
                        self._copied[i] = max(marker.step, self._copied.get(i, 0))
                    self._after_copy(i, marker, ok)
                    n = self._pinned.pop(marker.step) - 1
                    if n:
                        self._pinned[marker.step] = n
                    wanted = self._wanted()
                    for old in [st for st in self._from if st not in wanted]:  # no copy reads it any more
                        del self._from[old]
                    # A save committed during this promotion could not drop this step
                    # (it was pinned); drop it now if it fell out of the first tier's window.
                    self.retain_first()
                    if source is self.direct and source is not self.first and marker.step not in wanted:
                        self._retain_direct()  # the direct tier's pin on this step is gone
                    self._promoting.discard(i)
                    self._check_lag()
                    self.cond.notify_all()

    def _after_copy(self, i: int, marker: Marker, ok: bool) -> None:
        """Tier ``i``'s copy of ``marker`` ended (caller holds ``cond``): a fallback no newer than the tier's copy is
        dropped; when the copy failed and nothing newer waits, the fallback is queued instead, so one failed copy
        does not leave the tier at whatever older step it had."""
        fb = self._fallback.get(i)
        if fb is None:
            return
        if fb.step <= self._copied.get(i, 0):
            del self._fallback[i]
        elif not ok and i not in self._pending and not self.abandoned and fb.step != marker.step:
            del self._fallback[i]
            self._pending[i] = fb
            log.warning("%s falls back to step %d after step %d's copy failed", self.tiers[i].name, fb.step,
                        marker.step)

    def _copy(self, tier: Tier, src: Path, marker: Marker) -> bool:
        """Copy one committed snapshot into ``tier``, tried ``cfg.promote_attempts`` times: a step is durable in a
        shared tier only once every rank's part is there, so one rank's transient failure must not cost the job
        that step. A full tier gets room first (its retention down to one step fewer, never the newest step
        complete job-wide). A copy that still fails is counted and the tier reported behind (``stats.behind``)."""
        attempts = max(1, self.cfg.promote_attempts)
        for attempt in range(1, attempts + 1):
            try:
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
                    return False
                self.stats.promote_retried += 1
                if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                    try:
                        self._retain(tier, marker.replicated, keep=max(1, tier.keep - 1))
                    except Exception as re:  # noqa: BLE001 - the retry says whether it helped
                        log.warning("making room in %s failed: %s", tier.name, re)
                time.sleep(self.cfg.promote_retry_s * attempt)
        self.stats.promoted[tier.kind] = self.stats.promoted.get(tier.kind, 0) + 1
        if self.stats.behind.get(tier.kind, 0) <= marker.step:  # a fallback leaves the failed newer step behind
            self.stats.behind.pop(tier.kind, None)
        self.policy.seal(tier, marker)
        try:
            self._retain(tier, marker.replicated)
        except Exception as e:  # noqa: BLE001 - retention costs space, not the copy
            log.warning("retention in %s failed: %s", tier.name, e)
        return True
