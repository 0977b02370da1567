"""A stand-in for /dev/kmsg at the system-call level (open, read, lseek, close), built from the kernel's ABI.

Behaviour and where it comes from (torvalds/linux Documentation/ABI/testing/dev-kmsg, lines as read on
2026-11-25; kernel/printk/printk.c devkmsg_open / devkmsg_read / devkmsg_llseek at torvalds/linux@002eb6ad):

- open() positions the reader at the first record still in the buffer (dev-kmsg:27-30; devkmsg_open sets
  ``user->seq = prb_first_valid_seq(prb)``);
- every read() returns exactly one whole record, ``prio,seq,ts_usec,flags;message\\n`` then continuation lines
  that start with a space (dev-kmsg:24-25, 36-37, 64-84);
- no record available: EAGAIN under O_NONBLOCK (dev-kmsg:32-34);
- the reader's next record was overwritten: EPIPE once, the position moves to the first available record
  (dev-kmsg:39-42; devkmsg_read "our last seen message is gone, return error and reset");
- a record longer than the read buffer: EINVAL, and that record is skipped (devkmsg_read advances
  ``user->seq`` before its ``len > count`` check);
- lseek(0, SEEK_SET) first record, SEEK_END after the last, SEEK_DATA after the last clear; SEEK_CUR and any
  non-zero offset: ESPIPE (dev-kmsg:50-61; devkmsg_llseek).

``KmsgStandin.install(monkeypatch, module)`` replaces that module's ``os`` with one that routes these calls on
the path /dev/kmsg to the stand-in, so the follower's real code path runs unchanged.
"""

from __future__ import annotations

import errno
import os
import threading


class KmsgStandin:
    def __init__(self, capacity: int = 4096, first_seq: int = 0) -> None:
        self.capacity = capacity
        self.records: list[tuple[int, str]] = []   # (seq, formatted record)
        self.next_seq = first_seq
        self.clear_seq = first_seq
        self.readers: dict[int, int] = {}          # fd -> next seq
        self._fd = 10_000
        self.lock = threading.Lock()

    # ---------------------------------------------------------------- the kernel side
    def printk(self, message: str, *, ts_usec: int, prio: int = 3, dict_lines: tuple[str, ...] = ()) -> int:
        with self.lock:
            seq = self.next_seq
            text = f"{prio},{seq},{ts_usec},-;{message}\n" + "".join(f" {kv}\n" for kv in dict_lines)
            self.records.append((seq, text))
            self.next_seq += 1
            del self.records[:-self.capacity]   # overwritten as whole records (dev-kmsg:36-37)
            return seq

    def first_seq(self) -> int:
        return self.records[0][0] if self.records else self.next_seq

    # ---------------------------------------------------------------- the reader side
    def open(self) -> int:
        with self.lock:
            self._fd += 1
            self.readers[self._fd] = self.first_seq()
            return self._fd

    def read(self, fd: int, n: int) -> bytes:
        with self.lock:
            seq = self.readers[fd]
            if seq < self.first_seq():
                self.readers[fd] = self.first_seq()
                raise OSError(errno.EPIPE, os.strerror(errno.EPIPE))
            if seq >= self.next_seq:
                raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
            text = self.records[seq - self.first_seq()][1].encode()
            self.readers[fd] = seq + 1
            if len(text) > n:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            return text

    def lseek(self, fd: int, offset: int, whence: int) -> int:
        with self.lock:
            if offset:
                raise OSError(errno.ESPIPE, os.strerror(errno.ESPIPE))
            if whence == os.SEEK_SET:
                self.readers[fd] = self.first_seq()
            elif whence == os.SEEK_END:
                self.readers[fd] = self.next_seq
            elif whence == os.SEEK_DATA:
                self.readers[fd] = self.clear_seq
            else:
                raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
            return 0

    def caught_up(self) -> bool:
        with self.lock:
            return bool(self.readers) and all(s >= self.next_seq for s in self.readers.values())

    def install(self, monkeypatch, module, path: str = "/dev/kmsg") -> None:
        monkeypatch.setattr(module, "os", _Os(self, path))


class _Os:
    """The ``os`` module, with open/read/lseek/close of ``path`` going to the stand-in."""

    def __init__(self, kmsg: KmsgStandin, path: str) -> None:
        self._kmsg, self._path = kmsg, path

    def __getattr__(self, name):
        return getattr(os, name)

    def open(self, path, flags, *a):
        return self._kmsg.open() if path == self._path else os.open(path, flags, *a)

    def read(self, fd, n):
        return self._kmsg.read(fd, n) if fd in self._kmsg.readers else os.read(fd, n)

    def lseek(self, fd, offset, whence):
        return self._kmsg.lseek(fd, offset, whence) if fd in self._kmsg.readers else os.lseek(fd, offset, whence)

    def close(self, fd):
        if fd in self._kmsg.readers:
            with self._kmsg.lock:
                del self._kmsg.readers[fd]
        else:
            os.close(fd)
