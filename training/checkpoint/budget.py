"""Does the memory tier fit? Checked against the real size of the file system that holds it (``/dev/shm``).

A node's memory tier holds, for every local rank, ``keep`` committed snapshots, one more
being written, and - with peer replication - ``keep`` copies of its buddy's snapshots.
When ``/dev/shm`` (a pod's memory-backed ``emptyDir`` or the host's tmpfs) is smaller,
saves start failing with ENOSPC deep into a run; this says so at the first save instead.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MemoryBudget:
    need: int           # bytes the node's memory tier needs at steady state
    total: int          # size of the file system holding it
    free: int           # free now

    @property
    def fits(self) -> bool:
        return self.need <= self.total

    def message(self, where: Path, keep: int, local_ranks: int, peer: bool) -> str:
        parts = f"{keep} snapshot(s) + 1 being written" + (f" + {keep} buddy copies" if peer else "")
        return (f"memory tier {where}: {local_ranks} local rank(s) x ({parts}) need about {size(self.need)}, "
                f"but its file system holds {size(self.total)} ({size(self.free)} free): saves will "
                "fail with ENOSPC once it fills. Give the pod a larger /dev/shm (openpod submit --shm) or lower --keep")


def size(n: int) -> str:
    """Bytes in the largest binary unit that keeps the figure at 1 or more (a small /dev/shm is not "0.0 GiB")."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def memory_tier_need(snapshot_bytes: int, *, keep: int, local_ranks: int, peer: bool) -> int:
    """Steady-state bytes of a node's memory tier (per-rank snapshots of about ``snapshot_bytes``)."""
    per_rank = snapshot_bytes * (keep + 1 + (keep if peer else 0))
    return per_rank * max(1, local_ranks)


def check(root: Path, snapshot_bytes: int, *, keep: int, local_ranks: int, peer: bool) -> MemoryBudget:
    probe = Path(root)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    return MemoryBudget(memory_tier_need(snapshot_bytes, keep=keep, local_ranks=local_ranks, peer=peer),
                        usage.total, usage.free)
