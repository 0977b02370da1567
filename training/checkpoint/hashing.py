"""One DCP write into one or more tier directories, hashed while it is written.

DCP serializes the staged state once. :class:`TeeFileSystem` writes each chunk to
the durable destinations (disk: its writeback starts as the bytes arrive, via
``sync_file_range``, so the commit's fsync waits only for the tail) and hands the
same chunk to a follower thread, which feeds it to one sha256 and writes it into
the other destinations (the memory tier). Tensor bytes are handed over by
reference - they point into the staged host buffers, which stay untouched until
the save is done - anything else as a copy. So the bytes are serialized once,
hashed once, never read back, and hashing and the memory copy run next to the
disk write instead of after it. A destination that fails (ENOSPC, EIO) is dropped
and its error kept; the others go on, and the write fails only when none is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import io
import os
import queue
import threading
from bisect import bisect_right
from pathlib import Path
from typing import Iterator

import numpy as np
import torch.serialization
from torch.distributed.checkpoint.filesystem import FileSystem

from training.checkpoint.storage import sha256_file
from training.faults import _rules, enospc_limit, kill_point

WRITEBACK_CHUNK = 16 << 20  # start writeback of a durable file every this many bytes
SMALL_WRITE = 64 << 10      # writes below this size are gathered ...
GATHER = 1 << 20            # ... and passed on once this many bytes are gathered
_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h


def _libc_sync_file_range():
    try:
        f = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # not Linux/glibc: the commit's fsync does all the work
        return None
    f.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    return f


_sync_file_range = _libc_sync_file_range()

# torch.save computes a CRC32 of every record it writes (torch 2.13.0 torch/serialization.py:172-197, read
# when a zip writer is created, :849). Bytes written into a TeeFileSystem stream are covered by the sha256
# in the commit marker, which restore verifies before loading, so that CRC is skipped for them: it cost
# ~0.14 s of CPU per 0.33 GiB on the writer's critical path. torch.load does not need it (:183-197).
# Only the thread writing into such a stream is affected, and only while it does; every other
# torch.save in the process keeps the process-wide setting.
_in_tee_stream = threading.local()
_crc32_setting = torch.serialization.get_crc32_options


def _crc32_unless_hashed() -> bool:
    return False if getattr(_in_tee_stream, "active", False) else _crc32_setting()


torch.serialization.get_crc32_options = _crc32_unless_hashed


class Destination:
    """One directory a :class:`TeeFileSystem` writes into; ``error`` is set once a write to it failed."""

    def __init__(self, kind: str, root: Path, *, durable: bool, step: int):
        self.kind, self.root, self.durable = kind, Path(root), durable
        self.limit = enospc_limit(kind, step)  # the OPENPOD_FAULT_ENOSPC hook (training/faults.py)
        self.written = 0
        self.error: BaseException | None = None

    def charge(self, n: int) -> None:
        self.written += n
        if self.limit is not None and self.written > self.limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _File:
    def __init__(self, dest: Destination, fh):
        self.dest, self.fh = dest, fh
        self.pos = self.synced = 0

    def write(self, mv) -> None:
        self.dest.charge(len(mv))
        self.fh.write(mv)
        self.pos += len(mv)

    def start_writeback(self, *, at_least: int = WRITEBACK_CHUNK) -> None:
        """Start writing what has been written so far to the device (asynchronous; it may wait for room in
        the device's queue, so the follower calls it, not DCP's writer): the disk works while the rest is
        serialized, and the fsync at commit has only the tail left."""
        upto = self.pos  # bytes up to here have been handed to the kernel (buffered writes pass large chunks)
        if not (self.dest.durable and _sync_file_range is not None) or self.dest.error is not None:
            return
        if upto - self.synced < max(at_least, 1):
            return
        if _sync_file_range(self.fh.fileno(), self.synced, upto - self.synced, _SYNC_FILE_RANGE_WRITE):
            self.synced = 1 << 62  # not supported here (errno set): leave it all to the fsync
        else:
            self.synced = upto


class _TeeStream(io.RawIOBase):
    """A write stream: durable destinations are written here, the rest and the hash by the follower.

    torch.save hands over each tensor as a few dozen small writes (zip headers, pickle) and one large
    one (the tensor's bytes): small ones are gathered here and passed on together.
    """

    def __init__(self, fs: "TeeFileSystem", files: list[_File], followed: list[_File], digest: dict):
        self._fs, self._files, self._followed, self._d = fs, files, followed, digest
        self._small = bytearray()
        self._pos = 0

    def write(self, b) -> int:
        mv = memoryview(b).cast("B")
        n = len(mv)
        if n < SMALL_WRITE:
            self._small += mv
            if len(self._small) >= GATHER:
                self._pass_on(self._small)
                self._small = bytearray()
        else:
            if self._small:
                self._pass_on(self._small)
                self._small = bytearray()
            self._pass_on(mv)
        self._pos += n
        return n

    def _pass_on(self, chunk) -> None:
        n = len(chunk)
        self._fs.follow(self._followed, self._d, chunk, self._files)
        for f in self._files:
            if f.dest.error is None:
                try:
                    f.write(chunk)
                except OSError as e:
                    self._fs.fail(f.dest, e)
        self._fs.raise_if_none_left()
        self._fs.on_write(n)
        self._d["size"] += n

    def finish(self) -> None:
        """Pass on what is gathered (before the files are closed)."""
        if self._small:
            chunk, self._small = self._small, bytearray()
            self._pass_on(chunk)

    def tell(self) -> int:
        return self._pos

    def seek(self, offset, whence=os.SEEK_SET) -> int:
        if (offset, whence) in ((0, os.SEEK_CUR), (self._pos, os.SEEK_SET)):
            return self._pos  # where it is: nothing moves
        raise OSError(errno.ESPIPE, "checkpoint streams are written front to back")

    def flush(self) -> None:
        pass  # the files are flushed when the stream ends; the commit fsyncs them

    def close(self) -> None:
        if not self.closed:
            self.finish()
        super().close()

    def discard(self) -> None:
        """Drop anything gathered and close (the stream's end, or its failure, has been handled)."""
        self._small = bytearray()
        super().close()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False


class TeeFileSystem(FileSystem):
    """The DCP file system of one snapshot written into ``dests`` (DCP gives paths under the first one).

    ``stable``: ``(address, nbytes)`` of host buffers that stay unchanged until :meth:`close` (the staged
    tensors); chunks inside them reach the follower by reference, others as a copy. Durable destinations
    are written by DCP's writer thread, the others by the follower (all of them by the writer when none is
    durable). It never fsyncs: the tiers' commit does (``DirTier.commit``), after the writeback this
    started. The fault hooks of ``training.faults`` apply per destination (ENOSPC) and once per write
    (the ``during_write`` kill point). Call :meth:`close` when DCP is done, before :meth:`describe`.
    """

    def __init__(self, dests: list[Destination], *, step: int, rank: int, stable=()):
        super().__init__()
        if not dests:
            raise ValueError("TeeFileSystem needs at least one destination")
        self.dests, self.step, self.rank = dests, step, rank
        self.primary = dests[0].root
        self.digests: dict[str, dict] = {}  # path relative to a destination -> {"h", "size", "ok"}
        self._lock = threading.Lock()
        self._kill = any(r[0] == "during_write" and int(r[1]) == step and (len(r) < 3 or int(r[2]) == rank)
                         for r in _rules("OPENPOD_KILL_AT"))
        spans = sorted((a, a + n) for a, n in stable if n > 0)
        self._starts, self._ends = [a for a, _ in spans], [e for _, e in spans]
        self._q: queue.Queue = queue.Queue()
        self._follower = threading.Thread(target=self._follow_loop, name="ckpt-follower", daemon=True)
        self._follower.start()

    # ------------------------------------------------------------ failures
    def fail(self, dest: Destination, e: BaseException) -> None:
        with self._lock:
            if dest.error is None:
                dest.error = e

    def live(self) -> list[Destination]:
        return [d for d in self.dests if d.error is None]

    def raise_if_none_left(self) -> None:
        if not self.live():
            raise next(d.error for d in self.dests if d.error is not None)

    def on_write(self, n: int) -> None:
        if self._kill and n > 0:
            kill_point("during_write", self.step, self.rank)

    # ------------------------------------------------------------ follower
    def _stable(self, mv: memoryview) -> bool:
        if not self._starts or len(mv) == 0:
            return False
        addr = np.frombuffer(mv, dtype=np.uint8).ctypes.data
        i = bisect_right(self._starts, addr) - 1
        return i >= 0 and addr + len(mv) <= self._ends[i]

    def follow(self, files: list[_File], digest: dict, chunk, written: list[_File] = ()) -> None:
        """Queue ``chunk`` for the hash and the followed files (by reference if it lies in a stable buffer
        or is a gathered bytearray, which the stream never reuses; else as a copy)."""
        if isinstance(chunk, memoryview) and not self._stable(chunk):
            chunk = bytes(chunk)
        self._q.put((files, digest, chunk, written))

    def _follow_loop(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                files, digest, chunk, written = item
                if files is None:  # end of a stream: close its files (the writer's too: see start_writeback)
                    for f in digest:
                        try:
                            f.start_writeback(at_least=1)
                            f.fh.close()
                        except OSError as e:
                            self.fail(f.dest, e)
                    continue
                digest["h"].update(chunk)
                for f in files:
                    if f.dest.error is None:
                        try:
                            f.write(chunk)
                        except OSError as e:
                            self.fail(f.dest, e)
                for f in written:
                    try:
                        f.start_writeback()
                    except (OSError, ValueError) as e:
                        self.fail(f.dest, e)
            except Exception as e:  # noqa: BLE001 - never leave the queue unfinished (drain would hang)
                files, digest = (item[0] or [], item[1]) if item else ([], None)
                for f in files:
                    self.fail(f.dest, e)
                if isinstance(digest, dict):
                    digest["ok"] = False  # describe() hashes that file from disk instead
            finally:
                self._q.task_done()

    def drain(self) -> None:
        """Wait until the follower has hashed and written everything queued so far."""
        self._q.join()
        self.raise_if_none_left()

    def close(self) -> None:
        """Finish the follower's work and stop it (the stable buffers may change after this)."""
        self._q.join()
        self._q.put(None)
        self._follower.join()

    # ---------------------------------------------------------------- paths
    def _rel(self, path) -> str:
        return str(Path(path).relative_to(self.primary))

    def _each(self, path, op) -> None:
        """``op(path in dest)`` for every live destination; a failure drops that destination."""
        self.drain()  # the follower has finished writing what is renamed or removed
        rel = self._rel(path)
        for d in self.live():
            try:
                op(d.root / rel)
            except OSError as e:
                self.fail(d, e)
        self.raise_if_none_left()

    # ----------------------------------------------- DCP FileSystem interface
    @contextlib.contextmanager
    def create_stream(self, path, mode) -> Iterator[io.IOBase]:
        rel = self._rel(path)
        if "w" not in mode:
            self.drain()
            with open(self.live()[0].root / rel, mode) as s:
                yield s
            return
        if "a" in mode or "+" in mode:
            raise ValueError(f"checkpoint files are written whole (mode {mode!r})")
        direct, followed = [], []
        any_durable = any(d.durable for d in self.live())
        for d in self.live():
            try:
                f = _File(d, open(d.root / rel, mode))
            except OSError as e:
                self.fail(d, e)
                continue
            (direct if d.durable or not any_durable else followed).append(f)
        stream = None
        try:
            self.raise_if_none_left()
            digest = {"h": hashlib.sha256(), "size": 0, "ok": True}
            with self._lock:
                self.digests[rel] = digest
            stream = _TeeStream(self, direct, followed, digest)
            _in_tee_stream.active = True
            try:
                yield stream
            finally:
                _in_tee_stream.active = False
            stream.finish()
        finally:
            if stream is not None:
                stream.discard()
            for f in direct:  # what is still buffered reaches the kernel (the follower closes the file)
                try:
                    f.fh.flush()
                    f.pos = f.fh.tell()
                except OSError as e:
                    self.fail(f.dest, e)
            self._q.put((None, direct + followed, None, ()))  # the follower closes them after their last chunk
        self.raise_if_none_left()

    def mkdir(self, path) -> None:
        self._each(path, lambda p: p.mkdir(parents=True, exist_ok=True))

    def rename(self, path, new_path) -> None:
        rel, rel_new = self._rel(path), self._rel(new_path)
        self.drain()
        for d in self.live():
            try:
                (d.root / rel).rename(d.root / rel_new)
            except OSError as e:
                self.fail(d, e)
        self.raise_if_none_left()
        with self._lock:
            got = self.digests.pop(rel, None)
            if got is not None:
                self.digests[rel_new] = got

    def exists(self, path) -> bool:
        self.drain()
        return (self.live()[0].root / self._rel(path)).exists()

    def rm_file(self, path) -> None:
        self._each(path, lambda p: p.unlink(missing_ok=True))

    def ls(self, path) -> list[str]:
        self.drain()
        rel = self._rel(path)
        return [str(self.primary / rel / p.name) for p in (self.live()[0].root / rel).iterdir()]

    # --------------------------------------------------------------- result
    def describe(self, dest: Destination) -> dict[str, dict]:
        """Like ``storage.describe_dir`` for one destination: each file's size and sha256, from the hash
        taken while writing; a file written by another path is read back and hashed."""
        self._q.join()
        out = {}
        for p in sorted(dest.root.iterdir()):
            if not p.is_file():
                continue
            size = p.stat().st_size
            got = self.digests.get(p.name)
            if got is not None and got["ok"] and got["size"] == size:
                out[p.name] = {"size": size, "sha256": got["h"].hexdigest()}
            else:
                out[p.name] = {"size": size, "sha256": sha256_file(p)}
        return out
