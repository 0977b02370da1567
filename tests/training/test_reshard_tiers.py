"""Resharding from the node-local tiers: a job restarted on another world size resumes from the newest step in node
memory when every old rank's shards of it can be read there, and says so when it has to go back to an older step."""

import shutil

import pytest

from tests.training.conftest import cli_env, failure_text, last_json, run_cli, train_args

pytestmark = [pytest.mark.slow]

# FSx gets every 2nd checkpoint (steps 10, 20): step 15 exists only in node memory when the job dies staging step 20
# (save() first waits for step 15's write, so both ranks committed it there).
EXTRA = ["--parallelism", "fsdp", "--fsx-every", "2"]


def _args(job, nproc):
    return train_args(job, steps=20, nproc=nproc, extra=EXTRA)


@pytest.fixture(scope="module")
def killed(tmp_path_factory, fsdp_baseline):
    """(the loss of an uninterrupted 2-rank FSDP2 run, a 2-rank job killed while staging step 20). The shared FSDP2
    baseline is that run: how often FSx gets a checkpoint does not change the training."""
    tmp = tmp_path_factory.mktemp("reshard-tiers")
    want = fsdp_baseline.result["loss"]
    r = run_cli(_args(tmp / "job", 2), env=cli_env(OPENPOD_KILL_AT="during_stage@20"))
    assert r.returncode != 0, r.stderr[-2000:]
    for rank in (0, 1):
        assert list((tmp / "job/shm").glob(f"*/step_000000015/rank_{rank:05d}.commit.json")), rank
    assert not (tmp / "job/ck/step_000000015").exists() and (tmp / "job/ck/step_000000010").exists()
    return want, tmp / "job"


def test_fsdp_job_reshards_from_node_memory_onto_one_rank(killed, tmp_path):
    """Failed on the old code: it resumed from FSx's step 10 (only FSx/S3 could be resharded) without saying that
    the newer step 15 was in node memory."""
    want, job = killed
    shutil.copytree(job, tmp_path / "job", symlinks=True)
    r = run_cli(_args(tmp_path / "job", 1))
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert (out["world_size"], out["restored_step"]) == (1, 15), out
    assert out["restored_from"].startswith("memory:"), out["restored_from"]
    assert "(saved by 2 ranks) onto 1 ranks" in r.stderr
    assert out["checkpoints"]["restored_older"] == 0
    assert out["loss"] == pytest.approx(want, rel=1e-4)


def test_missing_shards_fall_back_to_the_newest_durable_step_and_say_so(killed, tmp_path):
    """Rank 1's snapshots in node memory are gone (its node was lost, no buddy held them): the job resumes from
    step 10, the newest one whose shards FSx completes, and says, in one line and a counter, that step 15 could not
    be assembled. Failed on the old code: it went back to step 10 without a word."""
    want, job = killed
    shutil.copytree(job, tmp_path / "job", symlinks=True)
    for d in (tmp_path / "job/shm").glob("*/step_*"):  # every snapshot of rank 1 in node memory
        (d / "rank_00001.commit.json").unlink()
        shutil.rmtree(d / "rank_00001")
    r = run_cli(_args(tmp_path / "job", 1))
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    # rank 0's shards of step 10 from node memory, rank 1's from FSx
    assert out["restored_step"] == 10 and "fsx:" in out["restored_from"], out
    lines = [ln for ln in r.stderr.splitlines() if "newest checkpoint step 15" in ln]
    assert len(lines) == 1 and "rank 1 of 2" in lines[0] and "resuming from step 10" in lines[0], lines
    assert out["checkpoints"]["restored_older"] == 1
    assert out["loss"] == pytest.approx(want, rel=1e-4)


def test_two_nodes_reshard_from_each_others_memory_over_the_peer_channel(killed, tmp_path):
    """Two nodes of one FSDP2 rank each die staging step 20; their buddy copies are gone too. Restarted as HSDP
    (each rank now holds the whole state), each rank reads its own old shards from its node's memory and the other
    node's over the peer channel, and both resume from step 15. Failed on the old code: step 10 from FSx."""
    from tests.conftest import free_port
    from tests.training.conftest import PY, spawn

    want, _ = killed

    def agent(node, port, parallelism):
        return [PY, "-m", "training", "run", "--model", "tiny", "--steps", "20", "--checkpoint-every", "5",
                "--checkpoint-dir", str(tmp_path / "ck"), "--memory-dir", str(tmp_path / "shm"),
                "--nproc-per-node", "1", "--seed", "1", "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
                "--rdzv-id", "job", "--node-id", node, "--rdzv-last-call", "1", "--parallelism", parallelism,
                "--fsx-every", "2"]

    port = free_port()
    procs = [spawn(agent(n, port, "fsdp"), env=cli_env(OPENPOD_KILL_AT="during_stage@20"),
                   log=tmp_path / f"{n}-1.err") for n in "ab"]
    for p in procs:
        p.wait(timeout=120)
        assert p.returncode != 0
    held = {n: [p.name for p in (tmp_path / f"shm/{n}/step_000000015").glob("rank_*.commit.json")] for n in "ab"}
    assert sorted(held["a"] + held["b"]) == ["rank_00000.commit.json", "rank_00001.commit.json"], held
    assert not (tmp_path / "ck/step_000000015").exists()
    for held in tmp_path.glob("shm/*.held"):
        shutil.rmtree(held)
    port = free_port()
    procs = {n: spawn(agent(n, port, "hsdp"), env=cli_env(), log=tmp_path / f"{n}-2.err") for n in "ab"}
    outs = {n: last_json(p.communicate(timeout=180)[0]) for n, p in procs.items()}
    for n, out in outs.items():
        assert out["restored_step"] == 15, (n, out, (tmp_path / f"{n}-2.err").read_text()[-3000:])
        assert "peer:127.0.0.1:" in out["restored_from"] and out["checkpoints"]["restored_older"] == 0, out
        assert out["loss"] == pytest.approx(want, rel=1e-4)
    assert outs["a"]["state_sha256"] == outs["b"]["state_sha256"]


def test_reshards_from_the_nvme_tier_when_node_memory_is_empty(killed, tmp_path):
    """The node rebooted (memory empty) but its NVMe tier holds step 15 of both old ranks: 1 rank reshards from there.
    Failed on the old code: step 10 from FSx."""
    want, job = killed
    shutil.copytree(job, tmp_path / "job", symlinks=True)
    shutil.move(tmp_path / "job/shm", tmp_path / "job/nvme")  # same per-node layout: <dir>/<node>/step_*/rank_*
    for data_cache in (tmp_path / "job/nvme").glob("data-cache"):
        shutil.rmtree(data_cache)
    r = run_cli(_args(tmp_path / "job", 1) + ["--nvme-dir", str(tmp_path / "job/nvme")])
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["restored_step"] == 15 and out["restored_from"].startswith("nvme:"), out
    assert out["loss"] == pytest.approx(want, rel=1e-4)
