"""Checkpoints of the reference model saved before its fused ``qkv`` projection was split into ``q``, ``k``, ``v``.

Until 2026-11-23 each block held one ``nn.Linear(d, 3d)`` named ``qkv`` whose output was split along its last
dimension into query, key and value in that order (``self.qkv(x).split(d, dim=2)``; training/model.py before
commit 4f73abd). Its weight ``[3d, d]`` therefore holds q's rows ``0:d``, k's ``d:2d`` and v's ``2d:3d`` (dim 0),
and its bias the same ranges; AdamW's ``exp_avg`` and ``exp_avg_sq`` have the parameter's shape and split the same way, and
its ``step`` is shared. The split model computes exactly the same function from those slices.

A snapshot holding ``...qkv.*`` where the live model wants ``...q.*``, ``...k.*``, ``...v.*`` is loaded by reading each
fused tensor whole (DCP reshards it from whatever mesh saved it) and copying the slices into the live tensors - this
rank's piece of each when they are DTensors (FSDP2, tensor parallel)."""

from __future__ import annotations

import logging

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint._nested_dict import flatten_state_dict, unflatten_state_dict
from torch.distributed.tensor import DTensor

log = logging.getLogger("training.checkpoint")

FUSED, PARTS = ".qkv.", (".q.", ".k.", ".v.")


def fused_source(key: str, saved: set[str]) -> tuple[str, int] | None:
    """(the fused key, the part's index) that holds ``key`` in an old snapshot, if any."""
    for i, part in enumerate(PARTS):
        if part in key:
            old = key.replace(part, FUSED, 1)
            if old in saved:
                return old, i
    return None


def explains(missing: set[str], saved: set[str]) -> bool:
    """Whether every model key the snapshot lacks is a part of a fused projection it holds."""
    return bool(missing) and all(fused_source(k, saved) is not None for k in missing)


def _piece(full: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the slice of ``full`` this rank holds of ``target``, ``target``'s local tensor)."""
    if not isinstance(target, DTensor):
        return full, target
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape, offset = compute_local_shape_and_global_offset(target.shape, target.device_mesh, target.placements)
    out = full
    for dim, (o, n) in enumerate(zip(offset, shape)):
        out = out.narrow(dim, o, n)
    return out, target.to_local()


def load_fused_qkv(state: dict, reader, metadata) -> int:
    """DCP-load ``state`` from an old snapshot, mapping each fused ``qkv`` tensor onto q, k, v (model and optimizer
    state). The saved ``param_groups``' parameter names are the old ones: the live optimizer keeps its own (its
    hyper-parameters are still read). Returns the number of live tensors filled from a fused one."""
    saved = set(metadata.state_dict_metadata)
    flat, mapping = flatten_state_dict(state)
    load, fills = {}, []
    for key, value in flat.items():
        src = fused_source(key, saved) if isinstance(value, torch.Tensor) else None
        if src is None:
            if key.startswith("optim.param_groups.") and key.endswith(".params"):
                continue  # the old parameter names; ours stay
            load[key] = value
            continue
        old, part = src
        if old not in load:
            md = metadata.state_dict_metadata[old]
            load[old] = torch.empty(md.size, dtype=md.properties.dtype)
        fills.append((key, old, part))
    dcp.load(load, storage_reader=reader, no_dist=True)
    for key, value in load.items():  # non-tensor leaves (hyper-parameters) are replaced, not filled in place
        if key in flat and not isinstance(flat[key], torch.Tensor):
            flat[key] = value
    for key, old, part in fills:
        full, target = load[old], flat[key]
        if full.dim() > 0 and not key.endswith(".step"):
            n = full.shape[0] // len(PARTS)
            full = full.narrow(0, part * n, n)
        src, dst = _piece(full, target)
        with torch.no_grad():
            dst.copy_(src)
    new = unflatten_state_dict(flat, mapping)
    state.clear()
    state.update(new)
    log.warning("checkpoint from before the q, k, v split: %d tensors taken from fused qkv projections", len(fills))
    return len(fills)
