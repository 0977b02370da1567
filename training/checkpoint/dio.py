"""A durable destination's file, with the nvme tier's large aligned chunks written ``O_DIRECT``, several at a time.

The raw layout's runs of the page-aligned staging buffer (rawfmt.py) agree with their file offset modulo
``DIO_ALIGN``; their whole blocks go from memory to the disk with ``O_DIRECT``, without the page cache's copy, the
unaligned head and tail buffered around them. Up to ``DEPTH`` such writes per file are in flight on the save's
worker threads (``workers``): a save runs beside the training loop, and with both vCPUs of this project's benchmark VM
busy a single writer came back from each 8 MiB write to find no CPU free, leaving the disk idle in between (338 MiB:
216 ms beside the loop, the copy and the hash, 174 ms quiet; two in flight into a preallocated file, 179 ms -
2026-11-29, ``docs/training.md``). Writes in flight only ever cover stable memory (the staging buffer, unchanged
until the save is done); anything else is written before ``write`` returns. A file can be preallocated
(:meth:`_File.reserve`): ext4 runs direct writes below the file's size into allocated blocks under a shared inode
lock, while writes that extend the file or allocate take it exclusively, one at a time.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import threading
from collections import deque
from concurrent.futures import Future

import numpy as np

from training.checkpoint import workers

DIO_ALIGN = 4096  # O_DIRECT: file offset, memory address and length of a direct write are multiples of this
DEPTH = 4  # O_DIRECT writes in flight per file (4 against 2: 1.30x against 1.41x of the disk limit, `medium`, A/B of
#           12 saves each, 2026-11-29; deeper again helped least when the disk was slow, most when it was fast)
WRITEBACK_CHUNK = 16 << 20  # start writeback of a durable file every this many bytes
_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h


def _libc(name: str, argtypes: list):
    try:
        f = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):  # not Linux/glibc: the commit's fsync does all the work
        return None
    f.argtypes = argtypes
    return f


_sync_file_range = _libc("sync_file_range", [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint])
# fallocate(2), not posix_fallocate: glibc emulates the latter by writing a byte per block where the file system
# has no fallocate, which would write the file twice
_fallocate = _libc("fallocate", [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong])


def open_direct(path) -> int | None:
    """A second, ``O_DIRECT`` descriptor on a file just created, or None where the file system refuses it
    (EINVAL: tmpfs before Linux 6.6, some FUSE and network file systems) or the platform has no O_DIRECT."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return None
    try:
        return os.open(path, os.O_WRONLY | flag)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return None
        raise


def _address(mv: memoryview) -> int:
    return np.frombuffer(mv, dtype=np.uint8).ctypes.data


class _File:
    """One destination's file (``dest``: a ``hashing.Destination``). ``dfd``: an ``O_DIRECT`` descriptor on it
    (durable local disk only, ``CheckpointConfig.o_direct``): the block-aligned middle of a large chunk of stable
    memory whose address and file offset agree modulo ``DIO_ALIGN`` goes to the disk directly, up to ``DEPTH`` at
    a time; the rest - head, tail, small, misaligned or unstable chunks - is written buffered, as before.
    :meth:`close_direct` waits for the writes in flight and raises the first that failed."""

    def __init__(self, dest, fh, dfd: int | None = None):
        self.dest, self.fh, self.dfd = dest, fh, dfd
        self.pos = self.synced = self.flushed = 0
        self.direct = 0  # bytes of this file written with O_DIRECT (no page cache to flush behind)
        self._inflight: deque[Future] = deque()
        self._lock = threading.Lock()
        self._refused = False  # the file system refused a direct write: the rest of the file goes buffered

    def reserve(self, nbytes: int) -> None:
        """Allocate the file's first ``nbytes`` now (fallocate(2): its size becomes ``nbytes``), so the direct
        writes into it run side by side; nothing where there is no direct descriptor or no fallocate."""
        if self.dfd is not None and _fallocate is not None and nbytes > 0 and self.pos == 0:
            _fallocate(self.fh.fileno(), 0, 0, nbytes)  # a failure leaves the writes extending the file, as before

    def write(self, mv, stable: bool = False) -> None:
        """``mv`` at the file's end; ``stable``: its memory stays unchanged until the file is closed (it may be
        written after this returns)."""
        self.dest.charge(len(mv))
        n = len(mv)
        if self.dfd is not None and not self._refused and n >= 2 * DIO_ALIGN and isinstance(mv, memoryview):
            head = -_address(mv) % DIO_ALIGN
            body = (n - head) // DIO_ALIGN * DIO_ALIGN
            if (self.pos + head) % DIO_ALIGN == 0 and body:
                self._direct(mv, head, body, stable)
                self.pos += n
                return
        self.fh.write(mv)
        self.pos += n

    def _direct(self, mv: memoryview, head: int, body: int, stable: bool) -> None:
        """``mv[:head]`` buffered, ``mv[head:head+body]`` with O_DIRECT (in flight if ``stable``), the rest
        buffered."""
        self.fh.write(mv[:head])
        self.fh.flush()  # the buffered bytes reach the kernel before the direct write beyond them
        at = self.pos + head
        while len(self._inflight) >= DEPTH or (self._inflight and not stable):
            self._inflight.popleft().result()  # raises what failed it
        if stable:
            self._inflight.append(workers.run(functools.partial(self._pwrite, mv[head:head + body], at), "ckpt-dio"))
        else:
            self._pwrite(mv[head:head + body], at)
        self.fh.seek(at + body)
        self.fh.write(mv[head + body:])

    def _pwrite(self, mv: memoryview, at: int) -> None:
        """``mv`` at offset ``at``: with O_DIRECT in whole blocks; where the file system refuses it (EINVAL) or a
        write ends off the block grid, the rest through the buffered descriptor (which ``pwrite`` leaves where it
        is)."""
        done = 0
        try:
            while done < len(mv):
                got = os.pwrite(self.dfd, mv[done:], at + done)
                done += max(got, 0)
                if got <= 0 or got % DIO_ALIGN:  # a short write off the block grid: the rest goes buffered
                    break
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP) or done:
                raise
            self._refused = True
        with self._lock:
            self.dest.direct_bytes += done
            self.direct += done
        while done < len(mv):
            done += os.pwrite(self.fh.fileno(), mv[done:], at + done)

    def close_direct(self) -> None:
        """Wait for the direct writes in flight, then close the direct descriptor; raises (OSError) the first
        write that failed."""
        failed = None
        while self._inflight:
            try:
                self._inflight.popleft().result()
            except Exception as e:  # noqa: BLE001 - the rest must still be waited for before the descriptor closes
                if failed is None:
                    failed = e if isinstance(e, OSError) else OSError(errno.EIO, f"direct write failed: {e!r}")
        if self.dfd is not None:
            fd, self.dfd = self.dfd, None
            os.close(fd)
        if failed is not None:
            raise failed

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
