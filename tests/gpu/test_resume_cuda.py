"""Exact resume on CUDA (NCCL): every parallelism, every staging mode, every tier the restore can come from.

A run killed around step 20 (checkpoints every 10) and rerun must end bit-identical to the uninterrupted run: same
``state_sha256`` and loss. On an H100 at ca277c7, fsdp with overlapped staging (the default) did not: the staged
DTensors had been copied to the GPU before the deferred device-to-host copy filled them (issue 22;
tests/training/test_staging.py pins the cause on CPU). World 1 runs on any one GPU; the 2-rank cases need two.
"""

from __future__ import annotations

import shutil

import pytest

from tests.training.conftest import cli_env, failure_text, last_json, run_cli, train_args

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

STEPS, EVERY = 30, 10
# Where each incarnation dies, so the rerun must restore from the tier under test (the faster tiers are removed
# first). Rank 0 is held before step 22 (OPENPOD_HOOK_WAIT, a file that never appears) until the kill lands:
# after step 20's commit in the memory tier (and nvme, written by the same DCP write), or when the promoter starts
# step 20's promotion - the promoter is sequential, so step 10 is then committed in fsx and s3.
KILLS = {"memory": ("after_commit@20", 20), "nvme": ("after_commit@20", 20), "fsx": ("during_promote@20", 10),
         "s3": ("during_promote@20", 10)}
_baselines: dict = {}


def _args(tmp, parallelism: str, nproc: int, overlap: bool, extra=()):
    extra = [*extra, "--parallelism", "fsdp" if parallelism == "tp" else parallelism, "--no-peer-replication"]
    if parallelism == "tp":
        extra += ["--tp", str(nproc)]
    if not overlap:
        extra.append("--no-overlap-staging")
    return train_args(tmp, steps=STEPS, every=EVERY, nproc=nproc, seed=0, extra=extra)


def _baseline(tmp_path_factory, parallelism: str, nproc: int) -> dict:
    key = (parallelism, nproc)
    if key not in _baselines:
        tmp = tmp_path_factory.mktemp(f"baseline-{parallelism}-{nproc}")
        r = run_cli(_args(tmp, parallelism, nproc, overlap=True), timeout=600)
        assert r.returncode == 0, failure_text(r)
        _baselines[key] = last_json(r.stdout)
    return _baselines[key]


def _killed_then_resumed(tmp, parallelism, nproc, overlap, tier, extra=()):
    if tier == "nvme":
        extra = [*extra, "--nvme-dir", str(tmp / "nvme")]
    args = _args(tmp, parallelism, nproc, overlap, extra)
    kill, restored = KILLS[tier]
    r = run_cli(args, env=cli_env(OPENPOD_KILL_AT=kill, OPENPOD_HOOK_WAIT=f"22@{nproc}@{tmp / 'never'}"),
                timeout=600)
    assert r.returncode != 0, f"the kill at {kill} did not fire\n{r.stderr[-2000:]}"
    faster = {"memory": [], "nvme": ["shm"], "fsx": ["shm"], "s3": ["shm"]}[tier]
    for d in faster:  # the restore must come from ``tier``: remove the tiers it would prefer
        shutil.rmtree(tmp / d)
    if tier == "s3":
        for p in (tmp / "ck").glob("step_*"):
            shutil.rmtree(p)
    r = run_cli(args, timeout=600)
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["restored_step"] == restored and tier in str(out["restored_from"]), \
        (out["restored_step"], out["restored_from"])
    return out


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "no-overlap"])
@pytest.mark.parametrize("tier", ["memory", "nvme", "fsx"])
@pytest.mark.parametrize("parallelism", ["ddp", "fsdp", "hsdp"])
def test_world1_resume_is_exact(tmp_path, tmp_path_factory, parallelism, tier, overlap):
    base = _baseline(tmp_path_factory, parallelism, 1)
    out = _killed_then_resumed(tmp_path, parallelism, 1, overlap, tier)
    assert (out["state_sha256"], out["loss"]) == (base["state_sha256"], base["loss"])


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "no-overlap"])
def test_world1_fsdp_resume_from_s3_is_exact(tmp_path, tmp_path_factory, bucket, moto_s3, overlap):
    base = _baseline(tmp_path_factory, "fsdp", 1)
    s3 = ["--s3-uri", f"s3://{bucket}/job", "--s3-endpoint-url", moto_s3, "--s3-every", "1"]
    out = _killed_then_resumed(tmp_path, "fsdp", 1, overlap, "s3", s3)
    assert (out["state_sha256"], out["loss"]) == (base["state_sha256"], base["loss"])


@pytest.mark.gpus(2)
@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "no-overlap"])
@pytest.mark.parametrize("parallelism", ["ddp", "fsdp", "hsdp", "tp"])
def test_two_ranks_resume_is_exact(tmp_path, tmp_path_factory, parallelism, overlap):
    base = _baseline(tmp_path_factory, parallelism, 2)
    out = _killed_then_resumed(tmp_path, parallelism, 2, overlap, "memory")
    assert (out["state_sha256"], out["loss"]) == (base["state_sha256"], base["loss"])
