"""One DCP write into one or more tier directories, hashed while it is written.

DCP serializes the staged state once. :class:`TeeFileSystem` writes each chunk to
the durable destinations (disk: its writeback starts as the bytes arrive, via
``sync_file_range``, so the commit's fsync waits only for the tail) and hands the
same chunk to a follower thread, which feeds it to one BLAKE3 hash
(``storage.HASH``) and keeps it for the other destinations (the memory tier):
those are *deferred*, written by :meth:`TeeFileSystem.fill` once the durable copy
is committed, so the memory copy is not on the way to durable. Tensor bytes are
kept by reference - they point into the staged host buffers, which stay untouched
until the save is done - anything else as a copy (zip headers and pickles: a few
KiB per tensor with DCP's torch.save layout; with the raw layout, rawfmt.py, only
the non-tensor items). So the bytes are serialized once, hashed once, never read back,
and hashing runs next to the disk write instead of after it. Durable files are
also flushed behind the writer (``fdatasync`` of every ``FLUSH_CHUNK`` on a thread
of their own), so the commit's fsync waits for the last chunk only, not for the
whole file to reach stable storage. A destination that fails (ENOSPC, EIO, a
failed flush) is dropped and its error kept; the others go on, and the write
fails only when none is left. The nvme tier's large chunks whose address and file
offset agree modulo ``DIO_ALIGN`` (the raw layout's runs of the page-aligned staging
buffer) go out with ``O_DIRECT`` in whole blocks, without the page cache's copy; their
unaligned head and tail, everything else and any file system refusing ``O_DIRECT``
get buffered writes (``dio._File``, which keeps a few direct writes of stable memory in flight).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import queue
import threading
from bisect import bisect_right
from pathlib import Path
from typing import Iterator

import torch.serialization
from torch.distributed.checkpoint.filesystem import FileSystem

from training.checkpoint import storage, workers
from training.checkpoint.dio import _address, _File, open_direct
from training.checkpoint.storage import HASH, hash_file
from training.faults import enospc_quota, kill_armed, kill_point

FLUSH_CHUNK = 32 << 20      # flush a durable file to stable storage (fdatasync, in the background) every this many
SMALL_WRITE = 64 << 10      # writes below this size are gathered ...
GATHER = 1 << 20            # ... and passed on once this many bytes are gathered
_fdatasync = getattr(os, "fdatasync", os.fsync)  # (where os has no fdatasync: fsync)

# torch.save computes a CRC32 of every record it writes (torch 2.13.0 torch/serialization.py:172-197, read
# when a zip writer is created, :849). Bytes written into a TeeFileSystem stream are covered by the hash
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
    """One directory a :class:`TeeFileSystem` writes into; ``error`` is set once a write to it failed.

    ``deferred``: written by :meth:`TeeFileSystem.fill` after the stream (set by the file system for
    the non-durable destinations when a durable one is written)."""

    def __init__(self, kind: str, root: Path, *, durable: bool, step: int, o_direct: bool = False):
        self.kind, self.root, self.durable = kind, Path(root), durable
        self.quota = enospc_quota(kind, step)  # the OPENPOD_FAULT_ENOSPC hook (training/faults.py)
        self.deferred = False
        self.error: BaseException | None = None
        self.o_direct = o_direct  # write this durable destination's large aligned chunks with O_DIRECT (_File)
        self.direct_bytes = 0  # bytes written with O_DIRECT so far

    def charge(self, n: int) -> None:
        if self.quota is not None:
            self.quota.charge(n)


class _TeeStream(io.RawIOBase):
    """A write stream: the destinations are written here; the follower hashes and keeps deferred chunks.

    torch.save hands over each tensor as a few dozen small writes (zip headers, pickle) and one large
    one (the tensor's bytes): small ones are gathered here and passed on together. The raw layout
    (rawfmt.py) writes each tensor's staged bytes once: passed on by reference whatever their size.
    """

    def __init__(self, fs: "TeeFileSystem", files: list[_File], record: list | None, digest: dict):
        self._fs, self._files, self._record, self._d = fs, files, record, digest
        self._small = bytearray()
        self._pos = 0

    def write(self, b) -> int:
        mv = memoryview(b).cast("B")
        n = len(mv)
        # Small writes are gathered (a copy), except the raw layout's pieces of the staging buffer, which go on as
        # they lie. Those are writable views; torch.save's writes (zip records, a small tensor's bytes) are
        # read-only and gathered without the address lookup (~2 us, ~11,000 of them per save of `small`).
        if n < SMALL_WRITE and (mv.readonly or not self._fs._stable(mv)):
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

    def reserve(self, nbytes: int) -> None:
        """The stream will hold at least ``nbytes``: its durable files allocate them now (``dio._File.reserve``)."""
        for f in self._files:
            if f.dest.error is None:
                try:
                    f.reserve(nbytes)
                except OSError as e:
                    self._fs.fail(f.dest, e)

    def _pass_on(self, chunk) -> None:
        n = len(chunk)
        stable = isinstance(chunk, memoryview) and self._fs._stable(chunk)
        self._fs.follow(self._record, self._d, chunk, self._files, stable=stable)
        for f in self._files:
            if f.dest.error is None:
                try:
                    f.write(chunk, stable)
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

    ``stable``: ``(address, nbytes)`` of host buffers that stay unchanged until the deferred destinations
    are filled (the staged tensors); chunks inside them are kept by reference, others as a copy. When a
    durable destination is among ``dests``, the durable ones are written by DCP's writer thread and the
    others are deferred: kept (chunks, renames, removals) until :meth:`fill`; else all are written by the
    writer. It never fsyncs: the tiers' commit does (``DirTier.commit``), after the writeback this
    started. The fault hooks of ``training.faults`` apply per destination (ENOSPC) and once per write
    (the ``during_write`` kill point). Call :meth:`close` when DCP is done, then :meth:`describe` for
    the written destinations and :meth:`fill` (then :meth:`describe`) for the deferred ones.
    """

    def __init__(self, dests: list[Destination], *, step: int, rank: int, stable=()):
        super().__init__()
        if not dests:
            raise ValueError("TeeFileSystem needs at least one destination")
        self.dests, self.step, self.rank = dests, step, rank
        self.primary = dests[0].root
        self.digests: dict[str, dict] = {}  # path relative to a destination -> {"h", "size", "ok"}
        if any(d.durable for d in dests):
            for d in dests:
                d.deferred = not d.durable
        self._records: dict[str, list] = {}  # path -> its chunks, for the deferred destinations
        self._lock = threading.Lock()
        self._kill = kill_armed("during_write", step, rank)
        spans = sorted((a, a + n) for a, n in stable if n > 0)
        self._starts, self._ends = [a for a, _ in spans], [e for _, e in spans]
        self._q: queue.Queue = queue.Queue()
        self._follower = workers.run(self._follow_loop, "ckpt-follower")
        # Flushes durable files behind the writer: the commit's fsync then waits for the tail, not the whole
        # file. (Measured on this project's benchmark machine, a virtual disk: sync_file_range's writeback left
        # the page cache clean, yet the commit's fsync of 0.33 GiB still took 0.37-0.43 s; see
        # benchmarks/checkpoint_vs_dcp.py.) One flush at a time: a flush covers every byte written before it.
        self._flushq: queue.Queue = queue.Queue()
        self._flush_busy = False
        self._flusher = None
        if any(d.durable for d in dests):
            self._flusher = workers.run(self._flush_loop, "ckpt-flusher")

    # ------------------------------------------------------------ failures
    def fail(self, dest: Destination, e: BaseException) -> None:
        with self._lock:
            if dest.error is None:
                dest.error = e

    def live(self) -> list[Destination]:
        return [d for d in self.dests if d.error is None]

    def _written(self) -> list[Destination]:
        """Live destinations whose files exist now (not deferred)."""
        return [d for d in self.live() if not d.deferred]

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
        addr = _address(mv)
        i = bisect_right(self._starts, addr) - 1
        return i >= 0 and addr + len(mv) <= self._ends[i]

    def follow(self, record: list | None, digest: dict, chunk, written: list[_File] = (), *,
               stable: bool = False) -> None:
        """Queue ``chunk`` for the hash and, if ``record`` is given, the deferred destinations (by reference
        if it lies in a stable buffer or is a gathered bytearray, which the stream never reuses; else as a
        copy); ``written``: the files the writer wrote it to, whose writeback the follower starts. ``stable``:
        whether it lies in a stable buffer (``_stable``, looked up once by the stream)."""
        if isinstance(chunk, memoryview) and not stable:
            chunk = bytes(chunk)
        self._q.put((record, digest, chunk, written))

    def _follow_loop(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                record, digest, chunk, written = item
                if digest is None:  # end of a stream: close its files (see start_writeback)
                    for f in written:
                        for step in (f.close_direct, lambda: f.start_writeback(at_least=1), f.fh.close):
                            try:  # the file is closed even when a direct write in flight failed
                                step()
                            except OSError as e:
                                self.fail(f.dest, e)
                    continue
                digest["h"].update(chunk)
                if record is not None:
                    record.append(chunk)
                for f in written:
                    try:
                        f.start_writeback()
                        self._flush_behind(f)
                    except (OSError, ValueError) as e:
                        self.fail(f.dest, e)
            except Exception as e:  # noqa: BLE001 - never leave the queue unfinished (drain would hang)
                record, digest = (item[0], item[1]) if item else (None, None)
                if record is not None:  # a chunk could not be kept: the deferred destinations cannot be filled
                    for d in self.live():
                        if d.deferred:
                            self.fail(d, e)
                if isinstance(digest, dict):
                    digest["ok"] = False  # describe() hashes that file from disk instead
            finally:
                self._q.task_done()

    def _flush_behind(self, f: _File) -> None:
        """Hand a durable file to the flusher once ``FLUSH_CHUNK`` bytes were written since its last flush
        (unless a flush is running: the next one covers these bytes too). The flusher gets its own
        descriptor, as the follower closes the file at the stream's end."""
        if (self._flusher is None or self._flush_busy or not f.dest.durable or f.dest.error is not None
                or f.pos - f.direct - f.flushed < FLUSH_CHUNK):
            return  # counting buffered bytes only: O_DIRECT ones left no dirty pages (flushing them slowed its writes)
        try:
            fd = os.dup(f.fh.fileno())
        except OSError:  # no descriptor to spare (EMFILE): the commit's fsync flushes it all, as before
            return
        self._flush_busy = True
        f.flushed = f.pos - f.direct
        self._flushq.put((f.dest, fd))

    def _flush_loop(self) -> None:
        while (item := self._flushq.get()) is not None:
            dest, fd = item
            try:
                _fdatasync(fd)
            except OSError as e:  # the data is not on stable storage: this destination failed. A writeback error,
                # once reported, is not reported to a descriptor opened later, as the commit's is (Linux
                # Documentation/filesystems/vfs.rst, "Handling errors during writeback", commit acbf3c3452c3;
                # checked 2026-11-23): it must be kept here.
                self.fail(dest, e)
            finally:
                os.close(fd)
                self._flush_busy = False

    def drain(self) -> None:
        """Wait until the follower has hashed and written everything queued so far."""
        self._q.join()
        self.raise_if_none_left()

    def close(self) -> None:
        """Finish the follower's work and stop it (the stable buffers must stay until :meth:`fill`)."""
        self._q.join()
        self._q.put(None)
        self._follower.result()
        if self._flusher is not None:  # a running flush has finished (its error, if any, is recorded)
            self._flushq.put(None)
            self._flusher.result()

    def fill(self) -> None:
        """Write the deferred destinations' files from the kept chunks (after :meth:`close`; the stable
        buffers are read here, so they may change only after this), then drop the chunks. A destination
        that fails keeps its error (see ``error``)."""
        for d in self.live():
            if not d.deferred:
                continue
            for rel, chunks in self._records.items():
                try:
                    with open(d.root / rel, "wb") as fh:
                        for c in chunks:
                            d.charge(len(c))
                            fh.write(c)
                except OSError as e:
                    self.fail(d, e)
                    break
            d.deferred = False
        self._records = {}

    # ---------------------------------------------------------------- paths
    def _rel(self, path) -> str:
        return str(Path(path).relative_to(self.primary))

    def _each(self, path, op, *, deferred: bool = True, drain: bool = True) -> None:
        """``op(path in dest)`` for every live destination (``deferred``: those too); a failure drops it."""
        if drain:
            self.drain()  # the follower has finished with what is renamed or removed
        rel = self._rel(path)
        for d in self.live() if deferred else self._written():
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
            with open(self._reader().root / rel, mode) as s:
                yield s
            return
        if "a" in mode or "+" in mode:
            raise ValueError(f"checkpoint files are written whole (mode {mode!r})")
        direct = []
        for d in self._written():
            fh = None
            try:
                fh = open(d.root / rel, mode)
                dfd = open_direct(d.root / rel) if d.o_direct and d.durable else None
                direct.append(_File(d, fh, dfd))
            except OSError as e:
                if fh is not None:
                    fh.close()
                self.fail(d, e)
        record = None
        if any(d.deferred for d in self.live()):
            record = []
            with self._lock:
                self._records[rel] = record
        stream = None
        try:
            self.raise_if_none_left()
            digest = {"h": storage.HASHERS[HASH](), "size": 0, "ok": True}
            with self._lock:
                self.digests[rel] = digest
            stream = _TeeStream(self, direct, record, digest)
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
            self._q.put((None, None, None, direct))  # the follower closes them after their last chunk
        self.raise_if_none_left()

    def mkdir(self, path) -> None:
        # no drain: a directory made beside files being written (rawfmt.BufferHead writes while DCP plans)
        self._each(path, lambda p: p.mkdir(parents=True, exist_ok=True), drain=False)

    def rename(self, path, new_path) -> None:
        rel, rel_new = self._rel(path), self._rel(new_path)
        self.drain()
        for d in self._written():
            try:
                (d.root / rel).rename(d.root / rel_new)
            except OSError as e:
                self.fail(d, e)
        self.raise_if_none_left()
        with self._lock:
            for table in (self.digests, self._records):
                got = table.pop(rel, None)
                if got is not None:
                    table[rel_new] = got

    def _reader(self) -> Destination:
        """A live destination whose files exist now (reads, listings)."""
        written = self._written()
        if not written:
            raise OSError(errno.ENOENT, "no written checkpoint destination left to read from")
        return written[0]

    def exists(self, path) -> bool:
        rel = self._rel(path)
        with self._lock:
            if rel in self._records:
                return True
        written = self._written()
        return bool(written) and (written[0].root / rel).exists()

    def rm_file(self, path) -> None:
        self._each(path, lambda p: p.unlink(missing_ok=True), deferred=False)
        with self._lock:
            self._records.pop(self._rel(path), None)
            self.digests.pop(self._rel(path), None)

    def ls(self, path) -> list[str]:
        self.drain()
        rel = self._rel(path)
        return [str(self.primary / rel / p.name) for p in (self._reader().root / rel).iterdir()]

    # --------------------------------------------------------------- result
    def describe(self, dest: Destination) -> dict[str, dict]:
        """Like ``storage.describe_dir`` for one written destination: each file's size and hash, from the
        hash taken while writing; a file written by another path is read back and hashed."""
        if dest.deferred:
            raise RuntimeError(f"{dest.kind} destination {dest.root} is not filled yet (call fill() first)")
        self._q.join()
        out = {}
        for p in sorted(dest.root.iterdir()):
            if not p.is_file():
                continue
            size = p.stat().st_size
            got = self.digests.get(p.name)
            if got is not None and got["ok"] and got["size"] == size:
                out[p.name] = {"size": size, HASH: got["h"].hexdigest()}
            else:
                out[p.name] = {"size": size, HASH: hash_file(p)}
        return out
