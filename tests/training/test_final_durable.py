"""Issue 38: a finished job is finished only when its last step is durable in every shared tier."""

from __future__ import annotations

import pytest

from tests.training.conftest import cli_env, failure_text, last_json, run_cli, train_args

pytestmark = pytest.mark.slow


def _shared_steps(tmp, bucket, endpoint) -> tuple[list[int], list[int]]:
    from training.checkpoint.storage import DirTier, S3Tier

    return (DirTier("fsx", tmp / "ck").complete_steps(1),
            S3Tier(f"s3://{bucket}/job", endpoint_url=endpoint).complete_steps(1))


def test_a_kill_during_the_final_flush_is_promoted_by_the_rerun(tmp_path, moto_s3, bucket):
    """Failed on the old code: killed after its last step (10) was committed in node memory and before the
    promoter copied it on, the job was rerun: it restored step 10 from memory, ran no step, exited 0 and never
    promoted it - FSx and S3 stayed at step 5 (or none). The rerun now promotes it before it exits and says so; a rerun that
    cannot (S3 refuses the copy) says which tier is behind in one line and exits 4."""
    s3 = ["--s3-uri", f"s3://{bucket}/job", "--s3-endpoint-url", moto_s3, "--s3-every", "1"]
    # The NVMe tier is written beside memory, so FSx and S3 are both the promoter's.
    args = train_args(tmp_path, steps=10, every=5, nproc=1, extra=[*s3, "--nvme-dir", str(tmp_path / "nvme")])
    r = run_cli(args, env=cli_env(OPENPOD_KILL_AT="after_commit@10"))
    assert r.returncode != 0, "the kill did not fire"
    fsx, s3_steps = _shared_steps(tmp_path, bucket, moto_s3)
    assert 10 not in fsx and 10 not in s3_steps, (fsx, s3_steps)
    s3_had = s3_steps[0] if s3_steps else None  # step 5's S3 copy may not have finished either

    r = run_cli(args, env=cli_env(OPENPOD_FAULT_PUT="s3@10@0"))
    assert r.returncode == 4, failure_text(r)
    out = last_json(r.stdout)
    assert out["restored_step"] == 10 and "memory" in out["restored_from"], out
    ck = out["checkpoints"]
    assert ck["last_step"] == 10 and ck["promoted_last_step"] == ["fsx"], ck
    assert ck["durable"] == {"fsx": 10, "s3": s3_had} and ck["tiers_behind"] == {"s3": s3_had}, ck
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert line == ["error: the steps are done but the last checkpoint, step 10, is not durable in s3 (newest "
                    f"verified step: {s3_had if s3_had else 'none'}); rerun the same command to promote it (or pass "
                    "--allow-tier-behind)"], line
    # and for on-call (OpenpodJobEndedNotDurable): the job's metrics say which tier lacks its last step
    prom = (tmp_path / "ck" / "run" / "metrics.prom").read_text()
    assert 'openpod_checkpoint_final_step_not_durable{tier="s3"} 1.0' in prom, prom
    assert 'openpod_checkpoint_final_step_not_durable{tier="fsx"} 0.0' in prom, prom

    r = run_cli(args)
    assert r.returncode == 0, failure_text(r)
    ck = last_json(r.stdout)["checkpoints"]
    assert ck["promoted_last_step"] == ["s3"] and ck["durable"] == {"fsx": 10, "s3": 10}, ck
    assert 'openpod_checkpoint_final_step_not_durable{tier="s3"} 0.0' in (
        tmp_path / "ck" / "run" / "metrics.prom").read_text()
    assert ck["tiers_behind"] == {}, ck
    assert _shared_steps(tmp_path, bucket, moto_s3)[1][0] == 10


def test_the_line_for_a_tier_behind_and_its_flag():
    """The one line the launcher prints (error, exit 4; with --allow-tier-behind a warning, exit 0)."""
    from click.testing import CliRunner

    from training import cli

    result = {"checkpoints": {"last_step": 10, "tiers_behind": {"s3": None}}}
    assert cli._not_durable(result) == ("the steps are done but the last checkpoint, step 10, is not durable in s3 "
                                        "(newest verified step: none); rerun the same command to promote it (or "
                                        "pass --allow-tier-behind)")
    assert cli._not_durable({"checkpoints": {"last_step": 10, "tiers_behind": {}}}) is None
    assert cli._not_durable({"checkpoints": {}}) is None
    assert "--allow-tier-behind" in CliRunner().invoke(cli.main, ["run", "--help"]).output
