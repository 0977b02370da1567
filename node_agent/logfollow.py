"""Follow the kernel log: /dev/kmsg from its first record, journald where /dev/kmsg is unavailable, or a file.

/dev/kmsg (Linux Documentation/ABI/testing/dev-kmsg, checked 2026-11-25): the first read() after open() returns
the first record in the buffer (lines 27-30); every read() returns exactly one whole record (24-25, 36-37) or
EAGAIN with O_NONBLOCK (32-34); a reader whose next record was overwritten gets EPIPE once and continues at the
next available record (39-42; kernel/printk/printk.c devkmsg_read: "our last seen message is gone, return error
and reset"); the 64-bit sequence numbers let a reader reconnect and count lost records (44-48); a record is
``prio,seq,ts_usec,flags[,...];message`` followed by continuation lines that start with a space (64-84).

The follower reads from the first record, skips records already handled in this boot (the state file keeps the
boot id, /proc/sys/kernel/random/boot_id, and the last sequence number) and saves its position after every
record that produced a finding and when it catches up. A pod restart or upgrade therefore sees what was logged
while it was down, and acts once per fault; a new boot id starts over from the first record.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Protocol

from node_agent import logformat

log = logging.getLogger("node_agent.logfollow")

BOOT_ID = "/proc/sys/kernel/random/boot_id"
KMSG = "/dev/kmsg"
JOURNALD = "journald"
# The kernel formats a /dev/kmsg record into a buffer of CONSOLE_EXT_LOG_MAX (8192) bytes and answers EINVAL to a
# smaller read (kernel/printk/printk.c devkmsg_read: "if (len > count) ret = -EINVAL"); read with room to spare.
KMSG_READ = 16384
# journalctl (systemd man page journalctl(1)): -k = kernel messages of the current boot (implies -b); -o json = one
# JSON object per entry (https://systemd.io/JOURNAL_EXPORT_FORMATS/#journal-json-format); -f follows; --no-tail
# prints every entry before following (-f alone starts at the last 10); --after-cursor resumes after an entry.
JOURNALCTL = ("journalctl", "-k", "-o", "json", "--no-pager", "--follow", "--no-tail")

# The handler returns True when the line produced a finding: the position is saved at once after it.
Handler = Callable[[str, "float | None"], object]


@dataclass(frozen=True)
class KmsgRecord:
    prio: int
    seq: int
    ts_usec: int
    flags: str
    message: str


def parse_kmsg(record: str) -> KmsgRecord | None:
    """``6,1234,5678901,-;NVRM: Xid ...\\n SUBSYSTEM=pci`` -> its fields (None if not a kmsg record)."""
    head, sep, rest = record.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 4 or not all(f.isdigit() for f in fields[:3]):
        return None
    return KmsgRecord(int(fields[0]), int(fields[1]), int(fields[2]), fields[3], rest.split("\n", 1)[0])


def kmsg_message(record: str) -> str:
    """``6,1234,5678901,-;NVRM: Xid ...`` -> ``NVRM: Xid ...`` (other lines unchanged)."""
    r = parse_kmsg(record)
    return r.message if r else record


def read_boot_id(path: str = BOOT_ID) -> str:
    return Path(path).read_text().strip()


class FollowState:
    """The follower's position on this node: {"boot_id", "seq"} for /dev/kmsg, {"boot_id", "cursor"} for journald.

    Written to a temporary file and renamed over the old one, so a crash leaves the old or the new state, never
    half of one. An unreadable file is reported and ignored (the log is read from its start again: marking a node
    is idempotent, so that costs Events, not a second action).
    """

    def __init__(self, path: str | None, boot_id: str) -> None:
        self.path, self.boot_id = path, boot_id

    def load(self) -> dict:
        if not self.path or not os.path.exists(self.path):
            return {}
        try:
            data = json.loads(Path(self.path).read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            log.warning("kernel-log state %s unreadable (%s): reading the log from its first record", self.path, e)
            return {}
        if data.get("boot_id") != self.boot_id:
            log.info("kernel-log state %s is from boot %s, this is boot %s: reading from the first record",
                     self.path, data.get("boot_id"), self.boot_id)
            return {}
        return data

    def save(self, **position) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump({"boot_id": self.boot_id, **position}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:
            log.error("cannot save kernel-log state %s: %s (a restart will read the log again)", self.path, e)


class KmsgDevice(Protocol):
    """What the follower needs of /dev/kmsg: one record per read, EAGAIN when none, EPIPE after an overwrite."""

    def read(self, n: int) -> bytes: ...

    def close(self) -> None: ...


class OsKmsg:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # positioned at the first record (dev-kmsg:27-30)

    def read(self, n: int) -> bytes:
        return os.read(self.fd, n)

    def close(self) -> None:
        os.close(self.fd)


class LogFollower:
    """Calls ``on_line(message, ts_seconds)`` for every kernel log line (see the module docstring).

    ``path`` is /dev/kmsg, ``journald`` or a regular file. A file is followed from its end unless ``from_start``
    (rotation-safe); /dev/kmsg and journald always start at this boot's first record not yet handled.
    """

    def __init__(self, path: str, on_line: Handler, *, poll_seconds: float = 0.1, from_start: bool = False,
                 state_path: str | None = None, boot_id_path: str = BOOT_ID,
                 open_kmsg: Callable[[str], KmsgDevice] = OsKmsg,
                 journalctl: tuple[str, ...] = JOURNALCTL, journald_fallback: bool = True) -> None:
        self.path, self.on_line, self.poll, self.from_start = path, on_line, poll_seconds, from_start
        self.state_path, self.boot_id_path, self.open_kmsg = state_path, boot_id_path, open_kmsg
        self.journalctl, self.journald_fallback = journalctl, journald_fallback
        self.stop_event = threading.Event()
        self.kmsg = path == KMSG
        self.lost = 0          # records overwritten before they were read (counted from sequence numbers)
        self.user_records = 0  # records user space wrote (facility other than kernel): skipped, never classified
        self.source = ""       # what is followed: kmsg | journald | file

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        if self.path == JOURNALD:
            return self._run_journald()
        if not self.kmsg:
            self.source = "file"
            return self._run_file()
        try:
            dev = self.open_kmsg(self.path)
        except OSError as e:
            if not (self.journald_fallback and e.errno in (errno.ENOENT, errno.EACCES, errno.EPERM)
                    and shutil.which(self.journalctl[0])):
                raise
            log.warning("cannot open %s (%s): following the kernel log through journald", self.path, e.strerror)
            return self._run_journald()
        self._run_kmsg(dev)

    # ------------------------------------------------------------------ /dev/kmsg
    def _run_kmsg(self, dev: KmsgDevice) -> None:
        self.source = "kmsg"
        state = FollowState(self.state_path, read_boot_id(self.boot_id_path))
        done = state.load().get("seq")
        done = done if isinstance(done, int) else -1
        expect, saved = None, done
        try:
            while not self.stop_event.is_set():
                try:
                    raw = dev.read(KMSG_READ)
                except OSError as e:
                    if e.errno == errno.EPIPE:  # overwritten; the next read gives the next available record
                        log.warning("kernel log records were overwritten before they were read")
                        continue
                    if e.errno != errno.EAGAIN:
                        raise
                    if saved != done:
                        state.save(seq=done)
                        saved = done
                    self.stop_event.wait(self.poll)
                    continue
                if not raw:
                    self.stop_event.wait(self.poll)
                    continue
                rec = parse_kmsg(raw.decode(errors="replace"))
                if rec is None:
                    continue
                if expect is None and done >= 0 and rec.seq > done + 1:
                    log.warning("%d kernel log records after seq %d were overwritten while the agent was down",
                                rec.seq - done - 1, done)
                    self.lost += rec.seq - done - 1
                elif expect is not None and rec.seq > expect:
                    self.lost += rec.seq - expect
                expect = rec.seq + 1
                if rec.seq <= done:
                    continue  # handled before a restart in this boot
                if rec.prio >> 3 != 0:  # facility != LOG_KERN: written to /dev/kmsg from user space
                    self.user_records += 1
                    done = rec.seq
                    continue
                acted = self.on_line(rec.message, rec.ts_usec / 1e6)
                done = rec.seq
                if acted:
                    state.save(seq=done)
                    saved = done
        finally:
            if saved != done:
                state.save(seq=done)
            dev.close()

    # ------------------------------------------------------------------ journald
    def _run_journald(self) -> None:
        """``journalctl -k -o json -f`` from this boot's first entry or after the saved cursor."""
        self.source = "journald"
        state = FollowState(self.state_path, read_boot_id(self.boot_id_path))
        cursor = state.load().get("cursor")
        argv = list(self.journalctl) + ([f"--after-cursor={cursor}"] if isinstance(cursor, str) else [])
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # noqa: S603 (fixed argv)
        done = threading.Event()

        def stop_journalctl() -> None:  # the read below blocks: stopping the follower ends journalctl
            while not (self.stop_event.wait(0.2) or done.is_set()):
                pass
            if proc.poll() is None:
                proc.terminate()

        threading.Thread(target=stop_journalctl, name="journalctl-stop", daemon=True).start()
        saved = cursor
        try:
            for raw in proc.stdout:
                if self.stop_event.is_set():
                    break
                try:
                    entry = json.loads(raw)
                except ValueError:
                    continue
                msg = entry.get("MESSAGE")
                if isinstance(msg, list):  # non-UTF-8 messages are arrays of bytes (JOURNAL_EXPORT_FORMATS)
                    msg = bytes(b for b in msg if isinstance(b, int) and 0 <= b < 256).decode(errors="replace")
                if not isinstance(msg, str):
                    continue
                # journald keeps the kmsg facility (systemd src/journal/journald-kmsg.c dev_kmsg_record:
                # SYSLOG_FACILITY=LOG_FAC(priority), _TRANSPORT=kernel for every /dev/kmsg record)
                if str(entry.get("SYSLOG_FACILITY", "0")) != "0":
                    self.user_records += 1
                    cursor = entry.get("__CURSOR", cursor)
                    continue
                ts = entry.get("_SOURCE_MONOTONIC_TIMESTAMP") or entry.get("__MONOTONIC_TIMESTAMP")
                acted = self.on_line(msg.split("\n", 1)[0], int(ts) / 1e6 if str(ts).isdigit() else None)
                cursor = entry.get("__CURSOR", cursor)
                if acted and cursor != saved:
                    state.save(cursor=cursor)
                    saved = cursor
        finally:
            done.set()
            if cursor != saved and isinstance(cursor, str):
                state.save(cursor=cursor)
            if proc.poll() is None:
                proc.terminate()
            rc = proc.wait()
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            proc.stdout.close()
            if proc.stderr:
                proc.stderr.close()
        if not self.stop_event.is_set():
            raise OSError(errno.EIO, f"journalctl exited {rc}: {err[-200:]}")

    # ---------------------------------------------------------------------- file
    def _lines(self, f, buf: str) -> tuple[list[str], str]:
        data = f.read()
        if not data:
            return [], buf
        buf += data
        *lines, rest = buf.split("\n")
        return lines, rest

    def _run_file(self) -> None:
        f = open(self.path, errors="replace")  # noqa: SIM115 (held open while following)
        if not self.from_start:
            f.seek(0, os.SEEK_END)
        ino, buf = os.fstat(f.fileno()).st_ino, ""
        try:
            while not self.stop_event.is_set():
                lines, buf = self._lines(f, buf)
                for line in lines:
                    self.on_line(line, None)  # the engine takes each format's prefix off (node_agent.logformat)
                if lines:
                    continue
                try:
                    st = os.stat(self.path)
                    if st.st_ino != ino or st.st_size < f.tell():  # rotated or truncated
                        f.close()
                        f = open(self.path, errors="replace")  # noqa: SIM115
                        ino, buf = os.fstat(f.fileno()).st_ino, ""
                        continue
                except FileNotFoundError:
                    pass  # mid-rotation; keep the old handle
                self.stop_event.wait(self.poll)
        finally:
            f.close()


