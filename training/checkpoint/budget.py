"""Does the memory tier fit? Checked against the real size of the file system that holds it (``/dev/shm``).

A node's memory tier holds, for every local rank, ``keep`` committed snapshots and one more being written; the
steps the promoter still copies from it (the step in copy, the one waiting and each tier's fallback, for each
rank copying there: :func:`pinned_steps`); and - with peer replication across nodes - ``keep`` copies of its
buddy's snapshots and one being received. When ``/dev/shm`` (a pod's memory-backed ``emptyDir`` or the host's
tmpfs) is smaller, saves start failing with ENOSPC deep into a run (once a tier lags); this says so at the first
save instead.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MemoryBudget:
    need: int           # bytes the node's memory tier may hold
    total: int          # size of the file system holding it
    free: int           # free now

    @property
    def fits(self) -> bool:
        return self.need <= self.total

    def message(self, where: Path, keep: int, local_ranks: int, peer: bool, pinned: int = 0) -> str:
        parts = f"{keep} snapshot(s) + 1 being written" + (f" + {keep + 1} buddy copies" if peer else "")
        pins = f" + {pinned} snapshot(s) pinned for copies to further tiers" if pinned else ""
        return (f"memory tier {where}: {local_ranks} local rank(s) x ({parts}){pins} need about {size(self.need)}, "
                f"but its file system holds {size(self.total)} ({size(self.free)} free): saves will "
                "fail with ENOSPC once it fills. Give the pod a larger /dev/shm (openpod submit --shm) or lower --keep")


def size(n: int) -> str:
    """Bytes in the largest binary unit that keeps the figure at 1 or more (a small /dev/shm is not "0.0 GiB")."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def pinned_steps(keep: int, cadences: Iterable[int]) -> int:
    """Steps beyond the newest ``keep`` the promoter may pin in the memory tier, for further tiers copied from it
    every ``cadence`` saves (``TierConfig.every``): per lagging tier, the step in copy (any older step), the step
    waiting (the newest due there: among the newest ``cadence`` saves) and the tier's fallback (the due step it
    replaced: among the newest ``2 x cadence``); the last two only where ``keep`` does not already hold them."""
    return sum(1 + (keep < 2 * max(1, k)) + (keep < max(1, k)) for k in cadences)


def memory_tier_need(snapshot_bytes: int, *, keep: int, local_ranks: int, peer: bool, pinned: int = 0) -> int:
    """Bytes a node's memory tier may hold (per-rank snapshots of about ``snapshot_bytes``; ``pinned``: the node's
    snapshots pinned for copies, :func:`pinned_steps` per rank copying; ``peer``: a buddy on another node sends
    its snapshots here)."""
    per_rank = keep + 1 + (keep + 1 if peer else 0)
    return snapshot_bytes * (per_rank * max(1, local_ranks) + pinned)


def check(root: Path, snapshot_bytes: int, *, keep: int, local_ranks: int, peer: bool,
          pinned: int = 0) -> MemoryBudget:
    probe = Path(root)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    return MemoryBudget(memory_tier_need(snapshot_bytes, keep=keep, local_ranks=local_ranks, peer=peer,
                                         pinned=pinned), usage.total, usage.free)
