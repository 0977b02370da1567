"""The clock every hang, liveness and start-up figure reads: the node's boot clock (CLOCK_BOOTTIME).

It never steps when the wall clock does (an NTP correction, a VM resumed, an operator's ``date -s``), and unlike
``time.monotonic`` in general it is one clock for every process on a node, so a beat a worker writes and the
launcher's watchdog reading it agree (Linux clock_gettime(2): CLOCK_BOOTTIME is CLOCK_MONOTONIC plus the time
suspended; both count from boot, system-wide). Across nodes the clocks differ: a node's beats are rebased into the
reader's clock (training/ft/jobbeats.py). Wall-clock times remain where a time must mean the same on every node
and across restarts (the goodput ledger's ``last_alive``, peer message freshness).
"""

from __future__ import annotations

import time

_CLOCK = getattr(time, "CLOCK_BOOTTIME", None)


def now() -> float:
    """Seconds on the node's boot clock (``time.monotonic`` where there is no CLOCK_BOOTTIME)."""
    return time.clock_gettime(_CLOCK) if _CLOCK is not None else time.monotonic()
