"""The raw tensor layout: each tensor item's bytes written as they lie in memory, at a known offset, one write each.

DCP's ``FileSystemWriter`` writes every tensor item with its own ``torch.save`` - a zip archive per tensor
(torch 2.13.0 ``torch/distributed/checkpoint/filesystem.py:320-372``): 1728 archives, 8568 zip records and
64,668 stream writes per save of the benchmark's ``small`` state, ~67% of the writer's time (docs/training.md,
issue 38). :class:`RawFileSystemWriter` is that writer with one change: a tensor item is its contiguous CPU
bytes, written straight from the staged buffer (no copy, no pickle), and its ``_StorageInfo`` carries a
descriptor ``openpod.raw/1:<dtype>:<shape>`` in ``transform_descriptors``. The staging buffer holding them is
written whole at the head of the data file from the moment the save starts (:class:`BufferHead`), piece by piece
as the staging copy fills it, while DCP is still planning. DCP stays the engine - planner,
``Metadata``, the ``StorageWriter`` interface; non-tensor (``BYTE_IO``) items are written by DCP's own
``_write_item`` as before. Stock ``dcp.load(FileSystemReader)`` refuses such an item ("Unknown extension
name='openpod.raw'", ``_extension.py:212-218``) instead of misreading it: openpod's
``SafeFileSystemReader`` reads it (:func:`read_raw`), and ``python -m training.checkpoint export`` is the
way out to other tools. ``CheckpointConfig.layout = "torch-save"`` keeps DCP's layout.

Reading is ``readinto`` the target tensor (or a buffer of exactly the item's bytes when the request is a part
of it or another dtype): no ``torch.load``. A checkpoint is untrusted input, so before a byte is read the
descriptor must parse, name the dtype and the chunk shape the metadata gives that item, its length must be
exactly those bytes and the range must lie inside the file; anything else is a one-line
:class:`~training.checkpoint.storage.CorruptCheckpoint`, and no allocation exceeds the item's bytes.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import sys
import threading
from io import UnsupportedOperation

import torch
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.filesystem import (
    DEFAULT_SUFFIX, SerializationFormat, _split_by_size_and_type, _StorageInfo, _StoragePrefix, _write_item)
from torch.distributed.checkpoint.metadata import Metadata, TensorStorageMetadata
from torch.distributed.checkpoint.planner import WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from training.checkpoint import workers
from training.checkpoint.dio import DIO_ALIGN
from training.checkpoint.storage import CorruptCheckpoint
from training.config import LAYOUTS

TAG, VERSION = "openpod.raw", 1


def check_layout(layout: str) -> str:
    """``layout`` if it is one of ``LAYOUTS``, else a ValueError naming the field (``checkpoint.layout``)."""
    if layout not in LAYOUTS:
        raise ValueError(f"checkpoint.layout: {layout!r} is not one of {', '.join(LAYOUTS)}")
    return layout


def descriptor(dtype: torch.dtype, shape) -> str:
    return f"{TAG}/{VERSION}:{str(dtype).removeprefix('torch.')}:{','.join(str(int(s)) for s in shape)}"


def is_raw(info) -> bool:
    descs = getattr(info, "transform_descriptors", None)
    return bool(descs) and isinstance(descs[0], str) and descs[0].startswith(f"{TAG}/")


def parse(descs, where: str) -> tuple[torch.dtype, tuple[int, ...]]:
    """(dtype, shape) of a raw item's ``transform_descriptors``; CorruptCheckpoint if they are not ours."""
    if not isinstance(descs, (list, tuple)) or len(descs) != 1 or not isinstance(descs[0], str):
        raise CorruptCheckpoint(f"{where}: raw item descriptors {descs!r}: expected one '{TAG}/{VERSION}:...'")
    parts = descs[0].split(":")
    dtype = getattr(torch, parts[1], None) if len(parts) == 3 else None
    if parts[0] != f"{TAG}/{VERSION}" or not isinstance(dtype, torch.dtype):
        raise CorruptCheckpoint(f"{where}: raw item descriptor {descs[0][:80]!r}: expected "
                                f"'{TAG}/{VERSION}:<torch dtype>:<shape>'")
    try:
        shape = tuple(int(s) for s in parts[2].split(",")) if parts[2] else ()
    except ValueError:
        shape = (-1,)
    if any(s < 0 for s in shape) or len(shape) > 64:
        raise CorruptCheckpoint(f"{where}: raw item descriptor {descs[0][:80]!r}: bad shape")
    return dtype, shape


