"""Staging: copy training state into reused host buffers, the only part a save may block on."""

from __future__ import annotations

import copy
import hashlib
import math
import threading
import weakref
from typing import Any, Callable

import torch
from torch.distributed.tensor import DTensor


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t``: the local shard of a DTensor (FSDP2, TP, HSDP), else ``t`` itself."""
    return t.to_local() if isinstance(t, DTensor) else t


LANDED_EVERY = 32 << 20  # CUDA: bytes of device-to-host copies between two progress marks (events)
ADVANCE_EVERY = 4 << 20  # CPU: tensors copied in one call, then the landing advanced, per this many bytes
ALIGN = 64  # bytes: each staged tensor starts on its own cache line in the flat buffer
PAGE = 4096  # the flat buffer starts on a page (dio.DIO_ALIGN)


def carve(sizes: list[int], align: int = ALIGN) -> tuple[list[int], int]:
    """Offsets of consecutive blocks of ``sizes`` bytes, each starting at a multiple of ``align``; and the total."""
    offsets, end = [], 0
    for n in sizes:
        start = -(-end // align) * align
        offsets.append(start)
        end = start + n
    return offsets, end


def pin_in_place(t: torch.Tensor) -> Callable[[], None]:
    """Page-lock ``t``'s memory where it lies (cudaHostRegister, as torch's own DCP staging does for shared
    memory: torch 2.13.0 cuda/_pin_memory_utils.py:4-19, used by distributed/_state_dict_utils.py:428-433);
    returns the undo. Unlike ``pin_memory=True`` it bypasses the caching host allocator, which rounds every
    block up to a power of two (1200 MiB asked, 1664 MiB pinned on an H100, issue 22)."""
    from torch.cuda import _pin_memory_utils

    ptr = t.data_ptr()
    _pin_memory_utils.pin_memory(ptr, t.numel() * t.element_size())
    return lambda: _pin_memory_utils.unpin_memory(ptr)


def _view(flat, offset: int, nbytes: int, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    """``nbytes`` of ``flat`` (the buffer's numpy array, shared by every view) from ``offset`` as a tensor whose
    storage is exactly those bytes (it keeps ``flat`` alive). A slice would share ``flat``'s whole storage, and
    DCP's writer clones every tensor whose storage is larger than the tensor before ``torch.save`` (torch 2.13.0
    distributed/checkpoint/filesystem.py:133-135, 189-194): one more copy of the state per save, whose bytes no
    longer lie in the staged buffer. Shaped in place (``set_``), not by ``view``, and from one numpy array: a
    view is a second tensor with autograd view metadata, and ``numpy()`` per view a numpy array each - 1.1 KiB of
    heap per staged tensor instead of 0.4 KiB, kept as long as the buffer (issue 38 item 7)."""
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    count = nbytes // torch.empty((), dtype=dtype).element_size()
    t = torch.frombuffer(flat, dtype=dtype, count=count, offset=offset)
    return t.set_(t.untyped_storage(), 0, shape)


class Landing:
    """How far one save's deferred staging copy has filled the staging buffer: every byte below ``upto`` bytes
    into it holds this save's state. The copy advances it as it goes (in buffer order: every ``ADVANCE_EVERY`` bytes
    on CPU, at a CUDA event every ``LANDED_EVERY`` on a GPU); the writer waits
    for the bytes it is about to write (:meth:`wait`), so the disk starts on the first tensors while the later
    ones are still being copied. A failed copy fails every wait."""

    def __init__(self, base: int, total: int, upto: int):
        self.base, self.total = base, total
        self._cond = threading.Condition()
        self._upto = upto
        self._wants: list[int] = []  # what each waiting writer thread waits for
        self.error: BaseException | None = None

    @classmethod
    def done(cls) -> "Landing":
        """A landing with nothing left to copy."""
        return cls(0, 0, 0)

    @property
    def complete(self) -> bool:
        return self._upto >= self.total

    def advance(self, upto: int) -> None:
        with self._cond:
            self._upto = max(self._upto, upto)
            if self._wants and self._upto >= min(self._wants):  # wake a writer only once its bytes are there
                self._cond.notify_all()

    def fail(self, e: BaseException) -> None:
        with self._cond:
            self.error = e
            self._cond.notify_all()

    def wait(self, end: int) -> None:
        """Return once the buffer's bytes below address ``end`` have landed (at once for an address below the
        buffer, after the whole copy for one beyond it); raise if the copy failed."""
        offset = min(end - self.base, self.total) if self.base < end else 0
        with self._cond:
            if self._upto < offset and self.error is None:
                self._wants.append(offset)
                try:
                    while self._upto < offset and self.error is None:
                        self._cond.wait()
                finally:
                    self._wants.remove(offset)
        if self.error is not None and self._upto < offset:
            raise RuntimeError(f"staging copy failed: {type(self.error).__name__}: {self.error}") from self.error

    def wait_tensor(self, t: torch.Tensor) -> None:
        """:meth:`wait` for the bytes of CPU tensor ``t`` (a view of the staging buffer)."""
        self.wait(t.data_ptr() + t.numel() * t.element_size())


class HostStager:
    """Copies a (nested) state dict into one host buffer allocated once and reused.

    Every tensor of the state gets a view carved from a single flat buffer (``carve``), so staging memory is
    the state's size plus at most ``ALIGN`` bytes per tensor (and a page, to align the buffer). With CUDA the
    buffer is page-locked in place (``pin_in_place``) so device-to-host copies run at full bandwidth and
    overlap; on CPU the copy is a plain memcpy. The buffer is reused while the state's layout (paths, shapes,
    dtypes) stays the same, and only one save is in flight, so staging memory is bounded by one copy of the
    state.

    ``plan`` may defer the copy of chosen tensors: it returns the staged structure
    and the list of copies still to do, which ``copy`` performs later (from the
    checkpointer's stager thread, while the training loop's next forward/backward
    runs). Everything not deferred is copied before ``plan`` returns. ``landing`` tracks how far that later
    copy has got (:class:`Landing`), so the writer can write what has landed while the rest is copied.
    """

    def __init__(self, pin: bool | None = None) -> None:
        self.pin = torch.cuda.is_available() if pin is None else pin
        self._flat: torch.Tensor | None = None  # uint8, every staging view lies in it
        self.layout_key = ""  # a digest of the staged paths, shapes and dtypes
        self._layout: tuple | None = None
        self._views: dict[str, torch.Tensor] = {}
        self._unpin: weakref.finalize | None = None
        self._stream = None  # the side stream of overlapped copies (CUDA)
        self.landing = Landing.done()  # the last plan's deferred copy (copy() advances it)

    def stage(self, state: Any) -> Any:
        """Copy all of ``state`` now; returns the host copy."""
        staged, pending = self.plan(state)
        assert not pending
        return staged

    def plan(self, state: Any, defer: Callable[[torch.Tensor], bool] = lambda t: False) -> tuple[Any, list]:
        """Stage ``state``; the tensors ``defer`` selects get a buffer now and their copy later."""
        leaves: list[tuple[str, torch.Tensor]] = []
        _leaves(state, "", leaves)
        layout = tuple((path, tuple(t.shape), t.dtype) for path, t in leaves)
        if layout != self._layout:
            self._allocate(layout)
        pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        out = self._stage(state, "", defer, pending)
        if self.pin:
            torch.cuda.synchronize()
        self.landing = self._landing(pending)
        return out, pending

    def _landing(self, pending: list) -> Landing:
        """The landing of ``pending``'s copy: before it, the buffer is filled up to the first deferred view
        (everything else was copied by ``plan``)."""
        starts = [buf.data_ptr() for buf, _ in pending if buf.numel()]  # an empty view lies outside the buffer
        if not starts or self._flat is None:
            return Landing.done()
        base = self._flat.data_ptr()
        return Landing(base, self._flat.numel(), min(starts) - base)

    def _allocate(self, layout: tuple) -> None:
        """One flat buffer for ``layout``, carved into a view per tensor (the previous buffer is released)."""
        self.close()
        sizes = [math.prod(shape) * torch.empty((), dtype=dtype).element_size() for _, shape, dtype in layout]
        offsets, total = carve(sizes)
        # page-aligned: a staged tensor's address and its offset in the buffer agree modulo the page, so the raw
        # layout's runs can go to the disk with O_DIRECT (rawfmt.py, hashing.py) and files do not depend on where
        # the allocator put the buffer
        whole = torch.empty(total + PAGE, dtype=torch.uint8, device="cpu")
        skip = -whole.data_ptr() % PAGE
        flat = whole[skip:skip + total]
        end = 0
        for o, n in zip(offsets, sizes):  # the alignment padding is zeros: the raw layout writes runs of views
            flat[end:o].zero_()           # with the padding between them (rawfmt.py), never stale bytes
            end = o + n
        if self.pin and total:
            # unpinned on close(), on the next layout, or when the stager is collected (before the buffer is freed)
            self._unpin = weakref.finalize(self, pin_in_place(flat))
        self._flat, self._layout = flat, layout
        self.layout_key = hashlib.sha256(repr(layout).encode()).hexdigest()[:16]
        arr = flat.numpy()
        self._views = {path: _view(arr, o, n, dtype, shape)
                       for (path, shape, dtype), o, n in zip(layout, offsets, sizes)}

    def close(self) -> None:
        """Release the buffer (unpinning it first); the next ``plan`` allocates a new one."""
        if self._unpin is not None:
            self._unpin()
        self._flat, self._layout, self._views, self._unpin = None, None, {}, None
        self.layout_key = ""

    def ready_event(self):
        """Marks, on the caller's CUDA stream, the point deferred copies must wait for (None on CPU).

        Returns ``(event, device)``: the copier thread has its own current device, so
        it must be told which GPU the training loop runs on.
        """
        if not self.pin:
            return None
        ev = torch.cuda.Event()
        ev.record()
        return ev, torch.cuda.current_device()

    def copy(self, pending: list, ready=None) -> None:
        """Perform deferred copies and wait until they landed.

        CUDA: on a side stream of the training loop's device, after ``ready``, so the
        device-to-host copies overlap the next step's kernels instead of queueing
        behind them on the default stream.
        """
        landing = self.landing
        try:
            self._copy(pending, ready, landing)
        except BaseException as e:
            landing.fail(e)
            raise
        landing.advance(landing.total)

    def _copy(self, pending: list, ready, landing: Landing) -> None:
        # after the i-th copy, the buffer is filled up to the lowest deferred view not copied yet
        base, marks, low = landing.base, [landing.total] * len(pending), landing.total
        for i in range(len(pending) - 1, 0, -1):
            if pending[i][0].numel():
                low = min(low, pending[i][0].data_ptr() - base)
            marks[i - 1] = low
        if ready is None:
            # one copy call per ADVANCE_EVERY bytes, not per tensor: each call hands the GIL back and must win it
            # again from the training loop and the save's other threads (a save of `small` beside the loop took
            # 28-35 ms for a copy of 4 ms quiet, 276 calls)
            last, bufs, srcs = 0, [], []
            for (buf, t), mark in zip(pending, marks):
                bufs.append(buf)
                srcs.append(t)
                if mark - last >= ADVANCE_EVERY:
                    torch._foreach_copy_(bufs, srcs)
                    bufs, srcs = [], []
                    landing.advance(mark)
                    last = mark
            if bufs:
                torch._foreach_copy_(bufs, srcs)
            return
        event, device = ready
        with torch.cuda.device(device):
            if self._stream is None:
                self._stream = torch.cuda.Stream()
            stream = self._stream
            landed = []  # (event, mark) about every LANDED_EVERY bytes: the writer starts on what has landed
            with torch.cuda.stream(stream):
                stream.wait_event(event)
                since = 0
                for (buf, t), mark in zip(pending, marks):
                    buf.copy_(t, non_blocking=True)
                    since += buf.numel() * buf.element_size()
                    if since >= LANDED_EVERY:
                        ev = torch.cuda.Event()
                        ev.record(stream)
                        landed.append((ev, mark))
                        since = 0
            for ev, mark in landed:
                ev.synchronize()
                landing.advance(mark)
            stream.synchronize()

    def spans(self) -> list[tuple[int, int]]:
        """``(address, nbytes)`` of the staging buffer (unchanged while a save of it is in flight)."""
        return [] if self._flat is None else [(self._flat.data_ptr(), self._flat.numel())]

    def buffers(self) -> list[torch.Tensor]:
        """The staging buffer (uint8, flat), for writers that write runs of staged tensors in one piece."""
        return [] if self._flat is None else [self._flat]

    @property
    def nbytes(self) -> int:
        """Bytes of host memory staging holds (the state's bytes plus alignment)."""
        return 0 if self._flat is None else self._flat.numel()

    def _stage(self, obj: Any, path: str, defer, pending: list) -> Any:
        if isinstance(obj, DTensor):
            # Sharded state: stage this rank's shard and keep its place in the global tensor
            # (mesh, placements, global shape), so DCP's planner writes it as this rank's chunk.
            # Wrap the host buffer itself, as torch's own CPU staging does (torch 2.13.0
            # distributed/_state_dict_utils.py:450-454 sets ``_local_tensor``): DTensor.from_local would
            # move it to the mesh's device (torch 2.13.0 tensor/_api.py:539-541), copying it now, before a
            # deferred copy has filled it, and DCP would write that stale copy.
            local = self._stage(obj.to_local(), path, defer, pending)
            return DTensor(local, obj._spec, requires_grad=False)
        if isinstance(obj, torch.Tensor):
            buf, t = self._views[path], obj.detach()
            if defer(t):
                pending.append((buf, t))
            else:
                buf.copy_(t, non_blocking=self.pin)
            return buf
        if isinstance(obj, dict):
            return {k: self._stage(v, f"{path}/{k}", defer, pending) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self._stage(v, f"{path}/{i}", defer, pending) for i, v in enumerate(obj))
        return copy.deepcopy(obj)


def _leaves(obj: Any, path: str, out: list) -> None:
    """``(path, tensor)`` of every tensor in ``obj`` (a DTensor's local shard), with ``_stage``'s paths."""
    if isinstance(obj, DTensor):
        out.append((path, obj.to_local()))
    elif isinstance(obj, torch.Tensor):
        out.append((path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _leaves(v, f"{path}/{k}", out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _leaves(v, f"{path}/{i}", out)


def state_sha256(state: Any) -> str:
    """A hash of a nested state dict's structure, dtypes, shapes and bytes (key order independent).

    DTensors are hashed as their full, unsharded value (a collective: every rank of their mesh calls
    this with the same structure), so a sharded run and its resumed copy compare like for like.
    """
    h = hashlib.sha256()

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, DTensor):
            obj = obj.full_tensor()
        if isinstance(obj, torch.Tensor):
            t = obj.detach().cpu().contiguous()
            h.update(f"{path}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                walk(obj[k], f"{path}/{k}")
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(v, f"{path}/{i}")
        else:
            h.update(f"{path}={obj!r}".encode())

    walk(state, "")
    return h.hexdigest()
