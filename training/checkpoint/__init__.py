"""Async, tiered, peer-replicated checkpointing on torch.distributed.checkpoint."""

from training.checkpoint.manager import (Checkpointer, IncompatibleCheckpoint, RefusedFreshStart, RestoreInfo,
                                        build_tier)
from training.checkpoint.staging import HostStager, state_sha256
from training.checkpoint.storage import CorruptCheckpoint, DirTier, Marker, S3Tier

__all__ = ["Checkpointer", "IncompatibleCheckpoint", "RefusedFreshStart", "RestoreInfo", "build_tier", "HostStager", "state_sha256", "CorruptCheckpoint",
           "DirTier", "Marker", "S3Tier"]