def _bytes_of(t: torch.Tensor) -> memoryview:
    """The bytes of contiguous CPU tensor ``t`` where they lie (no copy)."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy())


PIECE = 8 << 20  # bytes per write of the staging buffer (the disk-limit measurement's chunk): writeback starts behind it
DATA_FILE = f"__0_0{DEFAULT_SUFFIX}"  # DCP's name of a one-rank plan's first data file (filesystem.py:684-699)


def _result(item, t: torch.Tensor, storage_key: str, offset: int) -> WriteResult:
    n = t.numel() * t.element_size()
    return WriteResult(index=item.index, size_in_bytes=n,
                       storage_data=_StorageInfo(storage_key, offset, n,
                                                 transform_descriptors=[descriptor(t.dtype, t.shape)]))


def _checked(item, t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.device.type != "cpu":
        raise ValueError(f"{item.index.fqn}: the raw layout writes CPU tensors (got {t.device})")
    chunk = item.tensor_data
    if chunk is not None and tuple(t.shape) != tuple(chunk.chunk.sizes):
        raise ValueError(f"{item.index.fqn}: tensor of shape {tuple(t.shape)} for a chunk of {tuple(chunk.chunk.sizes)}")
    return t


def _write(stream, mv: memoryview, address: int = 0, landed=None) -> None:
    """``mv`` (lying at ``address``) in ``PIECE``-sized writes cut at multiples of ``DIO_ALIGN`` in memory: each
    piece but the first and last is whole blocks, which an O_DIRECT destination writes as they lie (dio.py).
    ``landed(end)``: returns once the bytes below address ``end`` are staged (each piece waits for its own)."""
    cut = min(-address % DIO_ALIGN, len(mv))
    if cut:
        if landed is not None:
            landed(address + cut)
        stream.write(mv[:cut])
    for i in range(cut, len(mv), PIECE):
        if landed is not None:
            landed(address + min(i + PIECE, len(mv)))
        stream.write(mv[i:i + PIECE])


class _Cancelled(Exception):
    pass


class BufferHead:
    """The staging buffer written at the head of a save's data file (``DATA_FILE``) from the moment the save
    starts, on a thread of its own: each ``PIECE`` as soon as the staging copy has filled it (``landed``, as in
    :func:`_write`), while DCP is still planning. The buffer is written whole from its first byte (it is
    page-aligned, so file offset and address agree modulo the disk's block and the pieces go out with O_DIRECT;
    the constructor returns once the file is open);
    a staged tensor's item is its bytes at its offset in the buffer, and the alignment padding between tensors
    (zeros, ``staging.carve``) is written with them. :class:`RawFileSystemWriter` hands over what follows the
    buffer (:meth:`then`) and returns at once, so DCP writes the ``.metadata`` while the data is still being
    written; the save waits for the file (:meth:`wait`) before it is closed and committed, or :meth:`cancel`
    ends it early when the save fails first."""

    def __init__(self, fs, directory, buf: torch.Tensor, landed=None):
        self.name, self.buf = DATA_FILE, buf
        self._base, self._end = buf.data_ptr(), buf.data_ptr() + buf.numel()
        self._path, self._fs, self._landed = fs.concat_path(directory, DATA_FILE), fs, landed
        self._rest: queue.Queue = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self._opened = threading.Event()
        self._done = workers.run(self._run, "ckpt-head-writer")
        # DCP's planning comes next on the caller's thread: the head opens its file first (under the GIL beside the
        # training loop, both at once put the first write 7-10 ms after the head was made, `medium`, 2026-11-29)
        self._opened.wait()

    @property
    def end(self) -> int:
        """The data file's offset right after the buffer."""
        return self._end - self._base

    def offset(self, t: torch.Tensor) -> int | None:
        """``t``'s offset in the data file if it is a contiguous tensor lying in the buffer, else None."""
        a, n = t.data_ptr(), t.numel() * t.element_size()
        if n and t.is_contiguous() and self._base <= a and a + n <= self._end:
            return a - self._base
        return None

    def _run(self) -> None:
        try:
            with self._fs.create_stream(self._path, "wb") as stream:
                stream.reserve(self.buf.numel())  # allocated up front: its direct writes run side by side (dio.py)
                self._opened.set()
                _write(stream, memoryview(self.buf.numpy()), self._base, self._landed)
                rest = self._rest.get()
                if rest is None:
                    raise _Cancelled()
                rest(stream)
        except BaseException as e:  # noqa: BLE001 - raised by wait() in the writer's thread
            self.error = e
        finally:
            self._opened.set()

    def then(self, rest) -> None:
        """After the buffer, ``rest(stream)`` writes the file's end (on the head's thread); the file is closed after."""
        self._rest.put(rest)

    def wait(self) -> None:
        """Return once the file is written and closed; raise what failed it."""
        self._done.result()
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        """End the file after the buffer if no end was handed over (a save that failed first); wait for it."""
        with contextlib.suppress(queue.Full):
            self._rest.put_nowait(None)
        self._done.result()


