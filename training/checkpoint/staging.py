"""Staging: copy training state into reused host buffers, the only part a save may block on."""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Callable

import torch
from torch.distributed.tensor import DTensor


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``t``: the local shard of a DTensor (FSDP2, TP, HSDP), else ``t`` itself."""
    return t.to_local() if isinstance(t, DTensor) else t


class HostStager:
    """Copies a (nested) state dict into host buffers allocated once and reused.

    The buffers are pinned when CUDA is present so device-to-host copies run at
    full bandwidth and overlap; on CPU the copy is a plain memcpy. Because the
    buffers are reused and only one save is in flight, staging memory is bounded
    by one copy of the state.

    ``plan`` may defer the copy of chosen tensors: it returns the staged structure
    and the list of copies still to do, which ``copy`` performs later (from the
    checkpointer's stager thread, while the training loop's next forward/backward
    runs). Everything not deferred is copied before ``plan`` returns.
    """

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}
        self.pin = torch.cuda.is_available()
        self._stream = None  # the side stream of overlapped copies (CUDA)

    def stage(self, state: Any) -> Any:
        """Copy all of ``state`` now; returns the host copy."""
        staged, pending = self.plan(state)
        assert not pending
        return staged

    def plan(self, state: Any, defer: Callable[[torch.Tensor], bool] = lambda t: False) -> tuple[Any, list]:
        """Stage ``state``; the tensors ``defer`` selects get a buffer now and their copy later."""
        pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        out = self._stage(state, "", defer, pending)
        if self.pin:
            torch.cuda.synchronize()
        return out, pending

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
        if ready is None:
            for buf, t in pending:
                buf.copy_(t)
            return
        event, device = ready
        with torch.cuda.device(device):
            if self._stream is None:
                self._stream = torch.cuda.Stream()
            stream = self._stream
            with torch.cuda.stream(stream):
                stream.wait_event(event)
                for buf, t in pending:
                    buf.copy_(t, non_blocking=True)
            stream.synchronize()

    def spans(self) -> list[tuple[int, int]]:
        """``(address, nbytes)`` of every staging buffer (unchanged while a save of them is in flight)."""
        return [(b.untyped_storage().data_ptr(), b.untyped_storage().nbytes()) for b in self._buffers.values()]

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self._buffers.values())

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
            buf = self._buffers.get(path)
            t = obj.detach()
            if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
                buf = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=self.pin)
                self._buffers[path] = buf
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
