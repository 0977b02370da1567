"""Follow a kernel log as it grows: a regular file (rotation-safe) or /dev/kmsg."""

from __future__ import annotations

import errno
import os
import threading
from typing import Callable, Iterator


def kmsg_message(record: str) -> str:
    """``6,1234,5678901,-;NVRM: Xid ...`` -> ``NVRM: Xid ...`` (other lines unchanged)."""
    head, sep, msg = record.partition(";")
    if sep and head.count(",") >= 3 and head.split(",", 1)[0].isdigit():
        return msg
    return record


class LogFollower:
    """Calls ``on_line`` for every line appended after start (``from_start`` reads what is there too)."""

    def __init__(self, path: str, on_line: Callable[[str], None], *, poll_seconds: float = 0.1,
                 from_start: bool = False) -> None:
        self.path, self.on_line, self.poll, self.from_start = path, on_line, poll_seconds, from_start
        self.stop_event = threading.Event()
        self.kmsg = path == "/dev/kmsg"

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        if self.kmsg:
            self._run_kmsg()
        else:
            self._run_file()

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
                    self.on_line(line)
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

    def _run_kmsg(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if not self.from_start:
                os.lseek(fd, 0, os.SEEK_END)
            while not self.stop_event.is_set():
                try:
                    rec = os.read(fd, 8192)
                except OSError as e:
                    if e.errno == errno.EPIPE:  # overwritten records; keep reading
                        continue
                    if e.errno != errno.EAGAIN:
                        raise
                    self.stop_event.wait(self.poll)
                    continue
                for line in rec.decode(errors="replace").splitlines():
                    if not line.startswith(" "):
                        self.on_line(kmsg_message(line))
        finally:
            os.close(fd)


def read_lines(path: str) -> Iterator[str]:
    """Every line of a log file or ``-`` (stdin), for offline diagnosis."""
    import sys

    stream = sys.stdin if path == "-" else open(path, errors="replace")  # noqa: SIM115
    try:
        for line in stream:
            yield kmsg_message(line.rstrip("\n"))
    finally:
        if stream is not sys.stdin:
            stream.close()