class RawFileSystemWriter(FileSystemWriter):
    """DCP's ``FileSystemWriter`` writing tensor items raw (see the module docstring); ``BYTE_IO`` items and
    ``finish`` (the ``.metadata``) as DCP's (filesystem.py:680-790).

    ``head``: a :class:`BufferHead` already writing the staging buffer: every tensor lying in it is recorded at
    its offset there, and the other items (``BYTE_IO``, then tensors written alone) follow the buffer in the same
    file - the state reaches the disk in a few large writes, the first before DCP has planned. ``write_data``
    returns before that file is written (its results are known): the caller waits for ``head``. Without it each
    tensor is written alone (a non-contiguous one as its row-major copy), into DCP's files and threads.
    ``landed``: a wait for staged bytes (``staging.Landing.wait``): a tensor written alone waits for the whole
    staging copy."""

    def __init__(self, *args, head: BufferHead | None = None, landed=None, **kwargs):
        super().__init__(*args, **kwargs)
        if head is not None and self.sync_files:
            raise ValueError("RawFileSystemWriter: a head's file is closed after write_data returns and fsynced by "
                             "the caller's commit: give sync_files=False with head")
        self.head, self.landed = head, landed

    def write_data(self, plan, planner) -> Future:
        fut: Future = Future()
        fut.set_result(self._write_head(plan.items, planner) if self.head is not None
                       else self._write_alone(plan, planner))
        return fut

    def _write_alone(self, plan, planner) -> list[WriteResult]:
        """Without a head: DCP's files and threads, each tensor item written alone (:meth:`_write_files`)."""
        prefix: _StoragePrefix = plan.storage_data
        files: queue.Queue = queue.Queue()
        results: queue.Queue = queue.Queue()
        errors: list[BaseException] = []
        buckets = (_split_by_size_and_type(self.thread_count, plan.items) if self.single_file_per_rank
                   else [[item] for item in plan.items])
        for i, bucket in enumerate(buckets):
            name = f"{prefix.prefix}{i}{DEFAULT_SUFFIX}"
            files.put((self.fs.concat_path(self.path, name), name, bucket))
        threads = [threading.Thread(target=self._write_files, args=(files, results, planner, errors),
                                    name="ckpt-raw-writer", daemon=True) for _ in range(1, self.thread_count)]
        for t in threads:
            t.start()
        self._write_files(files, results, planner, errors)
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        out = []
        while not results.empty():
            out += results.get_nowait()
        return out

    def _write_head(self, items: list, planner) -> list[WriteResult]:
        """Every item's result in the head's file, handing its end to the head without waiting for it: the tensors
        in the buffer at their offsets there, then the ``BYTE_IO`` items (serialized now), then the tensors
        written alone (each once the whole staging copy has landed)."""
        head, out, byte_io, alone = self.head, [], [], []
        end = head.end
        for item in items:
            if item.type == WriteItemType.BYTE_IO:
                data = planner.resolve_data(item).getbuffer()
                byte_io.append((end, data))
                out.append(WriteResult(index=item.index, size_in_bytes=len(data),  # as _write_item (filesystem.py:
                                       storage_data=_StorageInfo(head.name, end, len(data))))  # 328-369)
                end += len(data)
        for item in items:
            if item.type == WriteItemType.BYTE_IO:
                continue
            t = _checked(item, planner.resolve_data(item))
            at = head.offset(t)
            if at is None:
                alone.append((end, t))
                at, end = end, end + t.numel() * t.element_size()
            out.append(_result(item, t, head.name, at))

        def rest(stream) -> None:
            if alone and self.landed is not None:
                self.landed(sys.maxsize)  # staged wherever it lies: once the whole copy has landed
            # raw bytes are row-major: a non-contiguous tensor is copied, once its bytes have landed
            for at, data in byte_io + [(at, _bytes_of(t.contiguous())) for at, t in alone if t.numel()]:
                if stream.tell() != at:
                    raise RuntimeError(f"{head.name}: at offset {stream.tell()}, {at} planned")
                _write(stream, data)

        head.then(rest)
        return out

    def _write_files(self, files: queue.Queue, results: queue.Queue, planner, errors: list) -> None:
        """Without a head: per file, its ``BYTE_IO`` items as DCP writes them, then each tensor item alone."""
        try:
            while not errors:
                try:
                    path, name, items = files.get_nowait()
                except queue.Empty:
                    return
                out = []
                with self.fs.create_stream(path, "wb") as stream:
                    for item in items:  # as DCP: non-tensor items first
                        if item.type == WriteItemType.BYTE_IO:
                            out.append(_write_item(self.transforms, stream, planner.resolve_data(item), item, name,
                                                   SerializationFormat.TORCH_SAVE))
                    tensors = [i for i in items if i.type != WriteItemType.BYTE_IO]
                    if tensors and self.landed is not None:
                        self.landed(sys.maxsize)  # staged wherever it lies: once the whole copy has landed
                    for item in tensors:
                        t = _checked(item, planner.resolve_data(item))
                        offset = stream.tell()
                        if t.numel():  # raw bytes are row-major: a non-contiguous tensor is copied
                            _write(stream, _bytes_of(t.contiguous()))
                        out.append(_result(item, t, name, offset))
                    if self.sync_files:
                        try:
                            os.fsync(stream.fileno())
                        except (AttributeError, UnsupportedOperation):
                            os.sync()
                results.put(out)
        except BaseException as e:  # noqa: BLE001 - raised in write_data's thread
            errors.append(e)


