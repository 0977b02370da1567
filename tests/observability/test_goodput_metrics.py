"""The training runtime's checkpoint gauges hold what the alerts need between scrapes (training/goodput.py)."""

from __future__ import annotations

import re
import time

from prometheus_client import generate_latest

from training.goodput import Goodput


def _value(g: Goodput, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", generate_latest(g.registry).decode(), re.M)
    assert m, f"{name} not exported"
    return float(m.group(1))


def test_checkpoint_gauges_hold_across_the_periodic_persist_of_each_step(tmp_path):
    """Failed on the old code: step_done's periodic persist() reset all three to 0 (restored_older = 1 for ~1 s)."""
    g = Goodput(tmp_path, rank=0)
    g.persist(checkpoint_failures=2, restore_source_failures=1, restored_older=1)
    g._last_write = 0.0               # the next step_done persists (it does so at most once a second)
    g.step_done(0, 0.1)
    g.persist()
    assert _value(g, "openpod_checkpoint_failures") == 2
    assert _value(g, "openpod_checkpoint_restore_source_failures") == 1
    assert _value(g, "openpod_checkpoint_restored_older") == 1


def test_checkpoint_failures_only_grow_over_the_jobs_incarnations(tmp_path):
    """Failed on the old code: a restart exported 0 again, so increase() read the restart as no failure and the
    failures of a crash-looping job never accumulated."""
    g = Goodput(tmp_path, rank=0)
    g.persist(checkpoint_failures=3)
    g2 = Goodput(tmp_path, rank=0, started=time.time())     # the next incarnation: its own SaveStats start at 0
    assert _value(g2, "openpod_checkpoint_failures") == 3
    g2.persist(checkpoint_failures=1)
    assert _value(g2, "openpod_checkpoint_failures") == 4
    other = Goodput(tmp_path, rank=8, started=time.time())  # another node's local rank 0 reads the same ledger
    assert _value(other, "openpod_checkpoint_failures") == 4


def test_bad_checkpoint_figures_are_refused_naming_the_argument(tmp_path):
    g = Goodput(tmp_path, rank=0)
    try:
        g.persist(checkpoint_failures=-1)
    except ValueError as e:
        assert "checkpoint_failures" in str(e)
    else:
        raise AssertionError("a negative count was accepted")


def test_last_durable_checkpoint_time_starts_at_the_job_start_and_survives_restarts(tmp_path):
    commits = [0]
    g = Goodput(tmp_path, rank=0, started=1000.0)
    g.watch_durable(lambda: commits[0])
    assert _value(g, "openpod_checkpoint_last_durable_timestamp_seconds") == 1000.0   # none yet: the job's start
    g.persist()
    assert _value(g, "openpod_checkpoint_last_durable_timestamp_seconds") == 1000.0
    commits[0] = 1                                                                     # a checkpoint became durable
    before = time.time()
    g.persist()
    durable = _value(g, "openpod_checkpoint_last_durable_timestamp_seconds")
    assert before <= durable <= time.time()
    g2 = Goodput(tmp_path, rank=0, started=time.time() + 50)                           # restarted, nothing new yet
    g2.watch_durable(lambda: 0)
    assert _value(g2, "openpod_checkpoint_last_durable_timestamp_seconds") == durable
    g3 = Goodput(tmp_path / "other", rank=0, started=2000.0)                          # a job that never checkpoints
    assert "openpod_checkpoint_last_durable_timestamp_seconds" not in generate_latest(g3.registry).decode()


def test_each_restart_of_the_job_adds_one_incarnation(tmp_path):
    """The crash-loop alert counts restarts from this gauge (max - min over an hour, across the job's pods): a loop
    that never reaches step 1 still counts (absent before: only the step, which stays 0, was exported)."""
    for n in (1, 2, 3):
        g = Goodput(tmp_path, rank=0, started=time.time())
        assert _value(g, "openpod_training_incarnations") == n
        g.persist()   # the incarnation dies before its first step


def _free_port() -> int:
    import socket

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def test_a_job_ending_with_a_tier_behind_says_so_and_waits_for_one_scrape(tmp_path):
    """The end of a job whose last step is not in S3 (the launcher's exit 4) is a series a scrape reads before the
    process ends (a finished pod is not scraped): failed on the old code, which exported nothing about it."""
    import threading
    import urllib.request

    port = _free_port()
    g = Goodput(tmp_path, rank=0, metrics_port=port)
    try:
        body = []
        scraper = threading.Timer(0.3, lambda: body.append(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()))
        scraper.start()
        t0 = time.monotonic()
        assert g.finished_not_durable({"fsx": 10, "s3": 8}, {"s3": 8}, wait_s=10) is True
        assert time.monotonic() - t0 < 5     # returned at the scrape, not at the timeout
        scraper.join()
        assert 'openpod_checkpoint_final_step_not_durable{tier="s3"} 1.0' in body[0]
        assert 'openpod_checkpoint_final_step_not_durable{tier="fsx"} 0.0' in body[0]
        assert 'openpod_checkpoint_final_step_not_durable{tier="s3"} 1.0' in (tmp_path / "metrics.prom").read_text()
        # durable everywhere: exported as 0, and no wait
        t0 = time.monotonic()
        assert g.finished_not_durable({"fsx": 10, "s3": 10}, {}, wait_s=10) is False
        assert time.monotonic() - t0 < 2 and 'tier="s3"} 0.0' in (tmp_path / "metrics.prom").read_text()
    finally:
        g.close()


def test_a_tier_behind_with_nobody_scraping_waits_at_most_its_bound(tmp_path):
    g = Goodput(tmp_path, rank=0, metrics_port=_free_port())
    try:
        t0 = time.monotonic()
        assert g.finished_not_durable({"s3": None}, {"s3": None}, wait_s=0.3) is False
        assert 0.25 < time.monotonic() - t0 < 3
    finally:
        g.close()
    # a rank that does not serve the port never waits
    other = Goodput(tmp_path, rank=1)
    t0 = time.monotonic()
    assert other.finished_not_durable({"s3": None}, {"s3": None}, wait_s=30) is False
    assert time.monotonic() - t0 < 2
