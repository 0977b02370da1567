"""Exact resume: 2 gloo workers SIGKILLed at named points (and at a random moment) end bit-identical."""

import random
import time

import pytest

from tests.training.conftest import cli_env, failure_text, kill_group, last_json, run_cli, spawn, train_args

pytestmark = [pytest.mark.slow]

# Each incarnation dies at the next point; the chain covers a kill while DCP writes a
# snapshot, after the files but before the commit marker (one rank only), between
# checkpoints, during promotion to the durable tier, and while staging.
KILLS = ["during_write@5", "before_commit@10@1", "after_step@13", "during_promote@15", "during_stage@20"]
# Writes and promotion run in background threads while training goes on. For those kills,
# rank 0 holds the job before the given step, so training cannot run past the next kill
# point (e.g. commit step 15 while rank 1 still writes step 10) before the kill lands.
HOLD_BEFORE = {"during_write@5": 7, "before_commit@10@1": 12, "during_promote@15": 17}


def test_killed_and_resumed_run_matches_the_uninterrupted_one(tmp_path, baseline):
    """Also the data-loader cache (moved here from its own kill-and-rerun test): after the first incarnation the
    data set's shard files are removed from the shared file system, so every later incarnation's new workers
    map the shards from the node-memory copies (``MEMORY_DIR/data-cache``; on EKS the job's host ``/dev/shm``
    directory, which outlives the pod) and read nothing of the data set but its index."""
    args = train_args(tmp_path)
    for i, point in enumerate(KILLS):
        extra = {}
        if point in HOLD_BEFORE:
            extra["OPENPOD_HOOK_WAIT"] = f"{HOLD_BEFORE[point]}@2@{tmp_path / 'never'}"
        r = run_cli(args, env=cli_env(OPENPOD_KILL_AT=point, **extra))
        assert r.returncode != 0, f"{point}: the kill hook did not fire\n{r.stderr[-2000:]}"
        # the hook's SIGKILL (training/faults.py), not another failure that also asks for a rerun
        assert "exit status -9); rerun the same command to resume" in r.stderr, failure_text(r)
        if i == 0:
            (cache,) = (tmp_path / "shm" / "data-cache").iterdir()
            assert sorted(p.name for p in cache.iterdir()) == [f"shard_{i:05d}.bin" for i in range(6)]
            shards = sorted((tmp_path / "ck" / "data").glob("shard_*.bin"))
            assert len(shards) == 6
            for p in shards:
                p.unlink()  # the shared copy is unreachable: only the node-memory copies are left
    r = run_cli(args)
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["step"] == 20 and out["restored_step"] == 15
    assert out["state_sha256"] == baseline["state_sha256"]
    assert out["loss"] == baseline["loss"]
    # on this CPU-only torch: forked workers here, exec'd ones in the baseline (training/agent.py), bit-identical
    assert (out["worker_start"], baseline["worker_start"]) == ("fork", "exec")
    assert out["data_cache"]["filled"] == 0 and out["data_cache"]["uncached"] == 0
    assert out["data_cache"]["hit"] == 6 and out["data_cache"]["dir"] == str(cache)
    g = out["goodput"]
    assert g["incarnations"] == len(KILLS) + 1 and g["seconds"]["replayed"] > 0 and 0 < g["goodput"] < 1
    assert (tmp_path / "ck/run/metrics.prom").read_text().count("openpod_training_seconds{") == 6


def test_random_kill_then_resume_matches(tmp_path, baseline):
    args = train_args(tmp_path)
    rng = random.Random()
    delay = rng.uniform(5.0, 9.0)  # start-up is ~4 s here: the kill lands during training or start-up
    p = spawn(args, env=cli_env(), log=tmp_path / "killed.err")
    time.sleep(delay)
    kill_group(p)
    r = run_cli(args)
    assert r.returncode == 0, f"delay {delay:.2f}s\n{failure_text(r)}"
    assert last_json(r.stdout)["state_sha256"] == baseline["state_sha256"], f"delay {delay:.2f}s"


def test_full_disk_fails_the_save_not_the_training(tmp_path, baseline):
    r = run_cli(train_args(tmp_path), env=cli_env(OPENPOD_FAULT_ENOSPC="memory@10"))
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["checkpoints"]["failed"] == 2 and "No space left on device" in out["checkpoints"]["last_error"]
    assert out["checkpoints"]["failed_ranks"] == [0, 1]  # every rank's save of step 10 failed: both counted
    assert "checkpoint of step 10 failed" in r.stderr
    assert out["state_sha256"] == baseline["state_sha256"]
    assert not (tmp_path / "ck/step_000000010").exists() and (tmp_path / "ck/step_000000020").exists()


def test_an_unreachable_s3_source_refuses_a_fresh_start_unless_allowed(tmp_path):
    """Failed on the old code: the S3 error was logged and the job silently trained from step 0."""
    s3 = ["--s3-uri", "s3://ckpt/job", "--s3-endpoint-url", "http://127.0.0.1:9"]  # nothing listens there
    env = cli_env(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1",
                  AWS_MAX_ATTEMPTS="1")
    r = run_cli(train_args(tmp_path, steps=5, nproc=1, extra=s3), env=env)
    assert r.returncode == 3, failure_text(r)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: checkpoint source s3:s3://ckpt/job (EndpointConnectionError") and \
        last.endswith("refusing to start from step 0, which could lose progress "
                      "(fix the source, or pass --allow-fresh-start)"), last
    assert "(attempt 3 of 3)" in r.stderr
    # --allow-tier-behind: its last step cannot reach S3 either (issue 38: without it, that ends in exit 4)
    r = run_cli(train_args(tmp_path, steps=5, nproc=1, extra=[*s3, "--allow-fresh-start", "--allow-tier-behind"]),
                env=env)
    assert r.returncode == 0, failure_text(r)
    assert "warning: the steps are done but the last checkpoint, step 5, is not durable in s3" in r.stderr
    assert last_json(r.stdout)["restored_step"] == 0
    assert "starting from step 0 although s3:s3://ckpt/job" in r.stderr
