"""The disk-limit measurement of ``benchmarks.checkpoint_vs_dcp`` (a helper, not a benchmark: ``python -m
benchmarks`` skips ``_`` modules): the least time any program takes to make a state's bytes durable on a disk,
measured beside the saves, quiet and beside the training loop."""

from __future__ import annotations

import mmap
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from training.checkpoint.dio import DEPTH, DIO_ALIGN
from training.checkpoint.rawfmt import PIECE as DISK_CHUNK  # bytes per write, as openpod's raw layout writes


def _write_through(fd: int, buf: memoryview, nbytes: int, direct_fd: int | None, depth: int = 1) -> None:
    """``buf[:nbytes]`` front to back in ``DISK_CHUNK`` writes; the whole blocks through ``direct_fd`` when given
    (O_DIRECT), ``depth`` of them in flight (preallocated first when more than one), the tail buffered through
    ``fd``."""
    body = nbytes // DIO_ALIGN * DIO_ALIGN if direct_fd is not None else 0
    if depth > 1 and body:
        os.posix_fallocate(fd, 0, body)
        with ThreadPoolExecutor(depth) as pool:
            inflight: list = []
            for i in range(0, body, DISK_CHUNK):
                if len(inflight) >= depth:
                    inflight.pop(0).result()
                inflight.append(pool.submit(os.pwrite, direct_fd, buf[i:min(i + DISK_CHUNK, body)], i))
            for f in inflight:
                f.result()
    else:
        for i in range(0, body, DISK_CHUNK):
            os.pwrite(direct_fd, buf[i:min(i + DISK_CHUNK, body)], i)
    for i in range(body, nbytes, DISK_CHUNK):
        os.pwrite(fd, buf[i:min(i + DISK_CHUNK, nbytes)], i)


# The ways of the disk-limit measurement: (name, O_DIRECT, writes in flight). openpod's nvme tier writes the way
# of the last one (training/checkpoint/dio.py: DEPTH writes in flight into a preallocated file).
WAYS = (("buffered", False, 1), ("direct", True, 1), (f"direct x{DEPTH}", True, DEPTH))


def _write_ways(root: Path, buf: memoryview, nbytes: int, first: int) -> dict:
    """Seconds to write ``buf[:nbytes]`` to a new file under ``root`` and fsync it, each of ``WAYS`` (the direct
    ones absent where the file system refuses O_DIRECT), ``first`` rotating which goes first."""
    got = {}
    k = first % len(WAYS)
    for way, direct, depth in WAYS[k:] + WAYS[:k]:
        p = root / f"disk_limit_{first}_{way.replace(' ', '_')}"
        t0 = time.perf_counter()
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        dfd = None
        try:
            if direct:
                try:
                    dfd = os.open(p, os.O_WRONLY | os.O_DIRECT)
                except (OSError, AttributeError):  # EINVAL: a file system refusing O_DIRECT; not Linux
                    continue
            _write_through(fd, buf, nbytes, dfd, depth)
            os.fsync(fd)
            got[way] = time.perf_counter() - t0
        finally:
            if dfd is not None:
                os.close(dfd)
            os.close(fd)
            p.unlink()
    return got


class _Looping:
    """``step()`` called over and over on a thread of its own inside the ``with`` block (entered once the first
    call has returned, so the loop is running when the block starts)."""

    def __init__(self, step):
        self.step, self._stop, self._ran = step, threading.Event(), threading.Event()
        self._t = threading.Thread(target=self._run, name="disk-limit-loop", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._ran.set()

    def __enter__(self) -> "_Looping":
        self._t.start()
        self._ran.wait()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def disk_limit(root: Path, nbytes: int, reps: int = 1, beside=None) -> list[dict]:
    """The disk's own limit for making ``nbytes`` durable under ``root``, measured beside the saves (same disk,
    same load), ``reps`` times: per rep, seconds to write a new file sequentially from one page-aligned, resident
    host buffer in ``DISK_CHUNK`` writes and fsync it, each of ``WAYS``: buffered (``"buffered"``), with O_DIRECT
    for its whole blocks one at a time (``"direct"``) and ``DEPTH`` at a time into a preallocated file (the direct
    ones absent where the file system refuses O_DIRECT), and ``"limit"``, the fastest: the least a program can
    take to make the state durable there (openpod's nvme tier writes the last way).
    ``beside``: one training step; given, ``"loaded"`` is the fastest of the same writes made while that step
    runs over and over on another thread - the disk as a save made during training can have it (on this
    project's 2-vCPU VM an O_DIRECT write took 1.16x as long beside the training loop, 2026-11-29)."""
    root.mkdir(parents=True, exist_ok=True)
    m = mmap.mmap(-1, max(nbytes, 1))  # page-aligned (O_DIRECT needs an aligned address)
    buf = memoryview(m)
    for i in range(0, nbytes, 4096):  # touched once, so the write copies resident pages
        buf[i] = 1
    out = []
    try:
        for r in range(reps):
            got = _write_ways(root, buf, nbytes, r)
            rec = dict(got, limit=min(got.values()))
            if beside is not None:
                with _Looping(beside):
                    rec["loaded"] = min(_write_ways(root, buf, nbytes, r + 1).values())
            out.append(rec)
    finally:
        buf.release()
        m.close()
    return out
