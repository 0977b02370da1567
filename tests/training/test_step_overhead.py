"""Per-step work the runtime does not need (issue 22, Build 4): counted, not timed.

training/trainer.py's loop runs in a world of one (gloo, CPU, the `tiny` model, heartbeats on). Inside the
runtime's per-step calls (batch, sync_gradients, clip_grad_norm_, step_done) it counts reads of a tensor's
value to the host (``float()``, ``bool()``, ``.item()``, ``.tolist()``: on a GPU each waits for the device, so
the host stops queueing work ahead) and flattenings of the gradients into one buffer (``_sum_flat``: in a world
of one there is nothing to sum, yet every gradient was copied in and back). The benchmark
(benchmarks/step_overhead.py) measures the time; this test pins the work.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.training.conftest import PY, ROOT, cli_env

SCRIPT = r"""
import json, sys
import torch
from training import runtime, trainer
from training.config import MODELS, CheckpointConfig, DataConfig, RunConfig
from training.data import ensure_dataset

tmp, parallelism, steps, device = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
m = MODELS["tiny"]
data = DataConfig(data_dir=tmp + "/data", num_samples=64, samples_per_shard=32, global_batch=4, micro_batch=2)
ensure_dataset(data.data_dir, seed=0, num_samples=64, samples_per_shard=32, seq_len=m.seq_len,
               vocab_size=m.vocab_size)
cfg = RunConfig(model="tiny", steps=steps, seed=0, run_dir=tmp + "/run", data=data, device=device,
                parallelism=parallelism, checkpoint=CheckpointConfig(enabled=False))
counts = {"host_reads": 0, "flattens": 0, "steps": 0}
inside = [0]

def counted(name, fn):
    def wrapper(*a, **kw):
        if inside[0]:
            counts[name] += 1
        return fn(*a, **kw)
    return wrapper

for attr in ("__float__", "__bool__", "item", "tolist"):
    setattr(torch.Tensor, attr, counted("host_reads", getattr(torch.Tensor, attr)))
runtime._sum_flat = counted("flattens", runtime._sum_flat)

def in_step(fn):
    def wrapper(*a, **kw):
        inside[0] += 1
        if device == "cuda" and inside[0] == 1:  # a synchronizing CUDA call in the runtime's step raises
            torch.cuda.set_sync_debug_mode("error")
        try:
            return fn(*a, **kw)
        finally:
            inside[0] -= 1
            if device == "cuda" and inside[0] == 0:
                torch.cuda.set_sync_debug_mode("default")
    return wrapper

# plan() is left out: the sample order is a CPU permutation (torch.randperm), read to a list once an epoch
for name in ("batch", "sync_gradients", "clip_grad_norm_", "step_done"):
    setattr(runtime.Runtime, name, in_step(getattr(runtime.Runtime, name)))
step_done = runtime.Runtime.step_done

def step_done_counted(self, *a, **kw):
    counts["steps"] += 1
    return step_done(self, *a, **kw)

runtime.Runtime.step_done = step_done_counted


def main():
    result = trainer.train(cfg)
    print(json.dumps({**counts, "loss": result["loss"]}))


from training.process_exit import run_and_exit
run_and_exit(main)  # a process that ran gloo collectives (training/process_exit.py)
"""


def run_counted(tmp_path, parallelism: str, steps: int = 4, device: str = "cpu") -> dict:
    """trainer.train in a world of one with the counts above (on CUDA: sync debug mode "error" in the step)."""
    (tmp_path / "ft").mkdir()
    r = subprocess.run([PY, "-c", SCRIPT, str(tmp_path), parallelism, str(steps), device], cwd=ROOT,
                       env=cli_env(OPENPOD_FT_DIR=str(tmp_path / "ft")), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("parallelism", ["ddp", "fsdp"])
def test_a_step_in_a_world_of_one_neither_flattens_the_gradients_nor_reads_the_device(tmp_path, parallelism):
    """Failed on the old code: every step read the loss and the stop flag to the host (2 reads per step) and,
    under DDP, flattened the gradients into one buffer and copied them back (1 ``_sum_flat`` per step)."""
    out = run_counted(tmp_path, parallelism)
    assert out["steps"] == 4
    # the loss is read once, by finish(), outside the steps (the old code: ddp 4 flattens, 8 reads; fsdp 0, 8)
    assert (out["flattens"], out["host_reads"]) == (0, 0)
    assert isinstance(out["loss"], float)
