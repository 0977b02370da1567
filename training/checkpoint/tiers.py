"""The tiers from the config, and the rule for each: which steps go there, when a step is complete there (its
manifest), what retention keeps."""

from __future__ import annotations

import logging
from pathlib import Path

from training.checkpoint.storage import DirTier, Marker, S3Tier, Tier
from training.config import CheckpointConfig, TierConfig

log = logging.getLogger("training.checkpoint")

NODE_LOCAL = ("memory", "nvme")   # per-node directories (a node id is appended)
SHARED = ("fsx", "s3")            # one copy for the whole job


def build_tier(t: TierConfig, node_id: str) -> Tier:
    if t.kind == "s3":
        return S3Tier(t.path, keep=t.keep, every=t.every, endpoint_url=t.endpoint_url)
    if t.kind not in NODE_LOCAL + SHARED:
        raise ValueError(f"unknown tier kind {t.kind!r}; allowed: memory, nvme, fsx, s3")
    root = Path(t.path) / node_id if t.kind in NODE_LOCAL else Path(t.path)
    return DirTier(t.kind, root, keep=t.keep, every=t.every, fsync=t.kind != "memory")


class TierPolicy:
    """Decisions about the further tiers that every rank makes alike, from the step number and the mesh."""

    def __init__(self, cfg: CheckpointConfig, tiers: list[Tier], *, rank: int, world_size: int):
        self.cfg, self.tiers, self.rank, self.world_size = cfg, tiers, rank, world_size
        # The first shared tier (FSx, else S3): what outlives this node. save_durably() forces a step there.
        self.durable = next((t for t in tiers[1:] if t.kind in SHARED), None)
        self.forced: set[int] = set()

    def cadence_due(self, tier: Tier, step: int) -> bool:
        """Whether ``step`` goes to ``tier``: decided from the step number alone, so every rank copies the same
        steps whatever its own failures or timing (a per-rank count of copies drifted apart after one rank's
        failed copy, leaving no step every rank held)."""
        if step in self.forced and tier is self.durable:
            return True
        return (step // max(self.cfg.every, 1)) % max(tier.every, 1) == 0

    def job_world(self, tier: Tier, replicated: bool) -> int | None:
        """What a step of ``tier`` needs to be complete, for its retention: the ranks of the job (a shared tier;
        replicated state has rank 0's part alone there), None for a node's own tier (each rank on its own)."""
        if tier.kind not in SHARED:
            return None
        return 1 if replicated else self.world_size

    def seal(self, tier: Tier, marker: Marker) -> None:
        """Write the step's manifest in a shared tier if this rank's part completed it (best effort: readers
        fall back to the per-rank markers)."""
        world = self.job_world(tier, marker.replicated)
        if world is None or world <= 1:
            return
        try:
            tier.seal(marker.step, world)
        except Exception as e:  # noqa: BLE001 - an optimisation for readers, never a failed copy
            log.warning("writing the manifest of step %d in %s failed: %s: %s", marker.step, tier.name,
                        type(e).__name__, e)

    def retain(self, tier: Tier, replicated: bool, keep: int | None = None, pinned: set[int] = frozenset()) -> None:
        """``tier``'s retention for this rank; ``pinned``: steps kept whatever the keep (copies read them)."""
        tier.retain(self.rank, pinned, keep=keep, world_size=self.job_world(tier, replicated))

    def due_in(self, tier: Tier, step: int, replicated: bool) -> bool:
        """Whether the promoter would copy this step to ``tier`` (cadence; one copy of replicated state in shared tiers)."""
        if not self.cadence_due(tier, step):
            return False
        return not (tier.kind in SHARED and replicated and self.rank != 0)

    def durable_steps(self, replicated: bool) -> dict[str, int | None]:
        """Per shared tier: the newest step every rank's part of which is committed there and verifies as a
        restore reads it (:meth:`Tier.verify_step`; None: no such step). A step that does not verify is said in
        the log and the next older one is tried; an unreadable tier is said in the log."""
        world = 1 if replicated else self.world_size
        out: dict[str, int | None] = {}
        for tier in self.tiers:
            if tier.kind not in SHARED:
                continue
            out[tier.kind] = None
            try:
                steps = tier.complete_steps(world)
            except Exception as e:  # noqa: BLE001 - a report, not the job
                log.warning("cannot list %s: %s: %s", tier.name, type(e).__name__, e)
                continue
            for step in steps:
                why = tier.verify_step(step, world)
                if why is None:
                    out[tier.kind] = step
                    break
                log.warning("step %d in %s does not verify: %s", step, tier.name, why)
        return out