class BinaryLog(ValueError):
    """The offline input is not a text log."""


_SNIFF = 65536


def read_lines(path: str) -> Iterator[tuple[str, float | None]]:
    """(message, kmsg timestamp or None) for every line of a text log or ``-`` (stdin), for offline diagnosis.

    Raises BinaryLog for input that is not text (a NUL byte or invalid UTF-8 in its first 64 KiB): a binary
    journal file or a core dump is refused rather than reported as "no faults found".
    """
    import sys

    stream = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        head = stream.read(_SNIFF)
        _check_text(head)
        pending = b""
        chunk = head
        while chunk:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                yield _offline_line(raw)
            chunk = stream.read(_SNIFF)
        if pending:
            yield _offline_line(pending)
    finally:
        if path != "-":
            stream.close()


def _check_text(head: bytes) -> None:
    nul = head.find(b"\0")
    if nul >= 0:
        raise BinaryLog(f"binary data (NUL byte at offset {nul})")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # a multi-byte character cut by the 64 KiB window is fine
            raise BinaryLog(f"not UTF-8 text (byte 0x{head[e.start]:02x} at offset {e.start})") from None


def _offline_line(raw: bytes) -> tuple[str, float | None]:
    """The line as written: the engine reads its format (a kmsg record's facility and time included)."""
    return raw.decode(errors="replace").rstrip("\r"), None


def log_seconds(line: str) -> float | None:
    """The log time of a line in any supported format (node_agent.logformat), None when it carries none."""
    return logformat.parse(line).ts
