"""A training step in a world of one on CUDA makes no synchronizing CUDA call in the runtime (issue 22, Build 4):
the host keeps queueing the next step's kernels while the GPU runs, as a plain torch loop does. The runtime's
per-step calls run under ``torch.cuda.set_sync_debug_mode("error")``; the CPU twin is
tests/training/test_step_overhead.py."""

from __future__ import annotations

import pytest

from tests.training.test_step_overhead import run_counted

pytestmark = [pytest.mark.gpu]


@pytest.mark.parametrize("parallelism", ["ddp", "fsdp"])
def test_a_cuda_step_in_a_world_of_one_never_waits_for_the_device(tmp_path, parallelism):
    out = run_counted(tmp_path, parallelism, device="cuda")
    assert (out["steps"], out["flattens"], out["host_reads"]) == (4, 0, 0)
