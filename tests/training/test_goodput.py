"""Goodput accounting across incarnations: productive vs replayed, rescheduling gap, Prometheus export."""

import json
import time

from training.goodput import Goodput


def test_ledger_accumulates_and_classifies_replayed_steps(tmp_path):
    g = Goodput(tmp_path, rank=0)
    g.training_starts()
    for step in range(10):
        g.step_done(step, 0.5)
    g.add("checkpoint_blocking", 0.25)
    g.persist()                                  # the process dies here, without finishing
    ledger = json.loads((tmp_path / "goodput.json").read_text())
    assert ledger["high_water_step"] == 10 and not ledger["finished"]

    time.sleep(0.05)
    g2 = Goodput(tmp_path, rank=0, started=time.time())  # the next incarnation resumes from step 6
    assert g2.seconds["rescheduling"] > 0
    with g2.phase("restore"):
        time.sleep(0.01)
    g2.training_starts()
    for step in range(6, 12):
        g2.step_done(step, 0.5)
    g2.persist(finished=True, checkpoint_failures=1)
    s = g2.summary()
    assert s["seconds"]["productive"] == 6.0     # steps 0-9 then 10-11
    assert s["seconds"]["replayed"] == 2.0       # steps 6-9 again
    assert s["seconds"]["checkpoint_blocking"] == 0.25 and s["seconds"]["restore"] >= 0.01
    assert s["incarnations"] == 2 and 0 < s["goodput"] < 1
    prom = (tmp_path / "metrics.prom").read_text()
    assert 'openpod_training_seconds{category="replayed"} 2.0' in prom
    assert "openpod_checkpoint_failures 1.0" in prom and "openpod_training_step 12.0" in prom


def test_only_rank_zero_writes_the_ledger(tmp_path):
    g = Goodput(tmp_path, rank=1)
    g.step_done(0, 0.1)
    g.persist(finished=True)
    assert not (tmp_path / "goodput.json").exists()


def test_a_full_disk_under_the_ledger_and_metrics_is_a_warning_not_a_crash(tmp_path, monkeypatch, caplog):
    """Failed on the old code: ENOSPC while writing the ledger raised out of persist() and killed rank 0."""
    import errno
    import os

    import training.goodput as goodput

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    g = Goodput(tmp_path, rank=0)
    g.training_starts()
    monkeypatch.setattr(goodput, "atomic_write", full)
    monkeypatch.setattr(goodput, "write_to_textfile", full)
    g.step_done(0, 0.5)
    g.persist()
    g.persist(finished=True)
    assert g.summary()["high_water_step"] == 1
    assert caplog.text.count("No space left on device") == 2  # one warning per file, not one per write
    assert "goodput ledger" in caplog.text and "training continues" in caplog.text


def test_a_forward_wall_clock_step_is_recorded_not_booked_as_start_up(tmp_path, monkeypatch, caplog):
    """Issue 38, failed on the old code: start-up was the wall-clock time from the process's start to its first
    step, so a 600 s step of the wall clock (NTP, a resumed VM) was booked as 600 s of start-up. It is measured on
    the boot clock now; the step is logged and kept in the ledger."""
    import logging

    g = Goodput(tmp_path, rank=0, started=time.time())  # as a new incarnation in the same process
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 600.0)  # the clock the code reads, stepped forward
    with caplog.at_level(logging.WARNING, logger="training.goodput"):
        g.training_starts()
        g.persist()
    assert g.seconds["startup"] < 60, g.seconds
    assert "the wall clock stepped +600" in caplog.text
    assert 599 < json.loads((tmp_path / "goodput.json").read_text())["wall_clock_step_s"] < 601
