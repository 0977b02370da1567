"""The checkpointer's collectives: one answer for every rank, a no-op without a process group."""

from __future__ import annotations

import torch
import torch.distributed as dist


def all_gather(obj, world_size: int) -> list:
    if world_size <= 1 or not dist.is_initialized():
        return [obj]
    out = [None] * world_size
    dist.all_gather_object(out, obj)
    return out


def all_reduce(values: list[int], world_size: int, op: str = "sum") -> list[int]:
    if world_size <= 1 or not dist.is_initialized():
        return list(values)
    dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor(values, dtype=torch.int64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return [int(v) for v in t.tolist()]


def all_ok(ok: bool, world_size: int) -> bool:
    if world_size <= 1 or not dist.is_initialized():
        return ok
    dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([1 if ok else 0], dtype=torch.int32, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())
