"""The checkpoint component in a plain FSDP2 script that is not openpod's trainer (training/examples)."""

import pytest

from tests.training.conftest import PY, ROOT, cli_env, failure_text, last_json, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("training-cli")]


def _run(d, env=None):
    return run_cli([PY, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                    str(ROOT / "training/examples/fsdp2_own_loop.py"), "--dir", str(d), "--steps", "20"],
                   env=env or cli_env())


def test_own_fsdp2_loop_killed_after_a_commit_resumes_exactly(tmp_path):
    """Model shards, optimizer, LR scheduler, RNG (dropout) and data position all come back."""
    r = _run(tmp_path / "a")
    assert r.returncode == 0, failure_text(r)
    want = last_json(r.stdout)
    r = _run(tmp_path / "b", cli_env(OPENPOD_KILL_AT="after_commit@10@1"))
    assert r.returncode != 0
    r = _run(tmp_path / "b")
    assert r.returncode == 0, failure_text(r)
    out = last_json(r.stdout)
    assert out["restored_step"] == 10
    assert (out["state_sha256"], out["loss"]) == (want["state_sha256"], want["loss"])
