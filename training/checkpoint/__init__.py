"""Async, tiered, peer-replicated checkpointing on torch.distributed.checkpoint."""

from training.checkpoint.manager import Checkpointer
from training.checkpoint.restore import IncompatibleCheckpoint, RefusedFreshStart, RestoreInfo
from training.checkpoint.staging import HostStager, state_sha256
from training.checkpoint.storage import CorruptCheckpoint, DirTier, Marker, S3Tier
from training.checkpoint.tiers import build_tier

__all__ = ["Checkpointer", "IncompatibleCheckpoint", "RefusedFreshStart", "RestoreInfo", "build_tier", "HostStager", "state_sha256", "CorruptCheckpoint",
           "DirTier", "Marker", "S3Tier"]
