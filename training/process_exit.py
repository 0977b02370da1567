"""Leaving a process that has finished its work without the interpreter's teardown.

Two reasons, both measured here:

- **Time.** With torch loaded, Python's finalization (modules, then C++ static objects) took 0.8-1.0 s of CPU after
  the work was done (the agent, 2026-11-27, 2-core CI machine), on every start and stop of a run.
- **gloo aborts it.** A gloo process group's worker threads (``pt_gloo_runloop``) drop each finished collective on
  their own thread, after the waiting rank has been woken; dropping a tensor that Python also holds decrefs its
  Python object, which needs the GIL (facts ``torch.pyobject-release-needs-gil``). ``destroy_process_group()``
  leaves those threads running while a mesh, a model or a DTensor still references the group. A thread that asks
  for the GIL just before the interpreter starts finalizing and gets it after is terminated by CPython 3.8-3.13
  (``python.gil-at-finalization``), and the unwinding through torch's destructors ends in ``std::terminate``:
  "terminate called without an active exception", SIGABRT, after the job's work was done and reported (3 of 10
  full test runs, 2026-11-27/28; pytorch/pytorch#117762 is open). tests/training/test_process_exit.py builds that
  exit deterministically.

What an exit does first still runs: threads' exit hooks (executors) and the joining of non-daemon threads,
``atexit`` functions, logging's flush, the standard streams' flush.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import traceback
from typing import Callable, NoReturn


def exit_without_teardown(code: int) -> NoReturn:
    getattr(threading, "_shutdown", lambda: None)()  # what Py_Finalize does first (CPython 3.8-3.13)
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing left to save
            pass
    os._exit(code)


def exit_status_of(main: Callable[[], int | None]) -> int:
    """Run ``main`` and return the status ``python script.py`` would exit with: its return value (None: 0), its
    SystemExit's code (a message: printed, 1), or 1 after printing an uncaught exception's traceback."""
    try:
        code = main()
        return 0 if code is None else code
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - a crash is the process's exit status, as the interpreter reports it
        traceback.print_exc()
        return 1


def run_and_exit(main: Callable[[], int | None]) -> NoReturn:
    """A script's ``if __name__ == "__main__":`` for a process that ran collectives: ``main``'s status, then
    :func:`exit_without_teardown`. A process that started CUDA exits the usual way (that path has not run on a
    GPU)."""
    code = exit_status_of(main)
    if cuda_in_use():
        sys.exit(code)
    exit_without_teardown(code)


def cuda_in_use() -> bool:
    """Whether this process has started CUDA (then it exits the usual way: that path has not run on a GPU)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()
