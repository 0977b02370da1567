"""Leaving a process that has finished its work without the interpreter's teardown.

With torch loaded, Python's finalization (modules, then C++ static objects) took 0.8-1.0 s of CPU after the work
was done (the agent, 2026-11-27, 2-core CI machine), on every start and stop of a run. What an exit does first
still runs: threads' exit hooks (executors) and the joining of non-daemon threads, ``atexit`` functions, logging's
flush, the standard streams' flush.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading


def exit_without_teardown(code: int) -> None:
    getattr(threading, "_shutdown", lambda: None)()  # what Py_Finalize does first (CPython 3.8-3.13)
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing left to save
            pass
    os._exit(code)


def cuda_in_use() -> bool:
    """Whether this process has started CUDA (then it exits the usual way: that path has not run on a GPU)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()
