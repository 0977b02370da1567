"""Issue 38 item 5: a run's identity is stored with its checkpoints, and one launch per directory at a time.

The old code resumed a --checkpoint-dir reused with another --seed or --global-batch silently (a larger batch
skipped 288 samples) and let two concurrent launches on one directory both run (28 failed saves)."""

from __future__ import annotations

import json
import time

import pytest

from tests.training.conftest import PY, cli_env, kill_group, run_cli, spawn, train_args, wait_for
from training import run_guard
from training.run_guard import RunGuardError, check_identity, identity


def _ident(tmp_path, **kw):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "index.json").write_text(kw.pop("index", '{"shards": 1}'))
    args = dict(model="tiny", seed=1, global_batch=8, num_samples=256, data_dir=data, parallelism="ddp", tp=1,
                shard_size=None)
    return identity(**{**args, **kw})


def test_a_resume_with_another_seed_batch_model_or_data_is_refused_in_one_line(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    assert check_identity(ck, _ident(tmp_path), allow_change=False) is None
    for change, said in (({"seed": 2}, "--seed 1 (this launch: 2)"),
                         ({"global_batch": 16}, "--global-batch 8 (this launch: 16)"),
                         ({"model": "small"}, "--model tiny (this launch: small)"),
                         ({"num_samples": 512}, "--num-samples 256 (this launch: 512)"),
                         ({"index": '{"shards": 2}'}, "data set index")):
        with pytest.raises(RunGuardError, match="holds another run: ") as e:
            check_identity(ck, _ident(tmp_path, **change), allow_change=False)
        assert said in str(e.value) and "--allow-identity-change" in str(e.value) and "\n" not in str(e.value)
    assert json.loads((ck / "run-identity.json").read_text())["seed"] == 1  # a refused launch records nothing


def test_elastic_resizes_and_parallelism_switches_stay_allowed(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    check_identity(ck, _ident(tmp_path), allow_change=False)
    for layout in ({"parallelism": "fsdp"}, {"parallelism": "hsdp", "shard_size": 2}, {"parallelism": "fsdp", "tp": 2}):
        assert check_identity(ck, _ident(tmp_path, **layout), allow_change=False) is None  # reshards on restore


def test_an_intended_change_is_recorded_with_its_history(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    check_identity(ck, _ident(tmp_path), allow_change=False)
    note = check_identity(ck, _ident(tmp_path, global_batch=16), allow_change=True)
    assert note == "run identity changed as asked (--allow-identity-change): --global-batch 8 (this launch: 16)"
    rec = json.loads((ck / "run-identity.json").read_text())
    assert rec["global_batch"] == 16 and rec["history"][0]["global_batch"] == 8
    assert check_identity(ck, _ident(tmp_path, global_batch=16), allow_change=False) is None


def test_a_directory_from_before_identities_is_compared_with_its_launch_config(tmp_path):
    ck = tmp_path / "ck"
    (ck / "run").mkdir(parents=True)
    (ck / "run" / "config-n0.json").write_text(json.dumps({"model": "tiny", "seed": 1, "data": {"global_batch": 8}}))
    with pytest.raises(RunGuardError, match=r"--seed 1 \(this launch: 3\)"):
        check_identity(ck, _ident(tmp_path, seed=3), allow_change=False)


def test_a_second_lock_on_one_directory_and_node_is_refused_and_freed_on_close(tmp_path):
    first = run_guard.lock(tmp_path, "node-0")
    with pytest.raises(RunGuardError, match=r"another launch is running on it \(pid \d+ on .*node node-0"):
        run_guard.lock(tmp_path, "node-0")
    other_node = run_guard.lock(tmp_path, "node-1")  # the same job's other node
    first.close()
    run_guard.lock(tmp_path, "node-0").close()
    other_node.close()


@pytest.mark.slow
def test_relaunching_a_directory_with_another_global_batch_is_refused_before_anything_runs(tmp_path):
    """(Another --seed on the generated data set was already refused by the data set check; on a data set of its
    own, --data-dir, it is refused here as tested above.)"""
    r = run_cli(train_args(tmp_path, steps=2, every=1, nproc=1, extra=["--global-batch", "8"]))
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_cli(train_args(tmp_path, steps=4, every=1, nproc=1, extra=["--global-batch", "16"]), timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr[-2000:]
    assert r.stderr.startswith(f"error: --checkpoint-dir {tmp_path / 'ck'} holds another run: --global-batch 8 "
                               "(this launch: 16)")


@pytest.mark.slow
def test_a_second_concurrent_launch_on_one_directory_is_refused(tmp_path):
    first = spawn(train_args(tmp_path, steps=100000, every=50, nproc=1, extra=["--node-id", "n0"]), env=cli_env(),
                  log=tmp_path / "first.log")
    try:
        wait_for(lambda: list((tmp_path / "ck" / "run").glob("config-*.json")), "the first launch's config", 120)
        t0 = time.monotonic()
        r = run_cli(train_args(tmp_path, steps=100000, every=50, nproc=1, extra=["--node-id", "n0"]), timeout=60)
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr[-2000:]
        assert "another launch is running on it" in r.stderr and time.monotonic() - t0 < 30
        assert first.poll() is None  # the first launch goes on
    finally:
        kill_group(first)
