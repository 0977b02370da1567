"""Bring your own loop: a plain FSDP2 script (not openpod's trainer) checkpointed by openpod's component.

    torchrun --nproc-per-node 2 training/examples/fsdp2_own_loop.py --dir /tmp/demo --steps 30

Rerun the same command after a crash: it resumes from the newest checkpoint every rank can load.
The last line on rank 0 is JSON with the step, loss and state_sha256 of the full (unsharded) state.
"""

from __future__ import annotations

import argparse
import json
import os
import random

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from training.checkpoint import Checkpointer, state_sha256
from training.checkpoint.components import Position, RNGState
from training.config import CheckpointConfig, TierConfig
from training.process_exit import run_and_exit


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="checkpoint root (memory tier and durable tier below it)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--every", type=int, default=5)
    args = ap.parse_args()

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if torch.cuda.is_available() else torch.device("cpu")
    torch.use_deterministic_algorithms(True)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 1)).to(device)
    mesh = init_device_mesh(device.type, (world,))
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
    seen = Position()                    # samples this rank has consumed
    torch.manual_seed(1000 + rank)       # per-rank dropout stream, saved by RNGState
    random.seed(1000 + rank)

    ck = Checkpointer(
        CheckpointConfig(every=args.every, peer_replication=False, tiers=[
            TierConfig("memory", f"{args.dir}/shm"), TierConfig("fsx", f"{args.dir}/durable")]),
        rank=rank, world_size=world, local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", world)),
        node_id=os.environ.get("HOSTNAME", "node"), scratch_dir=f"{args.dir}/scratch/{rank}")
    ck.register("lr_scheduler", scheduler)
    ck.register("rng", RNGState())
    ck.register("data", seen)
    info = ck.restore(model, optimizer)
    start = info.step if info else 0

    loss = torch.zeros(())
    for step in range(start, args.steps):
        g = torch.Generator().manual_seed(seen.value)  # the data depends only on the saved position
        x = torch.randn(8, 16, generator=g, device="cpu").to(device)
        y = x.sum(dim=1, keepdim=True)
        seen.value += 8
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if ck.due(step + 1):
            ck.save(step + 1, model, optimizer, meta={"loss": loss.item()})
    ck.flush()
    dist.barrier()
    ck.close()
    digest = state_sha256(ck.state(model, optimizer))
    if rank == 0:
        print(json.dumps({"step": args.steps, "restored_step": start, "loss": loss.item(), "state_sha256": digest}))
    dist.destroy_process_group()


if __name__ == "__main__":
    # Not the interpreter's teardown: a gloo worker thread still dropping the last collective's tensors then can
    # abort the process after its work is done (training/process_exit.py). A CUDA process exits the usual way.
    run_and_exit(main)
