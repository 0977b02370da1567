"""The log formats the agent reads: each line split into (message, log time, from the kernel or not).

Rules match the printer's own text anchored at the start of the message, so the prefix a log pipeline adds must
be taken off first, and only that prefix: text a program chose that sits later in a line never reaches a rule's
anchor. Formats (first match wins):

- ``/dev/kmsg`` records ``prio,seq,usec,flags;message`` (Documentation/ABI/testing/dev-kmsg). ``prio`` is
  ``facility << 3 | level``; records written from user space never carry facility 0 (kernel/printk/printk.c
  devkmsg_write: "If no prefix or no userspace facility is specified, we enforce LOG_USER, to be able to reliably
  distinguish kernel-generated messages from userspace-injected ones").
- ``dmesg -x`` (util-linux ``--decode``): ``kern  :err   : `` then a dmesg time.
- syslog / ``journalctl -o short[-iso|-precise]`` / RFC 3339 rsyslog:
  ``<time> [<host>] [<fac>.<lvl>] <ident>[<pid>]: ``; only ``kernel`` is the kernel; every other ident is a
  program's line. A line that starts with a wall-clock time but is none of these is not trusted as kernel text.
- Talos ``<ip>: kern: <level>: [<iso time>]: ``.
- a bare ``kernel: `` ident.
- then a dmesg time: ``[ 123.456789]`` (seconds since boot), ``dmesg -T`` ``[Sat Nov 28 21:22:09 2026]``,
  ``dmesg --time-format iso`` ``2026-11-28T21:22:09,123456+00:00``, ``dmesg -d``/``-H`` deltas ``[  +0.000005]``
  (no absolute time), and ``journalctl -o short-monotonic`` ``[ 123.456789] <host> kernel: ``.
- last, characters without ``[`` followed by a printk time with its six decimals (a serial console's own clock,
  a quoted log): the kernel prints none of these before a message, and a program's name (``comm[pid]``) stops it.

A line with none of these is the message itself (``journalctl -o cat``, a kmsg message the follower passed on).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

_MON = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_MONTHS = {m: i for i, m in enumerate(_MON.split("|"))}
_SYSLOG_TS = rf"(?P<mon>{_MON}) +(?P<day>\d{{1,2}}) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)?"
_ISO_TS = r"(?P<iso>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?"

_KMSG = re.compile(r"(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),[^;]*;")
_DMESG_X = re.compile(r"(?P<fac>[a-z]+[0-7]?) *:(?P<lvl>[a-z]+) *: ")
_TALOS = re.compile(r"\S+: (?P<fac>[a-z]+[0-7]?): +[a-z]+: \[" + _ISO_TS + r"\]: ")
_SYSLOG = re.compile(r"(?:" + _SYSLOG_TS + "|" + _ISO_TS + r")(?: [+-]\d{4} [A-Z]{2,5})? (?:\S+ )??"
                     r"(?:(?P<fac>[a-z]+[0-7]?)\.[a-z]+ )?(?P<ident>[^\s:\[]+)(?:\[\d+\])?: ?")
_WALL_START = re.compile(r"(?:" + _SYSLOG_TS + "|" + _ISO_TS + r")\s")
_IDENT = re.compile(r"kernel: ?")
_DMESG = re.compile(r"\[\s*(?P<s>\d+)\.(?P<f>\d+)\] ?")
_DMESG_DELTA = re.compile(r"\[\s*[+-]\d+\.\d+\] ?|\[\s*[+-]?\d+\.\d+ <\s*[+-]?\d+\.\d+>\] ?")
_DMESG_T = re.compile(rf"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>{_MON}) +(?P<day>\d{{1,2}}) "
                      r"(?P<hms>\d\d:\d\d:\d\d) (?P<year>\d{4})\] ?")
_DMESG_ISO = re.compile(r"(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+)[+-]\d\d:\d\d ")
_MONOTONIC_HOST = re.compile(r"\S+ kernel: ")
_FALLBACK = re.compile(r"[^\[\]]{0,60}?\[\s*(?P<s>\d+)\.(?P<f>\d{6})\] ?")


@dataclass(frozen=True)
class Record:
    message: str
    ts: float | None      # log time in seconds (since boot or on the wall clock); None when the line has none
    kernel: bool          # False: user space wrote it (facility != kern) or another program logged it
    timed: bool = True    # False: the line carries no time of its own


def _iso(s: str) -> float:
    s = s.replace(",", ".")
    date, _, rest = s.replace("T", " ").partition(" ")
    y, mo, d = (int(x) for x in date.split("-"))
    hms, _, frac = rest.partition(".")
    hh, mm, ss = (int(x) for x in hms.split(":"))
    return calendar.timegm((y, mo, d, hh, mm, ss)) + (float(f"0.{frac}") if frac else 0.0)


def _syslog(mon: str, day: str, hms: str) -> float:
    """Seconds within the year (syslog has no year: a year's turn reads as time going back, a new window)."""
    hh, mm, ss = (int(x) for x in hms.split(":"))
    return (((_MONTHS[mon] * 31 + int(day)) * 24 + hh) * 60 + mm) * 60 + ss


def _wall(m: re.Match) -> float | None:
    g = m.groupdict()
    if g.get("iso"):
        return _iso(g["iso"])
    if g.get("mon"):
        return _syslog(g["mon"], g["day"], g["hms"])
    return None


def parse(line: str) -> Record:
    """The message, log time and origin of one log line (see the module docstring for the formats)."""
    line = line.rstrip("\r\n")
    m = _KMSG.match(line)
    if m:
        return Record(line[m.end():].split("\n", 1)[0], int(m.group("usec")) / 1e6, int(m.group("prio")) >> 3 == 0)
    kernel, ts, pos, wall = True, None, 0, None
    first = line[:1]
    if first != "[" and first != " ":  # a dmesg time opens the line, or none of the prefixed formats does
        head = line[:24]
        m = _DMESG_X.match(line) if ":" in head[:16] else None
        if m:
            kernel, pos = m.group("fac") == "kern", m.end()
        elif ": " in line[:64] and (m := _TALOS.match(line)) is not None:
            kernel, wall, pos = m.group("fac") == "kern", _wall(m), m.end()
        elif first.isdigit() and (m := _DMESG_ISO.match(line)) is not None:
            wall, pos = _iso(m.group("iso")), m.end()
        elif (first.isdigit() or head[:3] in _MONTHS) and (m := _SYSLOG.match(line)) is not None:
            kernel = m.group("ident") == "kernel" and m.group("fac") in (None, "kern")
            wall, pos = _wall(m), m.end()
        elif (first.isdigit() or head[:3] in _MONTHS) and (w := _WALL_START.match(line)) is not None:
            return Record(line, _wall(w), False)
        elif first == "k" and (m := _IDENT.match(line)) is not None:
            pos = m.end()
    m = _DMESG.match(line, pos)
    if m:
        ts, pos = float(f"{m.group('s')}.{m.group('f')}"), m.end()
        if wall is None:
            h = _MONOTONIC_HOST.match(line, pos)
            pos = h.end() if h else pos
    elif (m := _DMESG_DELTA.match(line, pos)) is not None:
        pos = m.end()
    elif (m := _DMESG_T.match(line, pos)) is not None:
        wall = calendar.timegm((int(m.group("year")), _MONTHS[m.group("mon")] + 1, int(m.group("day")),
                                *(int(x) for x in m.group("hms").split(":")))), m.end()
        wall, pos = wall
    elif (m := _DMESG_ISO.match(line, pos)) is not None:
        wall, pos = _iso(m.group("iso")), m.end()
    elif pos == 0 and "[" in line[:72] and (m := _FALLBACK.match(line)) is not None:
        ts, pos = float(f"{m.group('s')}.{m.group('f')}"), m.end()
    t = ts if ts is not None else wall
    return Record(line[pos:], t, kernel, t is not None)
