"""Tensor parallelism (``--tp``) on 4 CPU gloo ranks: a (dp 2 x tp 2) mesh, TP within a pair, FSDP2 across pairs.

Checkpoints hold each rank's DTensor shards through the same checkpointer; a job killed mid-run resumes bit-exactly,
and the same snapshots restore onto plain FSDP2 over 2 ranks (another mesh: resharded from node memory).
"""

import shutil

import pytest

from tests.training.conftest import cli_env, failure_text, last_json, run_cli, train_args

pytestmark = [pytest.mark.slow]

TP = ["--parallelism", "fsdp", "--tp", "2"]
# The global batch's 12 samples in one micro-batch per data-parallel rank (6 on each of the 2): the same samples and
# steps as with the default micro-batch of 2, in a third of the forward and backward passes, each of which runs
# the tensor-parallel collectives of every layer (4 ranks on the 2-core VM: 10 steps in 2.4 s instead of 4.9 s).
MICRO = ["--micro-batch", "6"]


def test_tp_run_killed_resumes_exactly_and_restores_onto_another_mesh(tmp_path):
    def args(d, nproc=4, extra=TP):
        return train_args(tmp_path / d, steps=10, nproc=nproc, extra=[*extra, *MICRO])

    r = run_cli(args("baseline"))
    assert r.returncode == 0, failure_text(r)
    want = last_json(r.stdout)
    assert (want["tp"], want["world_size"]) == (2, 4)
    r = run_cli(args("job"), env=cli_env(OPENPOD_KILL_AT="after_step@7"))
    assert r.returncode != 0, r.stderr[-2000:]
    shutil.copytree(tmp_path / "job", tmp_path / "other-mesh", symlinks=True)

    r = run_cli(args("job"))
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert (out["restored_step"], out["restored_from"][:7]) == (5, "memory:"), out
    assert (out["state_sha256"], out["loss"]) == (want["state_sha256"], want["loss"])

    r = run_cli(args("other-mesh", nproc=2, extra=["--parallelism", "fsdp"]))
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["restored_step"] == 5 and "(saved by 4 ranks) onto 2 ranks" in r.stderr, out
    assert out["loss"] == pytest.approx(want["loss"], rel=1e-4)
