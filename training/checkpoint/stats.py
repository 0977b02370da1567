"""What a checkpointer counts (:class:`SaveStats`) and those counts summed over the job's ranks."""

from __future__ import annotations

from dataclasses import dataclass, field

from training.checkpoint.collective import all_gather, all_reduce


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


def gauges_over_ranks(stats: SaveStats, world_size: int) -> dict[str, int]:
    """``stats.gauges()`` over every rank (collective), see :meth:`Checkpointer.job_gauges`."""
    g = stats.gauges()
    failures = all_reduce([g["checkpoint_failures"]], world_size)[0]
    src, older = all_reduce([g["restore_source_failures"], g["restored_older"]], world_size, "max")
    return {"checkpoint_failures": failures, "restore_source_failures": src, "restored_older": older}


def summary_over_ranks(stats: SaveStats, rank: int, world_size: int, durable_steps, *, last_step: int | None = None,
                       promoted_last_step: list[str] = ()) -> dict:
    """The result's ``checkpoints`` section (collective), see :meth:`Checkpointer.job_summary`; ``durable_steps``:
    called on rank 0 alone for the newest step complete (and verified) in each shared tier."""
    st = stats
    mine = {"committed": st.committed, "failed": st.failed, "promote_failed": dict(st.promote_failed),
            "promote_retried": st.promote_retried, "behind": dict(st.behind), "last_error": st.last_error,
            "memory_tier_short": st.memory_tier_short, "restored_older": st.restored_older,
            "promoted_last_step": list(promoted_last_step)}
    if rank == 0:
        mine["durable"] = durable_steps()
    every = all_gather(mine, world_size)
    out = {"committed": sum(r["committed"] for r in every), "failed": sum(r["failed"] for r in every),
           "promote_failed": {}, "promote_retried": sum(r["promote_retried"] for r in every), "behind": {},
           "failed_ranks": [i for i, r in enumerate(every) if r["failed"] or r["promote_failed"]],
           "last_error": next((f"rank {i}: {r['last_error']}" for i, r in enumerate(every) if r["last_error"]),
                              None),
           "memory_tier_short": any(r["memory_tier_short"] for r in every),
           "restored_older": max(r["restored_older"] for r in every),
           "durable": every[0].get("durable", {}), "last_step": last_step,
           "promoted_last_step": sorted({k for r in every for k in r["promoted_last_step"]})}
    # The shared tiers whose newest verified complete step is not the job's last: not durable there.
    out["tiers_behind"] = {} if last_step is None else {
        k: s for k, s in out["durable"].items() if s is None or s < last_step}
    for i, r in enumerate(every):
        for kind, n in r["promote_failed"].items():
            out["promote_failed"][kind] = out["promote_failed"].get(kind, 0) + n
        for kind, step in r["behind"].items():
            out["behind"].setdefault(kind, {})[str(i)] = step
    return out
