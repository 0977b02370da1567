"""Issue 24: full or unwritable storage, and a killed launcher - one clear line or a warning, never a traceback
or workers left behind."""

import errno
import os

import pytest

from training.checkpoint.budget import MemoryBudget
from training.ft.heartbeat import Heartbeat, read_beats


def test_a_small_memory_tier_is_not_reported_as_zero_gib(tmp_path):
    """Failed on the old code: 'need about 0.0 GiB, but its file system holds 0.0 GiB'."""
    text = MemoryBudget(need=96 << 20, total=64 << 20, free=3 << 10).message(tmp_path, 2, 8, False)
    assert "0.0 GiB" not in text
    assert "need about 96.0 MiB" in text and "holds 64.0 MiB (3.0 KiB free)" in text


def test_a_full_disk_costs_a_heartbeat_not_the_training(tmp_path, monkeypatch, caplog):
    """Failed on the old code: ENOSPC writing the beat raised out of the training step."""
    hb = Heartbeat(tmp_path, 0)
    real = os.replace

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    hb.beat(1)
    hb.beat(2)
    assert caplog.text.count("writing heartbeat") == 1  # warned once
    monkeypatch.setattr(os, "replace", real)
    hb.beat(3)
    assert [b.step for b in read_beats(tmp_path)] == [3]


def test_a_full_checkpoint_dir_at_start_is_one_clear_line(tmp_path, monkeypatch):
    """Failed on the old code: a rerun on a full FSx died with a traceback writing the run's config (ENOSPC)."""
    from click.testing import CliRunner

    import training.cli as cli

    def full(path, obj):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli, "write_json_atomic", full)
    r = CliRunner().invoke(cli.main, ["run", "--model", "tiny", "--steps", "2", "--nproc-per-node", "1",
                                      "--checkpoint-dir", str(tmp_path / "ck"), "--memory-dir", str(tmp_path / "shm")])
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit), r.output
    last = r.output.strip().splitlines()[-1]
    assert last.startswith(f"error: --checkpoint-dir: cannot write {tmp_path}/ck/run/config-") and \
        "No space left on device" in last, r.output


@pytest.mark.slow
def test_killing_the_launcher_alone_ends_torchrun_and_its_workers(tmp_path):
    """Issue 24, failed on the old code: SIGKILL of the launcher left torchrun and its workers training,
    unsupervised, into the same checkpoint tiers."""
    import signal
    import socket
    import subprocess
    import time

    from tests.training.conftest import cli_env, kill_group, spawn, train_args, wait_for

    p = spawn(train_args(tmp_path, steps=100000, every=1000), env=cli_env(), log=tmp_path / "run.err")
    ft = tmp_path / "ck/run/ft" / socket.gethostname()
    try:
        wait_for(lambda: len(list(ft.glob("pid-*"))) == 2, "both workers started", timeout=120)
        workers = [int(f.read_text()) for f in ft.glob("pid-*")]
        os.kill(p.pid, signal.SIGKILL)  # the launcher alone, not its process group
        p.wait(timeout=10)

        def gone(pid):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its reaper is gone too
                return f.read().split(") ")[1][0] == "Z"

        wait_for(lambda: all(gone(w) for w in workers), "the workers to die with the launcher", timeout=30)
        out = subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True, text=True).stdout.split()
        wait_for(lambda: not subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True).stdout.strip(),
                 f"torchrun to die with the launcher (left: {out})", timeout=30)
    finally:
        kill_group(p)
