"""Small file helpers shared by the CLI and the worker."""

from __future__ import annotations

import json
from pathlib import Path

from training.checkpoint.storage import atomic_write


def write_json_atomic(path: str | Path, obj) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(obj, sort_keys=True).encode())
