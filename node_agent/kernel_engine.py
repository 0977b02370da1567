"""The one kernel-log rule engine of the live agent and of ``diagnose``: line rules plus repeat windows.

A line is classified by ``rules.match_kernel_line``; a rule listed in ``rules.REPEATS`` becomes its repeated
rule on the count-th finding within the window. Windows run on the log's own time axis: the /dev/kmsg or
journald timestamp the follower passes, else the line's own time (a dmesg ``[ 123.456]`` prefix, an ISO 8601 or
syslog timestamp: ``logfollow.log_seconds``), else the last log time seen, else the caller's clock. Time going
backwards by more than a second is a new boot (or a new file): the windows start over.
"""

from __future__ import annotations

import threading
from collections import deque

from node_agent.findings import Finding
from node_agent.logfollow import log_seconds
from node_agent.rules import REPEATS, Repeat, match_kernel_line, rule


class KernelLogEngine:
    def __init__(self, repeats: dict[str, Repeat] = REPEATS) -> None:
        self.repeats = repeats
        self._seen: dict[tuple[str, str], deque[float]] = {}
        self._last: float | None = None
        self._lock = threading.Lock()

    def feed(self, line: str, ts: float | None = None, *, now: float = 0.0) -> Finding | None:
        """The finding for one line (None if no rule matches); ``now`` is used only for a line without log time."""
        f = match_kernel_line(line)
        t = ts if ts is not None else log_seconds(line)
        with self._lock:
            if t is None:
                t = self._last if self._last is not None else now
            if self._last is not None and t < self._last - 1.0:
                self._seen.clear()  # a new boot in the same log
            self._last = t
            if f is None or f.rule not in self.repeats:
                return f
            r = self.repeats[f.rule]
            times = self._seen.setdefault((r.base, f.device if r.per_device else ""), deque())
            while times and t - times[0] >= r.window_s:
                times.popleft()
            times.append(t)
            if len(times) < r.count:
                return f
        return rule(r.rule).finding(line, device=f.device, seen=len(times), window_s=r.window_s)
