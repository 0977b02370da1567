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


def _budget_warning(tmp_path, monkeypatch, caplog, *, snapshots_fit, tiers, peer=False, keep=1):
    """The memory tier's warning at the first save, its file system made to hold ``snapshots_fit`` snapshots."""
    import logging

    from training.checkpoint import Checkpointer, budget
    from training.config import CheckpointConfig, TierConfig
    from tests.training.test_checkpoint import make_model, train

    model, opt = make_model()
    snapshot = sum(t.numel() * t.element_size() for t in list(model.parameters()) * 3)  # params + 2 Adam moments
    real = budget.shutil.disk_usage
    monkeypatch.setattr(budget.shutil, "disk_usage", lambda p: real(p)._replace(total=int(snapshot * snapshots_fit)))
    cfg = CheckpointConfig(every=1, peer_replication=peer, direct_durable=False, tiers=[
        TierConfig("memory", str(tmp_path / "shm"), keep=keep),
        *(TierConfig(kind, str(tmp_path / kind), every=every) for kind, every in tiers)])
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scratch")
    train(model, opt)
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        ck.save(1, model, opt)
        ck.flush()
    ck.close()
    return ck.stats.memory_tier_short, [r.getMessage() for r in caplog.records if "need about" in r.getMessage()]


def test_the_memory_budget_counts_the_steps_pinned_for_the_further_tiers_copies(tmp_path, monkeypatch, caplog):
    """Memory keeps 1 step; NVMe (every 4th save) and FSx (every save) are copied from it. Besides the step kept
    and the one being written, a lagging FSx pins the step it copies and its fallback (the step the waiting one
    replaced: older than memory's one step), and a lagging NVMe the step it copies, the one waiting (due every 4th
    save: older than memory's newest) and its fallback: 7 snapshots. On the old code 2 were counted: a /dev/shm of
    6.5 snapshots passed the check and filled up once the tiers lagged."""
    short, msgs = _budget_warning(tmp_path, monkeypatch, caplog, snapshots_fit=6.5, tiers=[("nvme", 4), ("fsx", 1)])
    assert short
    (msg,) = msgs
    assert ("1 local rank(s) x (1 snapshot(s) + 1 being written) + 5 snapshot(s) pinned for copies to further "
            "tiers need about") in msg


def test_the_memory_budget_counts_no_buddy_copies_on_a_single_node(tmp_path, monkeypatch, caplog):
    """Peer replication on, one node: no buddy sends this node a copy (``buddy_of`` is None). On the old code the
    check counted 2 buddy copies and warned about a /dev/shm of 4.5 snapshots, which holds the 2 kept, the one
    being written and the one FSx's copy may pin."""
    short, msgs = _budget_warning(tmp_path, monkeypatch, caplog, snapshots_fit=4.5, tiers=[("fsx", 1)], peer=True,
                                  keep=2)
    assert not short and msgs == []
