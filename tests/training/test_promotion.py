"""The promoter's per-tier queue: one step waiting per further tier (the newest due there), and the fallback a tier
gets when that step's copy fails."""

import logging
import threading

import pytest

from training.checkpoint import Checkpointer, DirTier, promotion, storage
from training.config import CheckpointConfig, TierConfig
from tests.training.test_checkpoint import make_model, train


def _checkpointer(tmp_path, memory_keep=1):
    """Memory then FSx, FSx copied by the promoter (not written beside memory), quick retries."""
    cfg = CheckpointConfig(every=2, peer_replication=False, direct_durable=False, promote_retry_s=0.01,
                           tiers=[TierConfig("memory", str(tmp_path / "shm"), keep=memory_keep),
                                  TierConfig("fsx", str(tmp_path / "fsx"), keep=2)])
    return Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scratch")


def _steps(root):
    return [m.step for m in DirTier("x", root).markers()]


def _save(ck, model, opt, steps):
    for s in steps:
        train(model, opt)
        ck.save(s, model, opt)
        ck.wait()  # committed in memory and handed to the promoter


@pytest.fixture
def fsx_puts(monkeypatch):
    """Copies into FSx: ``hold`` (a step) blocks there until ``release`` is set; ``entered`` is set when it does."""
    entered, release, hold = threading.Event(), threading.Event(), []
    real = storage.put_fault

    def put_fault(kind, step, rank):
        if kind == "fsx" and step in hold:
            entered.set()
            assert release.wait(30)
        real(kind, step, rank)

    monkeypatch.setattr(storage, "put_fault", put_fault)
    yield hold, entered, release
    release.set()


def test_a_failed_copy_falls_back_to_the_newest_step_it_replaced(tmp_path, monkeypatch, caplog, fsx_puts):
    """While FSx copies step 2, step 4 waits and step 6 replaces it; step 6's copy then fails (every try). On the
    old code FSx stayed at step 2 (and the memory tier, keep 1, had dropped step 4): one failed copy put a tier any
    number of saves behind. Now FSx gets step 4, which memory kept for it; the lag and ``behind`` still say step 6
    is missing there, and the pin is gone once a newer step is copied."""
    hold, entered, release = fsx_puts
    hold.append(2)
    monkeypatch.setenv("OPENPOD_FAULT_PUT", "fsx@6@0")  # training/faults.py: every try of step 6 into fsx fails
    model, opt = make_model()
    ck = _checkpointer(tmp_path)
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        _save(ck, model, opt, [2])
        assert entered.wait(30)  # FSx's copy of step 2 is under way
        _save(ck, model, opt, [4, 6])
        assert _steps(tmp_path / "shm/n0") == [6, 4, 2]  # 2 is being copied, 4 may be needed: both kept
        release.set()
        ck.flush()
    assert _steps(tmp_path / "fsx") == [4, 2]
    assert "falls back to step 4 after step 6's copy failed" in caplog.text
    assert ck.stats.promote_failed == {"fsx": 1} and ck.stats.behind == {"fsx": 6}
    assert ck.promoter.lag() == {"fsx": 1}  # step 6, due on FSx, is not there
    assert _steps(tmp_path / "shm/n0") == [6]  # memory back to its keep
    _save(ck, model, opt, [8])
    ck.flush()
    ck.close()
    assert _steps(tmp_path / "fsx") == [8, 4] and ck.stats.behind == {} and ck.promoter.lag() == {"fsx": 0}
    assert _steps(tmp_path / "shm/n0") == [8]


def test_an_empty_tier_gets_the_newest_step_first_and_the_older_one_if_that_fails(tmp_path, monkeypatch, caplog):
    """A tier with nothing yet whose copy thread has not run (a loaded machine: it runs at nice 19) sees step 4
    replace step 2: it copies step 4 first, no later than it would have begun step 2, and never step 2 after it.
    Keeping step 2 instead would not shorten the time the tier holds nothing (its first copy begins when the
    thread runs, whichever step waits), it would only make that copy an older one. If step 4's copy fails, the
    tier gets step 2 (on the old code it stayed empty)."""
    started = threading.Event()
    real = promotion.background_priority

    def held():
        assert started.wait(30)
        real()

    monkeypatch.setattr(promotion, "background_priority", held)  # the copy threads start, then wait here
    monkeypatch.setenv("OPENPOD_FAULT_PUT", "fsx@40@0")
    for base, failing in ((tmp_path / "ok", 4), (tmp_path / "failed", 40)):
        started.clear()
        model, opt = make_model()
        ck = _checkpointer(base)
        with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
            _save(ck, model, opt, [2, failing])
            started.set()
            ck.flush()
        ck.close()
        if failing == 4:
            assert _steps(base / "fsx") == [4] and _steps(base / "shm/n0") == [4]
            assert ck.stats.promoted == {"fsx": 1}  # step 2 was never copied
        else:
            assert _steps(base / "fsx") == [2] and ck.stats.behind == {"fsx": 40}
            assert ck.promoter.lag() == {"fsx": 19}  # saves every 2 steps: 38 steps = 19 saves


def test_a_fallback_read_from_the_direct_nvme_tier_is_kept_there_until_it_is_copied(tmp_path, monkeypatch, caplog,
                                                                                      fsx_puts):
    """Memory, NVMe written beside it (direct) and FSx, NVMe keeping one step. Step 4 does not fit in memory, so
    FSx is to get it from NVMe; while FSx copies step 2, step 6 replaces step 4 there and step 4 becomes FSx's
    fallback, read from NVMe. Step 6's copy fails. On the old code NVMe's retention (keep 1) deleted step 4 when
    step 6 was committed there: the fallback found nothing to copy and FSx stayed at step 2. Now NVMe keeps step 4
    until its copy is done, then drops it."""
    hold, entered, release = fsx_puts
    hold.append(2)
    monkeypatch.setenv("OPENPOD_FAULT_ENOSPC", "memory@4")
    monkeypatch.setenv("OPENPOD_FAULT_PUT", "fsx@6@0")
    cfg = CheckpointConfig(every=2, peer_replication=False, direct_durable=True, promote_retry_s=0.01,
                           tiers=[TierConfig("memory", str(tmp_path / "shm"), keep=1),
                                  TierConfig("nvme", str(tmp_path / "nvme"), keep=1),
                                  TierConfig("fsx", str(tmp_path / "fsx"), keep=2)])
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scratch")
    model, opt = make_model()
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        _save(ck, model, opt, [2])
        assert entered.wait(30)  # FSx's copy of step 2 is under way
        _save(ck, model, opt, [4, 6])
        assert _steps(tmp_path / "nvme/n0") == [6, 4]  # 4 may be needed by FSx: kept past NVMe's keep
        release.set()
        ck.flush()
    assert "falls back to step 4 after step 6's copy failed" in caplog.text
    assert _steps(tmp_path / "fsx") == [4, 2]
    assert ck.stats.behind == {"fsx": 6}
    assert _steps(tmp_path / "nvme/n0") == [6]  # the pin is gone once step 4 is in FSx
    ck.close()
