"""The reference trainer: a small GPT on synthetic tokens, using :mod:`training.runtime`."""

from __future__ import annotations

import os
import sys

import torch

from training.config import RunConfig
from training.model import GPT
from training.runtime import Runtime


def prepare() -> None:
    """Process-wide settings, once per process (a warm standby worker runs this before it waits: the first
    ``use_deterministic_algorithms`` call alone took 5 s on the loaded 2-vCPU VM, 2026-11-23)."""
    # Deterministic cuBLAS needs a fixed workspace, set before the first cuBLAS handle; without it
    # use_deterministic_algorithms(True) raises on CUDA >= 10.2 (torch.use_deterministic_algorithms docs;
    # torch 2.13.0 torch/testing/_internal/common_utils.py:2509-2544 sets the same value, read 2026-11-23).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    deterministic_algorithms()


def deterministic_algorithms() -> None:
    """``torch.use_deterministic_algorithms(True)`` without importing TorchInductor when nothing compiles.

    The public call sets two things: the ATen flag, and ``torch._inductor.config.deterministic``, for which it
    imports the whole of torch._inductor (facts: torch.deterministic-algorithms; about 1.5 s of CPU and 2 s
    of wall time per worker on the 2-core CI machine, 2026-11-27, on every start and restart). The Inductor half
    is the environment variable its config reads when it is first imported (``TORCHINDUCTOR_DETERMINISTIC``),
    so a later ``torch.compile`` still compiles deterministically (tests/training/test_runtime_settings.py)."""
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"  # as the public call sets Inductor's flag: always
    if "torch._inductor.config" in sys.modules or not hasattr(torch._C, "_set_deterministic_algorithms"):
        torch.use_deterministic_algorithms(True)   # already paid for, or another torch: the public call
    else:
        torch._C._set_deterministic_algorithms(True, warn_only=False)


def train(cfg: RunConfig) -> dict:
    prepare()
    rt = Runtime(cfg)
    torch.manual_seed(cfg.seed)  # every rank builds the same initial model
    model = rt.parallelize(GPT(cfg.model_config).to(rt.device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, betas=(0.9, 0.95),
                                  weight_decay=cfg.optim.weight_decay)
    start = rt.restore(model, optimizer)

    for step in rt.steps(start):  # range(start, cfg.steps), unless replica fault tolerance redoes or skips ahead
        plan = rt.plan(step)
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=rt.device)
        for ids in plan.micro_batches:
            loss = model.loss_sum(rt.batch(ids)) / plan.global_batch  # global mean, any world size
            loss.backward()
            loss_sum += loss.detach()
        loss_value = rt.sync_gradients(model, loss_sum)
        rt.clip_grad_norm_(model, cfg.optim.grad_clip)
        for group in optimizer.param_groups:
            group["lr"] = rt.lr_schedule(step)
        if rt.commit():  # False only if a replica group was lost during this step: it runs again
            optimizer.step()
            rt.step_done(step, model, optimizer, loss_value)
        if rt.should_stop:  # SIGTERM: this step is checkpointed durably
            break

    return rt.finish(model, optimizer)
