"""Hash checkpoint files while DCP writes them, so committing a snapshot needs no second read."""

from __future__ import annotations

import contextlib
import hashlib
import io
from pathlib import Path
from typing import Iterator

from training.checkpoint.storage import sha256_file
from training.faults import HookedFileSystem, WriteStreamProxy


class _HashingStream(WriteStreamProxy):
    """A write stream that feeds every byte to sha256 as long as the writes are sequential."""

    def __init__(self, inner, digest: dict):
        super().__init__(inner)
        self._d = digest

    def write(self, b) -> int:
        mv = memoryview(b)
        if self._d["ok"] and self._inner.tell() != self._d["size"]:
            self._d["ok"] = False  # a write that is not an append: fall back to reading the file back
        n = self._inner.write(mv)
        if self._d["ok"]:
            self._d["h"].update(mv[:n] if n is not None else mv)
            self._d["size"] += n if n is not None else len(mv)
        return n

    def readable(self) -> bool:
        return False


class HashingFileSystem(HookedFileSystem):
    """The DCP file system (with the fault hooks) that records each written file's size and sha256."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.digests: dict[str, dict] = {}

    @contextlib.contextmanager
    def create_stream(self, path, mode) -> Iterator[io.IOBase]:
        with super().create_stream(path, mode) as s:
            if "w" not in mode:
                yield s
                return
            d = {"h": hashlib.sha256(), "size": 0, "ok": "a" not in mode and "+" not in mode}
            self.digests[str(path)] = d
            yield _HashingStream(s, d)

    def rename(self, path, new_path) -> None:
        super().rename(path, new_path)
        d = self.digests.pop(str(path), None)
        if d is not None:
            self.digests[str(new_path)] = d

    def describe(self, d: Path) -> dict[str, dict]:
        """Like ``storage.describe_dir``: sizes and sha256 of every file in ``d``, from the hashes taken
        while writing; a file written out of order or by another path is read back and hashed."""
        out = {}
        for p in sorted(d.iterdir()):
            if not p.is_file():
                continue
            size = p.stat().st_size
            got = self.digests.get(str(p))
            if got is not None and got["ok"] and got["size"] == size:
                out[p.name] = {"size": size, "sha256": got["h"].hexdigest()}
            else:
                out[p.name] = {"size": size, "sha256": sha256_file(p)}
        return out
