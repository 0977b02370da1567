"""Daemon threads the save's per-save work runs on, started once and reused.

A save runs a few loops of its own (the hash follower and the flusher of ``hashing.TeeFileSystem``, the head
writer of ``rawfmt.BufferHead``) and keeps direct writes in flight (``dio``). Starting a thread waits until the
new thread has run, and beside the training loop that meant winning the GIL: 0.3 ms quiet, 1-8 ms per thread in a
save of the benchmark's `small` (three per save; 2026-11-29). Here a finished job's thread waits for the next
job instead of ending. Threads are daemons (a job stuck on a dead disk never holds up the interpreter's exit, as
``concurrent.futures``' own workers would), and a forked child starts its own.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from typing import Callable

_lock = threading.Lock()
_idle: list[queue.SimpleQueue] = []  # the inboxes of threads waiting for a job
_pid = os.getpid()


def run(fn: Callable[[], object], name: str) -> Future:
    """Run ``fn()`` on an idle worker thread (a new one if none is idle); its future holds the result or error.
    The thread is named ``name`` while it runs it."""
    global _pid
    fut: Future = Future()
    with _lock:
        if _pid != os.getpid():  # a forked child: the parent's threads are not here
            _idle.clear()
            _pid = os.getpid()
        inbox = _idle.pop() if _idle else None
    if inbox is None:
        inbox = queue.SimpleQueue()
        threading.Thread(target=_work, args=(inbox,), name="ckpt-worker", daemon=True).start()
    inbox.put((fn, fut, name))
    return fut


def _work(inbox: queue.SimpleQueue) -> None:
    me = threading.current_thread()
    while True:
        fn, fut, name = inbox.get()
        result = error = None
        if fut.set_running_or_notify_cancel():  # (not cancelled)
            me.name = name
            try:
                result = fn()
            except BaseException as e:  # noqa: BLE001 - the caller's to raise
                error = e
            me.name = "ckpt-worker"
        with _lock:  # idle before the caller hears of the result: a caller that goes on finds this thread free
            _idle.append(inbox)
        if fut.running() and error is not None:
            fut.set_exception(error)
        elif fut.running():
            fut.set_result(result)
        del fn, fut, result, error  # nothing of the job is kept while idle
