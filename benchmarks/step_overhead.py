"""The runtime's per-step overhead against a plain torch loop on the same model, batch and optimizer.

    python -m benchmarks.step_overhead [--quick] [--model xl] [--steps 30] [--micro-batch 12] [--device auto]

Both loops train the same GPT (same seed) with AdamW, gradient clipping and the learning-rate schedule, fp32,
deterministic algorithms, no checkpoints, one process (a world of one: gloo on CPU, NCCL on CUDA). The plain
loop reads its batch from a tensor already on the device; the runtime's loop is training/trainer.py's. Its steps
alternate: in one, only the whole step is timed (one ``torch.cuda.synchronize()`` at each end, as the plain
loop's): these steps are the figure compared; in the next, each part is timed on its own (a synchronize around
each, which keeps the GPU idle while the CPU queues the next part's kernels, so those steps run longer than the
loop does): the step plan, the batch (shards read and copied to the device), forward + backward,
``sync_gradients``, ``clip_grad_norm_``, the optimizer step, ``step_done`` (goodput, heartbeat, the stop check).
Heartbeats go to /dev/shm, as the launcher's do. The target
(issue 22): the runtime within 3% of the plain loop.
With ``--micro-batch`` below the global batch (12) the runtime runs several forward/backward passes per step,
which the plain loop does not: a configuration, not overhead; the default compares one pass each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from training.config import MODELS, CheckpointConfig, DataConfig, RunConfig


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def plain_loop(cfg: RunConfig, device: torch.device, batch: torch.Tensor, steps: int) -> list[float]:
    from training.model import GPT
    from training.runtime import LRSchedule

    torch.manual_seed(cfg.seed)
    model = GPT(cfg.model_config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, betas=(0.9, 0.95),
                            weight_decay=cfg.optim.weight_decay)
    lr = LRSchedule.from_config(cfg)
    out = []
    for step in range(steps):
        _sync(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        (model.loss_sum(batch) / batch.shape[0]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        for g in opt.param_groups:
            g["lr"] = lr(step)
        opt.step()
        _sync(device)
        out.append(time.perf_counter() - t0)
    return out


def runtime_loop(cfg: RunConfig) -> tuple[list[float], dict[str, list[float]], torch.Tensor]:
    """training/trainer.py's loop, ``cfg.steps`` steps. Even steps are timed whole, odd steps part by part (module
    docstring); returns the even steps' times, the odd steps' part times and the first batch."""
    from training.model import GPT
    from training.runtime import Runtime

    rt = Runtime(cfg)
    dev = rt.device
    torch.manual_seed(cfg.seed)
    model = rt.parallelize(GPT(cfg.model_config).to(dev))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, betas=(0.9, 0.95),
                                  weight_decay=cfg.optim.weight_decay)
    parts: dict[str, list[float]] = {k: [] for k in ("plan", "batch", "forward+backward", "sync_gradients",
                                                     "clip_grad_norm_", "optimizer.step", "step_done")}
    total, first = [], None
    start = rt.restore(model, optimizer)

    by_part = False

    def timed(name, fn):
        if not by_part:
            return fn()
        _sync(dev)
        t0 = time.perf_counter()
        r = fn()
        _sync(dev)
        parts[name][-1] += time.perf_counter() - t0
        return r

    for step in rt.steps(start):
        by_part = step % 2 == 1
        if by_part:
            for v in parts.values():
                v.append(0.0)
        _sync(dev)
        t0 = time.perf_counter()
        plan = timed("plan", lambda: rt.plan(step))
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=dev)
        for ids in plan.micro_batches:
            x = timed("batch", lambda: rt.batch(ids))
            first = x if first is None else first

            def fwd_bwd():
                loss = model.loss_sum(x) / plan.global_batch
                loss.backward()
                return loss.detach()
            loss_sum += timed("forward+backward", fwd_bwd)
        loss_value = timed("sync_gradients", lambda: rt.sync_gradients(model, loss_sum))
        timed("clip_grad_norm_", lambda: rt.clip_grad_norm_(model, cfg.optim.grad_clip))
        for group in optimizer.param_groups:
            group["lr"] = rt.lr_schedule(step)
        if rt.commit():
            timed("optimizer.step", optimizer.step)
            timed("step_done", lambda: rt.step_done(step, model, optimizer, loss_value))
        _sync(dev)
        if not by_part:
            total.append(time.perf_counter() - t0)
    rt.finish(model, optimizer)
    return total, parts, first


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the small model, 12 steps")
    ap.add_argument("--model", default=None, choices=sorted(MODELS))
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--micro-batch", type=int, default=12, help="samples per forward pass (global batch: 12)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    model = a.model or ("small" if a.quick else "xl")
    steps = a.steps or (12 if a.quick else 30)
    warm = 3  # the first steps (allocation, cuDNN/cuBLAS set-up) are not counted
    from training.data import ensure_dataset
    from training.trainer import prepare

    prepare()  # deterministic algorithms, as the runtime's worker runs
    with tempfile.TemporaryDirectory(prefix="step-overhead-") as tmp:
        m = MODELS[model]
        data = DataConfig(data_dir=str(Path(tmp) / "data"), num_samples=max(256, 24 * (steps + warm)),
                          global_batch=12, micro_batch=a.micro_batch)
        ensure_dataset(data.data_dir, seed=0, num_samples=data.num_samples, samples_per_shard=data.samples_per_shard,
                       seq_len=m.seq_len, vocab_size=m.vocab_size)
        # the runtime's loop: steps + warm steps timed whole, as many timed part by part, alternating
        cfg = RunConfig(model=model, steps=2 * (steps + warm), seed=0, run_dir=str(Path(tmp) / "run"), data=data,
                        threads=a.threads, device=a.device, checkpoint=CheckpointConfig(enabled=False))
        os.environ.setdefault("OPENPOD_FT_DIR", str(Path(tmp) / "ft"))  # the launcher sets it: heartbeats on
        Path(os.environ["OPENPOD_FT_DIR"]).mkdir(parents=True, exist_ok=True)
        # the launcher writes heartbeats in the memory tier's file system (training/cli.py: /dev/shm/openpod/<job>
        # by default), not on disk: two renames per step on this VM's disk took 2 ms each under load
        shm = Path("/dev/shm")
        beats = tempfile.mkdtemp(prefix="step-overhead-beats-", dir=shm if shm.is_dir() else tmp)
        os.environ.setdefault("OPENPOD_BEATS_DIR", beats)
        from training.data import TokenShards
        from training.runtime import uses_cuda

        device = torch.device("cuda" if uses_cuda(cfg) else "cpu")
        torch.set_num_threads(a.threads)
        batch = TokenShards(data.data_dir).batch(list(range(12))).to(device)  # the global batch, one pass
        # plain, runtime, plain: machine noise (a shared 2-core VM here) hits both alike
        half = (steps + 1) // 2
        plain = plain_loop(cfg, device, batch, half + warm)[warm:]
        total, parts, first = runtime_loop(cfg)
        plain += plain_loop(cfg, device, batch, steps - half + warm)[warm:]
        assert first.shape == batch.shape or a.micro_batch < 12
        shutil.rmtree(beats, ignore_errors=True)
    rt_med, plain_med = statistics.median(total[warm:]), statistics.median(plain)
    where = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    print(f"model {model} on {device.type} ({where}), global batch 12 x {m.seq_len + 1} tokens, micro-batch "
          f"{a.micro_batch}, fp32, deterministic; torch {torch.__version__}; medians of {steps} steps after {warm}")
    print(f"plain torch loop   {plain_med * 1e3:9.2f} ms/step [{min(plain) * 1e3:.2f}-{max(plain) * 1e3:.2f}]")
    print(f"openpod runtime    {rt_med * 1e3:9.2f} ms/step [{min(total[warm:]) * 1e3:.2f}-"
          f"{max(total[warm:]) * 1e3:.2f}]  ({100 * (rt_med / plain_med - 1):+.1f}%; target <= +3%)")
    print("runtime step, by part (median ms of the steps timed part by part):")
    for name, v in parts.items():
        print(f"  {name:18s}{statistics.median(v[warm:]) * 1e3:9.2f}")


if __name__ == "__main__":
    main()
