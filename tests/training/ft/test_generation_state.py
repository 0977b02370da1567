"""What an in-process restart's survivor keeps from one generation to the next (no processes started).

Each generation builds a new runtime in the same process: installing the stack dump again must not open one
more file, and a SIGTERM caught by the previous generation's stop request must reach the next one.
"""

import faulthandler
import os
import signal

from training.ft import preemption, watchdog
from training.ft.preemption import StopRequest


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_installing_the_stack_dump_again_keeps_one_open_file(tmp_path):
    try:
        watchdog.install_stack_dump(tmp_path, 0)
        before = _fds()
        for _ in range(5):  # five more generations
            assert watchdog.install_stack_dump(tmp_path, 0) == tmp_path / "stacks-rank-0.txt"
        assert _fds() == before
        watchdog.install_stack_dump(tmp_path / "other", 0)  # a new place: the old file is closed, not kept
        assert _fds() == before and list(watchdog._STACK_FILES) == [tmp_path / "other" / "stacks-rank-0.txt"]
    finally:
        faulthandler.unregister(signal.SIGUSR1)
        for f in watchdog._STACK_FILES.values():
            f.close()
        watchdog._STACK_FILES.clear()


def test_a_sigterm_caught_between_generations_carries_over_to_the_next_stop_request():
    previous = signal.getsignal(signal.SIGTERM)
    try:
        first = StopRequest().install()                # generation 0's runtime
        first._on_signal(signal.SIGTERM, None)         # the signal, while the survivor waits for generation 1
        second = StopRequest().install()               # generation 1's runtime
        assert second.requested and second.at == first.at
        assert signal.getsignal(signal.SIGTERM) == second._on_signal
        fresh = StopRequest()
        preemption._installed = None                   # a new process: nothing to carry over
        assert not fresh.install().requested
    finally:
        signal.signal(signal.SIGTERM, previous)
        preemption._installed = None
