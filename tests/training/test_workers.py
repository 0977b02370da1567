"""The save's reused worker threads (training/checkpoint/workers.py)."""

import threading

import pytest

from training.checkpoint import workers
from tests.training.test_checkpoint import make_model, train
from tests.training.test_checkpoint_rawfmt import _save_step


def test_a_job_runs_on_a_named_daemon_thread_which_is_reused_and_its_error_reaches_the_caller():
    first = workers.run(lambda: threading.current_thread(), "job-a").result(5)
    assert first.daemon and first.name in ("job-a", "ckpt-worker")
    with pytest.raises(ValueError, match="bad input"):
        workers.run(lambda: (_ for _ in ()).throw(ValueError("bad input")), "job-b").result(5)
    names = workers.run(lambda: threading.current_thread().name, "job-c").result(5)
    assert names == "job-c"


def test_saves_after_the_first_start_no_threads_of_their_own(tmp_path, monkeypatch):
    """Failed on the old code: every save started three threads (hash follower, flusher, head writer), each
    start waiting to win the GIL beside the training loop (1-8 ms apiece in a save of the benchmark's `small`)."""
    model, opt = make_model()
    ck = _save_step(tmp_path, model, opt)  # the first save starts what it needs
    ck.flush()
    started, real = [], threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (started.append(self.name), real(self))[1])
    for step in (4, 6, 8):
        train(model, opt)
        ck.save(step, model, opt)
        ck.flush()
    monkeypatch.undo()
    ck.close()
    assert ck.stats.committed == 4 and ck.stats.failed == 0, ck.stats
    assert len(started) <= 3, started  # (a worker may finish its job a moment after the next save asks for one)