def writer_for(layout: str):
    """The DCP storage writer class of ``layout``."""
    return RawFileSystemWriter if check_layout(layout) == "raw" else FileSystemWriter


# ----------------------------------------------------------------------------------------------------- reading
def _chunk_shape(md: Metadata | None, index, where: str) -> tuple[torch.dtype, tuple[int, ...]] | None:
    if md is None:
        return None
    tmd = md.state_dict_metadata.get(index.fqn)
    if not isinstance(tmd, TensorStorageMetadata):
        raise CorruptCheckpoint(f"{where}: raw item {index.fqn!r} is not a tensor in the metadata")
    want = tuple(index.offset or ())
    for c in tmd.chunks:
        if tuple(c.offsets) == want:
            return tmd.properties.dtype, tuple(c.sizes)
    raise CorruptCheckpoint(f"{where}: raw item {index.fqn!r} at {want}: no such chunk in the metadata")


def _read_exact(f, offset: int, buf: memoryview, where: str) -> None:
    f.seek(offset)
    got = 0
    while got < len(buf):
        n = f.readinto(buf[got:])
        if not n:
            raise CorruptCheckpoint(f"{where}: file ends {got} bytes into a {len(buf)}-byte item")
        got += n


def read_raw(path_of, storage_data: dict, md: Metadata | None, reqs: list, planner, where: str) -> None:
    """Load the raw items ``reqs`` (``ReadItem``s) into the planner's tensors. ``path_of(relative_path)``: the
    file's path; ``md``: the metadata the items are checked against."""
    per_file: dict[str, list] = {}
    for req in reqs:
        per_file.setdefault(storage_data[req.storage_index].relative_path, []).append(req)
    for rel, items in per_file.items():
        items.sort(key=lambda r: storage_data[r.storage_index].offset)
        with open(path_of(rel), "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            for req in items:
                info = storage_data[req.storage_index]
                at = f"{where}: {rel}: item {req.storage_index.fqn!r}"
                dtype, shape = parse(info.transform_descriptors, at)
                meta = _chunk_shape(md, req.storage_index, at)
                if meta not in (None, (dtype, shape)):
                    raise CorruptCheckpoint(f"{at}: {dtype} {list(shape)} in the file, {meta[0]} {list(meta[1])} "
                                            "in the metadata")
                n = math.prod(shape) * dtype.itemsize
                offset, length = info.offset, info.length
                if not (isinstance(offset, int) and isinstance(length, int)) or length != n:
                    raise CorruptCheckpoint(f"{at}: length {length!r}, {n} bytes expected for {dtype} {list(shape)}")
                if offset < 0 or offset + n > size:
                    raise CorruptCheckpoint(f"{at}: bytes {offset}..{offset + n} lie outside the {size}-byte file")
                target = planner.resolve_tensor(req).detach()
                whole = all(o == 0 for o in req.storage_offsets) and tuple(req.lengths) == shape
                direct = (whole and target.dtype == dtype and tuple(target.shape) == shape and target.is_contiguous()
                          and target.device.type == "cpu")
                dst = target if direct else torch.empty(shape, dtype=dtype)
                if n:
                    _read_exact(f, offset, _bytes_of(dst), at)
                if not direct:
                    src = narrow_tensor_by_index(dst, req.storage_offsets, req.lengths)
                    if target.size() != src.size():
                        raise CorruptCheckpoint(f"{at}: {list(src.size())} read for a {list(target.size())} target")
                    target.copy_(src)
                planner.commit_tensor(req, target)


def check_descriptors(info, where: str) -> None:
    """Refuse a storage entry whose descriptors are neither absent nor one raw descriptor that parses (metadata
    load: before anything is read)."""
    descs = getattr(info, "transform_descriptors", None)
    if descs is None or (isinstance(descs, (list, tuple)) and len(descs) == 0):
        return
    parse(descs, where)
    if not isinstance(info.offset, int) or not isinstance(info.length, int) or info.offset < 0 or info.length < 0:
        raise CorruptCheckpoint(f"{where}: raw item at offset {info.offset!r}, length {info.length!r}")


__all__ = ["LAYOUTS", "BufferHead", "RawFileSystemWriter", "check_layout", "descriptor", "is_raw", "parse", "read_raw",
           "writer_for", "check_descriptors"]
