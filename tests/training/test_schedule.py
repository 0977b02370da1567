"""The learning-rate schedule is part of the saved state: resuming with another --steps does not change it."""

import pytest

from tests.training.conftest import cli_env, failure_text, last_json, run_cli, train_args

pytestmark = [pytest.mark.slow]


def test_resuming_with_another_steps_keeps_the_lr_schedule(tmp_path):
    """Failed on the old code: the cosine decay was computed from the current --steps, so the incarnation
    started with --steps 15 decayed faster and the run ended in another state."""
    r = run_cli(train_args(tmp_path / "a", steps=20, nproc=1))
    assert r.returncode == 0, failure_text(r)
    want = last_json(r.stdout)
    job = tmp_path / "b"
    r = run_cli(train_args(job, steps=20, nproc=1), env=cli_env(OPENPOD_KILL_AT="after_commit@10"))
    assert r.returncode != 0  # killed once step 10 is committed
    r = run_cli(train_args(job, steps=15, nproc=1))  # resumed from step 10 with a shorter --steps
    assert r.returncode == 0, failure_text(r)
    assert last_json(r.stdout)["restored_step"] == 10, r.stderr[-3000:]
    r = run_cli(train_args(job, steps=20, nproc=1))
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["restored_step"] == 15
    assert out["state_sha256"] == want["state_sha256"]
