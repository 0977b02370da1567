"""Issue 24: full or unwritable storage at start and per step - one clear line or a warning, never a traceback."""

import errno
import os

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
