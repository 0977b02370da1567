"""NCCL error handling per restart mode: what the launcher hands its workers, and the image default it overrides.

torch 2.13.0 (facts: torch.nccl-async-error-handling): TORCH_NCCL_ASYNC_ERROR_HANDLING=1 is TearDown, the watchdog
takes the process down on a failed collective (include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:160-176);
``_abort_process_group`` "should be used with TORCH_NCCL_ASYNC_ERROR_HANDLING turned off (i.e. set to 0)"
(torch/distributed/distributed_c10d.py:2469-2472). The training image sets 1; with ``--restart in-process`` the
survivors of a lost peer would be torn down instead of aborting and re-forming the group.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.training.test_image_facts import DOCKERFILE, env_value, final_stage
from training import cli, nccl_env


def test_the_image_tears_down_by_default_and_in_process_workers_get_no_handling():
    image = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": env_value(final_stage(DOCKERFILE.read_text()),
                                                         "TORCH_NCCL_ASYNC_ERROR_HANDLING")}
    assert image["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"  # process restart: torchrun restarts the node anyway
    assert nccl_env.worker_env(image, "process") == image
    got = nccl_env.worker_env({**image, "NCCL_ASYNC_ERROR_HANDLING": "1", "X": "y"}, "in-process")
    assert got == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "X": "y"}


@pytest.mark.parametrize("restart", ["in-process", "process"])
def test_the_launcher_hands_its_workers_the_mode_s_setting(tmp_path, monkeypatch, restart):
    """Failed on the old code for in-process: the workers inherited the image's 1 (TearDown)."""
    seen = {}

    def launched(cmd, env, **kw):
        seen.update(env)
        return 1, False

    import training.ft.inprocess as inprocess

    monkeypatch.setattr(inprocess, "supervise_ranks", launched)
    monkeypatch.setattr(cli, "_supervise", lambda cmd, env, *a: launched(cmd, env))
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")  # as in the training image
    r = CliRunner().invoke(cli.main, [
        "run", "--steps", "1", "--checkpoint-dir", str(tmp_path / "ck"), "--memory-dir", str(tmp_path / "shm"),
        "--num-samples", "24", "--restart", restart, "--nnodes", "1", "--max-restarts", "1"])
    assert r.exit_code == 1 and "training failed" in r.output, r.output
    assert seen["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == ("0" if restart == "in-process" else "1")
