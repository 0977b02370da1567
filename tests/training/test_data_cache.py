"""The data-loader cache: a restarted worker maps the data set's shards from node memory.

The first run's workers copy each shard once into ``MEMORY_DIR/data-cache`` (node memory; on EKS the
job's host ``/dev/shm`` directory, which outlives the pod); then the node's processes die, once step 10
is checkpointed. The data set's shard files are removed from the shared file system: the rerun's new
worker processes find every shard in the cache, read nothing of the data set but its index, and end
bit-identical to an uninterrupted run.
"""

import pytest

from tests.training.conftest import cli_env, failure_text, last_json, run_cli, train_args

pytestmark = [pytest.mark.slow]


def test_a_restarted_worker_reads_the_data_set_from_the_node_memory_cache(tmp_path, baseline):
    args = train_args(tmp_path)
    r = run_cli(args, env=cli_env(OPENPOD_KILL_AT="after_commit@10@1"))
    assert r.returncode != 0, f"the kill hook did not fire\n{r.stderr[-2000:]}"
    (cache,) = (tmp_path / "shm" / "data-cache").iterdir()
    assert sorted(p.name for p in cache.iterdir()) == [f"shard_{i:05d}.bin" for i in range(6)]

    shards = sorted((tmp_path / "ck" / "data").glob("shard_*.bin"))
    assert len(shards) == 6
    for p in shards:
        p.unlink()  # the shared copy is unreachable: only the node-memory copies are left
    r = run_cli(args)
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["restored_step"] == 10 and out["step"] == 20
    assert out["data_cache"]["filled"] == 0 and out["data_cache"]["uncached"] == 0
    assert out["data_cache"]["hit"] == 6 and out["data_cache"]["dir"] == str(cache)
    assert out["state_sha256"] == baseline["state_sha256"]


def test_data_cache_gib_0_turns_it_off_and_a_negative_size_is_a_usage_error(tmp_path):
    from training.cli import check_run_args

    base = ["--checkpoint-dir", str(tmp_path / "ck"), "--steps", "5"]
    assert check_run_args([*base, "--data-cache-gib", "0"]) == []
    assert check_run_args([*base, "--data-cache-gib", "-1"]) == ["--data-cache-gib: must be >= 0 (0: off), got -1.0"]


def test_the_default_cache_size_follows_the_containers_memory_limit():
    from training.cli import default_data_cache_gib

    assert 0 < default_data_cache_gib() <= 16
