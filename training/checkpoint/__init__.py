"""Async, tiered, peer-replicated checkpointing on torch.distributed.checkpoint.

The names below load on first use (PEP 562): the launcher imports light submodules of this package (peer_auth,
peer) before torchrun starts, and must not pay for torch and torch.distributed.checkpoint there
(tests/training/test_data.py::test_the_launcher_starts_torchrun_without_having_imported_torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_WHERE = {
    "Checkpointer": "manager",
    "IncompatibleCheckpoint": "restore", "RefusedFreshStart": "restore", "RestoreInfo": "restore",
    "HostStager": "staging", "state_sha256": "staging",
    "CorruptCheckpoint": "storage", "DirTier": "storage", "Marker": "storage", "S3Tier": "storage",
    "SHARED": "tiers", "build_tier": "tiers",
}

__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from training.checkpoint.manager import Checkpointer
    from training.checkpoint.restore import IncompatibleCheckpoint, RefusedFreshStart, RestoreInfo
    from training.checkpoint.staging import HostStager, state_sha256
    from training.checkpoint.storage import CorruptCheckpoint, DirTier, Marker, S3Tier
    from training.checkpoint.tiers import SHARED, build_tier


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
