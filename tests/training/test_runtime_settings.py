"""Process-group timeout against the slowest documented restore, and what deterministic CUDA needs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import training.runtime as runtime
from training.config import DataConfig, RunConfig

ROOT = Path(__file__).resolve().parents[2]
SLOWEST_RESTORE_SECONDS = 242  # S3 restore of the xl state, docs/training.md "Benchmarks" (measured here)


class Captured(Exception):
    pass


def test_the_process_group_outwaits_the_slowest_restore_with_its_retries(tmp_path, monkeypatch):
    """Failed on the old code: the group was created with a fixed 120 s timeout."""
    seen = {}

    def init_process_group(backend, **kw):
        seen.update(kw)
        raise Captured

    monkeypatch.setattr(runtime.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(runtime.dist, "init_process_group", init_process_group)
    for k in ("RANK", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(k, raising=False)
    cfg = RunConfig(model="tiny", steps=1, seed=0, run_dir=str(tmp_path / "run"),
                    data=DataConfig(data_dir=str(tmp_path / "data")), device="cpu")
    with pytest.raises(Captured):
        runtime.Runtime(cfg)
    attempts = cfg.checkpoint.source_attempts
    retry_sleeps = sum(range(1, attempts))
    assert seen["timeout"].total_seconds() == cfg.pg_timeout_seconds
    assert cfg.pg_timeout_seconds > attempts * SLOWEST_RESTORE_SECONDS + retry_sleeps


def test_deterministic_mode_sets_the_cublas_workspace(monkeypatch):
    import training.trainer as trainer

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(trainer, "Runtime", lambda cfg: (_ for _ in ()).throw(Captured()))
    monkeypatch.setattr(trainer, "deterministic_algorithms", lambda: None)
    with pytest.raises(Captured):
        trainer.train(None)
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_deterministic_mode_does_not_import_inductor_yet_a_later_compile_is_deterministic():
    """Failed on the old code: torch.use_deterministic_algorithms imported torch._inductor in every worker (about
    2 s of each start-up on the 2-core CI machine) for a setting only torch.compile reads."""
    code = ("import sys, torch; from training.trainer import prepare; prepare(); "
            "before = 'torch._inductor' in sys.modules; "
            "import torch._inductor.config as c; "
            "print(before, torch.are_deterministic_algorithms_enabled(), "
            "torch.is_deterministic_algorithms_warn_only_enabled(), c.deterministic)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_DETERMINISTIC"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "True", "False", "True"]
