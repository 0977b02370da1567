"""Graceful stop on SIGTERM: the signal a pod gets when it is evicted (node upgrade or drain, Kueue preemption).

A worker's handler only records the request; the :class:`~training.runtime.Runtime`
folds it into the step's gradient all-reduce, so every rank - also on nodes that got
no signal - stops after the same step, writes that step to the durable tier and exits.
A second SIGTERM restores the default action (the process ends at once), so a loop that
never checks :attr:`StopRequest.requested` can still be stopped.

A request outlives the runtime that installed it: with ``--restart in-process`` a survivor builds a
new runtime (and a new :class:`StopRequest`) each generation, and a replacement worker gets the
launcher's SIGTERM while it is still starting (``training.worker`` installs one first thing). A
SIGTERM caught by an earlier instance in the same process carries over to the next one installed,
so it stops the new generation after its first step instead of being lost between generations.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

log = logging.getLogger("training.ft")

_installed: "StopRequest | None" = None  # the instance whose handler is installed in this process


def signalled() -> bool:
    """Whether this process was asked to stop by a SIGTERM (caught by the handler installed now)."""
    return _installed is not None and _installed.requested


def end_by_sigterm() -> None:
    """End this process as SIGTERM's default action does."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.raise_signal(signal.SIGTERM)


class StopRequest:
    """Records SIGTERM; install once per process, from the main thread."""

    def __init__(self) -> None:
        self.requested = False
        self.at: float | None = None

    def install(self) -> "StopRequest":
        global _installed
        if threading.current_thread() is threading.main_thread():
            earlier = _installed
            _installed = self
            signal.signal(signal.SIGTERM, self._on_signal)
            if earlier is not None and earlier.requested and not self.requested:  # caught between generations
                self.requested, self.at = True, earlier.at
                log.warning("SIGTERM received before this runtime started: stopping after its first step, once "
                            "it is checkpointed durably")
        return self

    def _on_signal(self, signum, frame) -> None:
        if self.requested:  # the second one: stop now
            end_by_sigterm()
            return
        self.requested, self.at = True, time.monotonic()
        log.warning("SIGTERM: stopping after this step, once it is checkpointed durably")
