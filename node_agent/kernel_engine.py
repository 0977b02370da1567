"""The one kernel-log rule engine of the live agent and of ``diagnose``: line rules, CPER records, repeat windows.

A line is split by ``logformat.parse`` (its log prefix, time and origin); a record user space wrote is dropped,
the message is classified by ``kernel_match.match_message`` (rules anchored at the printer's prefix). GHES/BERT CPER
records span lines (drivers/firmware/efi/cper.c: "event severity: %s", then per section "Error %d, type: %s" and
"section_type: %s"): the engine keeps each record's severity (keyed by GHES's ``{seq}`` prefix) and decides on
its section type (``kernel_match.cper_section_rule``). A rule listed in ``rules.REPEATS`` becomes its repeated rule on
the count-th finding within the window, on the log's own time axis: the /dev/kmsg or journald timestamp the
follower passes, else the line's own time. A line without time (``journalctl -o cat``, a bare message) counts
in no window offline (``untimed`` says how many); live, the caller's clock stands in. Time going backwards by
more than a second is a new boot (or a new file): the windows start over.
"""

from __future__ import annotations

import re
import threading
from collections import deque

from node_agent import logformat
from node_agent.findings import Finding
from node_agent.kernel_match import cper_section_rule, match_message
from node_agent.rules import REPEATS, Repeat, rule

_CPER = re.compile(r"(?P<pfx>\{\d+\})?\[Hardware Error\]: +(?:(?P<head>Hardware error from APEI)"
                   r"|event severity: (?P<event>\w+)|Error \d+, type: (?P<section>\w+)"
                   r"|section_type: (?P<type>[^\n]+?)\s*$|(?P<ecc>error_type: \d+, multi-))")


class KernelLogEngine:
    def __init__(self, repeats: dict[str, Repeat] = REPEATS) -> None:
        self.repeats = repeats
        self._seen: dict[tuple[str, str], deque[float]] = {}
        self._last: float | None = None
        self._cper: dict[str, dict[str, str | None]] = {}
        self._lock = threading.Lock()
        self.user_lines = 0   # lines user space wrote (facility other than kernel, another program's line)
        self.untimed = 0      # lines without a log time (offline: counted in no repeat window)

    def feed(self, line: str, ts: float | None = None, *, now: float | None = None) -> Finding | None:
        """The finding for one line (None if no rule matches); ``now`` (live) stands in for a line without time.

        With ``ts`` the line is a record's message as the follower took it from /dev/kmsg or the journal: the
        kernel's own text, which carries no log prefix, so nothing at its start is taken off (a task name shaped
        like a prefix stays where the rules cannot anchor on what follows it)."""
        rec = logformat.Record(line, ts, True) if ts is not None else logformat.parse(line)
        if not rec.kernel:
            self.user_lines += 1
            return None
        f = match_message(rec.message, line)
        t = ts if ts is not None else rec.ts
        with self._lock:
            if "[Hardware Error]" in rec.message:
                f = self._cper_record(rec.message, line, f)
            if t is None:
                if now is None:
                    self.untimed += 1
                    return f  # no log time: a repeat window would put every line at one instant
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

    def _cper_record(self, message: str, line: str, f: Finding | None) -> Finding | None:
        """A CPER line in its record: the single-line verdict ``f`` holds only while the record is unknown."""
        m = _CPER.match(message)
        if not m:
            return f
        pfx = m.group("pfx") or ""
        state = self._cper.get(pfx)
        if m.group("head"):
            self._cper[pfx] = {"event": None, "section": None}
            return f
        if m.group("event"):
            self._cper[pfx] = {"event": m.group("event"), "section": None}
            return f
        if state is None or state["event"] is None:
            return f  # a record seen without its header: the line's own verdict
        if m.group("section"):
            state["section"] = m.group("section")
            return None  # the event severity decided (fatal) or the section type will
        if m.group("type"):
            if state["event"] == "fatal":
                return None  # acted on at the event line
            sev = state["section"] or state["event"]
            r = cper_section_rule(sev, m.group("type"))
            return r.finding(line, severity_word=sev, section_type=m.group("type")) if r else None
        return None  # a section's details: its section type decided
