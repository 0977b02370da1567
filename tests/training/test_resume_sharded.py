"""Exact resume of sharded (FSDP2 / HSDP) state: workers SIGKILLed at named points and at a random moment.

Each rank writes and restores only its own shards; ``state_sha256`` is of the full, unsharded state.
"""

import random
import time

import pytest

from tests.training.conftest import cli_env, failure_text, kill_group, last_json, run_cli, spawn, train_args

pytestmark = [pytest.mark.slow]

# HSDP: 2 replicas x 2 shards, each rank's 3 samples of a step in one micro-batch (the default 2 would make two
# passes, each with its collectives among 4 gloo ranks on the 2-core CI machine); the baseline splits them alike.
LAYOUTS = {"fsdp": (2, ["--parallelism", "fsdp"]),
           "hsdp": (4, ["--parallelism", "hsdp", "--shard-size", "2", "--micro-batch", "3"])}
# A kill while DCP writes the shards and one during promotion of the shards to the durable tier (FSDP2), and
# one rank dying after its files but before its marker (HSDP, where a replica's peer holds the same shards).
# Each layout also takes a random kill; every incarnation of a chain is a full start-up, so the points are
# split between the layouts (CI time) rather than run for both.
KILLS = {"fsdp": ["during_write@5", "during_promote@10"], "hsdp": ["before_commit@10@1"]}
# FSDP2 runs the shared FSDP2 baseline's 20 steps (tests/training/conftest.py: fsdp_baseline), HSDP its own 15.
STEPS = {"fsdp": 20, "hsdp": 15}
HOLD_BEFORE = {"during_write@5": 7, "before_commit@10@1": 12, "during_promote@10": 12}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_sharded_run_killed_at_points_and_at_random_resumes_exactly(tmp_path, layout, request):
    nproc, extra = LAYOUTS[layout]
    steps = STEPS[layout]

    def args(d):
        return train_args(tmp_path / d, steps=steps, nproc=nproc, extra=extra)

    if layout == "fsdp":  # the same run as the shared FSDP2 baseline
        want = request.getfixturevalue("fsdp_baseline").result
    else:
        r = run_cli(args("baseline"))
        assert r.returncode == 0, failure_text(r)
        want = last_json(r.stdout)

    for point in KILLS[layout]:
        hold = {"OPENPOD_HOOK_WAIT": f"{HOLD_BEFORE[point]}@{nproc}@{tmp_path / 'never'}"}
        r = run_cli(args("killed"), env=cli_env(OPENPOD_KILL_AT=point, **hold))
        assert r.returncode != 0 and "exit status -9" in r.stderr, \
            f"{point}: the kill hook did not fire\n{failure_text(r)}"
    delay = random.Random().uniform(4.0, 8.0)  # start-up is ~3 s: the kill lands in start-up, restore or training
    p = spawn(args("killed"), env=cli_env(), log=tmp_path / "random-kill.err")
    time.sleep(delay)
    kill_group(p)

    r = run_cli(args("killed"))
    assert r.returncode == 0, f"delay {delay:.2f}s\n{failure_text(r)}"
    out = last_json(r.stdout)
    assert out["restored_step"] >= 5, f"delay {delay:.2f}s: restarted from scratch"
    assert (out["state_sha256"], out["loss"]) == (want["state_sha256"], want["loss"]), f"delay {delay:.2f}s"
    for rank in range(nproc):  # every rank wrote its own shards to the durable tier
        assert (tmp_path / f"killed/ck/step_{steps:09d}/rank_{rank:05d}.commit.json").exists()


def test_fsdp_state_reshards_onto_a_different_world_size(tmp_path, fsdp_baseline):
    """2 FSDP2 ranks are killed after step 12; 3 ranks resume from the step-10 shards of 2 ranks in node memory
    (every new rank reads the pieces of its new shards from both old snapshots) and finish with the loss
    of an uninterrupted run (the shared FSDP2 baseline)."""
    def args(d, nproc):
        return train_args(tmp_path / d, steps=20, nproc=nproc, extra=["--parallelism", "fsdp"])

    want = fsdp_baseline.result
    r = run_cli(args("job", 2), env=cli_env(OPENPOD_KILL_AT="after_step@12"))
    assert r.returncode != 0, r.stderr[-2000:]
    r = run_cli(args("job", 3))
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert (out["world_size"], out["restored_step"]) == (3, 10)
    assert out["restored_from"].startswith("memory:")  # the node's memory holds both old ranks' shards of step 10
    assert "resharded" in r.stderr and "(saved by 2 ranks) onto 3 ranks" in r.stderr
    assert out["loss"] == pytest.approx(want["loss"], rel=1e-4)
