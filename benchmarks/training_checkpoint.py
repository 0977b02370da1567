"""Checkpoint cost on the training loop: blocking time and step slowdown, measured side by side.

    python -m benchmarks.training_checkpoint [--quick] [--model xl] [--dir DIR]

* Blocking time of one save, for the same model + AdamW state:
  - async save (openpod ``Checkpointer.save``: stage to host buffers, DCP writes in
    the background) - steady state, buffers already allocated - with overlapped
    staging (the default: the copy runs during the next step's forward/backward and
    that step's optimizer update waits for it; both waits count) and eager staging;
  - synchronous ``torch.save`` to a file on disk + ``fsync``;
  - the floor: a plain copy of every tensor into preallocated host memory.
* Step-time slowdown while a background save (memory tier write, then promotion to
  a disk tier) runs, against the same steps with no save in flight.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from training.checkpoint import Checkpointer
from training.config import MODELS, CheckpointConfig, TierConfig
from training.model import GPT


def build(model_name: str, threads: int):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT(MODELS[model_name])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def train_step(model, opt, batch) -> None:
    opt.zero_grad(set_to_none=True)
    model.loss_sum(batch).backward()
    opt.step()


def state_bytes(state) -> int:
    n = 0
    for v in _tensors(state):
        n += v.numel() * v.element_size()
    return n


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


def time_floor(state, reps: int) -> float:
    ts = list(_tensors(state))
    bufs = [torch.empty_like(t) for t in ts]
    for b, t in zip(bufs, ts):  # first touch: fault the pages in, as staging does on its first save
        b.copy_(t)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for b, t in zip(bufs, ts):
            b.copy_(t)
        out.append(time.perf_counter() - t0)
    return min(out)


def time_sync_save(state, path: Path, reps: int) -> float:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        out.append(time.perf_counter() - t0)
        path.unlink()
    return min(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a ~0.5 GB state and fewer repetitions")
    ap.add_argument("--model", default=None, choices=sorted(MODELS))
    ap.add_argument("--dir", default=None, help="disk directory for the synchronous save and the disk tier")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the training loop")
    a = ap.parse_args(argv)
    model_name = a.model or ("medium" if a.quick else "xl")
    reps = 2 if a.quick else 3
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    base = Path(a.dir or tempfile.mkdtemp(prefix="training-", dir=out))
    shm = Path(tempfile.mkdtemp(prefix="openpod-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    model, opt = build(model_name, a.threads)
    c = MODELS[model_name]
    batch = torch.randint(c.vocab_size, (1, 65 if not a.quick else 33))
    train_step(model, opt, batch)  # optimizer state exists

    cfg = CheckpointConfig(every=1, peer_replication=False, write_threads=1,
                           tiers=[TierConfig("memory", str(shm / "mem"), keep=1),
                                  TierConfig("nvme", str(base / "nvme"), keep=1)])
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="bench", scratch_dir=base / "scratch")
    nbytes = state_bytes(ck.state(model, opt))
    print(f"model {model_name}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params, "
          f"model + AdamW state {nbytes / 2**30:.2f} GiB; torch threads {a.threads}; "
          f"disk dir {base}; memory tier {shm}")

    # --- blocking time -------------------------------------------------------------------------
    # Overlapped staging (the default): the loop is blocked in save() and, during the next step,
    # in the optimizer's step pre-hook until the copy has landed; both count.
    first = ck.save(1, model, opt)
    ck.flush()
    blocking, held = [], []
    for i in range(reps):
        b = ck.save(2 + i, model, opt)
        train_step(model, opt, batch)
        w = ck.take_waited()
        blocking.append(b + w)
        held.append(w)
        ck.flush()
    async_block = min(blocking)
    ck.cfg.overlap_staging = False  # eager staging: save() itself copies everything
    eager = []
    for i in range(reps):
        eager.append(ck.save(10 + i, model, opt))
        ck.flush()
    ck.cfg.overlap_staging = True
    eager_block = min(eager)
    floor = time_floor(ck.state(model, opt), reps)
    sync = time_sync_save(ck.state(model, opt), base / "sync.pt", reps)
    write = ck.stats.last_write_seconds

    # --- step slowdown -------------------------------------------------------------------------
    for _ in range(2):
        train_step(model, opt, batch)  # warm-up
    # Alternate windows without and with a save in flight, so machine noise hits both alike.
    quiet, busy, background = [], [], []
    for r in range(2 if a.quick else 3):
        for _ in range(5):
            t0 = time.perf_counter()
            train_step(model, opt, batch)
            quiet.append(time.perf_counter() - t0)
        ck.save(100 + r, model, opt)
        t_start = time.perf_counter()
        while ck.busy():
            t0 = time.perf_counter()
            train_step(model, opt, batch)
            busy.append(time.perf_counter() - t0)
        background.append(time.perf_counter() - t_start)
    ck.close()
    q, b = statistics.median(quiet), statistics.median(busy)

    print()
    print("blocking time of one save (lower is better)")
    print(f"  plain memory copy (floor)      {floor * 1e3:9.1f} ms")
    print(f"  async save, eager staging      {eager_block * 1e3:9.1f} ms   (save() copies all state to host)")
    print(f"  async save, overlapped staging {async_block * 1e3:9.1f} ms   (save() + the next optimizer step's "
          f"wait, {min(held) * 1e3:.1f} ms of it; first save incl. allocation {first * 1e3:.1f} ms)")
    print(f"  torch.save + fsync (sync)      {sync * 1e3:9.1f} ms")
    print(f"  -> async (overlapped) is {sync / async_block:6.1f}x faster than sync (target >= 20x); "
          f"eager staging {sync / eager_block:.1f}x")
    print(f"  -> async (overlapped) is {async_block / floor:6.2f}x the memory-copy floor (target <= 2x); "
          f"eager staging {eager_block / floor:.2f}x")
    print(f"  background DCP write to the memory tier took {write * 1e3:.0f} ms (not blocking)")
    print()
    print(f"step time with / without a save in flight ({len(busy)} overlapped steps; background save + "
          f"promotion to disk took {statistics.median(background):.1f} s each)")
    print(f"  median step, no save           {q * 1e3:9.1f} ms")
    print(f"  median step, save in flight    {b * 1e3:9.1f} ms")
    print(f"  -> slowdown {100 * (b / q - 1):+.1f}% (target <= 10%)")
    import shutil

    shutil.rmtree(shm, ignore_errors=True)
    if a.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
