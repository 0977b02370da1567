"""Fault hooks for tests and drills, switched by environment variables (no-ops when unset).

``OPENPOD_KILL_AT=point@step[@rank],...``
    SIGKILL this worker and its torchrun agent when ``point`` is reached at ``step``
    (other local workers follow through their parent-death signal): a node dying at
    a chosen moment. Points: ``after_step``, ``during_stage``, ``during_write`` (DCP
    has written part of a snapshot), ``before_commit`` (files written, no marker),
    ``after_commit``, ``after_replicate`` (the buddy holds the snapshot),
    ``during_promote``.
``OPENPOD_FAULT_ENOSPC=kind@step[@rank]``
    The tier ``kind`` (memory, nvme, fsx) runs out of space while writing the
    snapshot of ``step`` (of rank ``rank`` alone, if given; else every rank's):
    writes raise ``OSError(ENOSPC)`` at the storage layer. ``step`` ``*``: every step.
``OPENPOD_FAULT_PUT=kind@step@rank[@times]``
    Copying rank ``rank``'s snapshot of ``step`` into tier ``kind`` (any kind, s3
    included) fails with ``OSError(EIO)`` the first ``times`` tries in this process
    (default: every try): a per-rank upload failure, transient or lasting.
``OPENPOD_FAULT_SLOW_PUT=kind@seconds``
    Every copy into tier ``kind`` takes ``seconds`` longer (a throttled S3, a busy FSx).
``OPENPOD_HANG_AT=step@rank@marker``
    Before ``step``, rank ``rank`` stops advancing (it sleeps in ``hang_forever``, as a
    rank stuck in a collective or a dead-locked data loader would) - once: the hook
    creates ``marker`` and does not fire again while it exists. The launcher's hang
    watchdog tests use it.
``OPENPOD_EXIT_AT=step@rank``
    Before ``step``, rank ``rank`` exits with status 1 - in every incarnation, so with
    ``--restart in-process`` each replacement fails again and the job moves through one
    generation after another (the per-generation resource tests use it).
``OPENPOD_HOOK_WAIT=step@world@path[@stop]``
    Before ``step``, while the world size is ``world``, rank 0 holds the job (polling
    every 50 ms) until ``path`` exists. Elastic tests use it to change membership
    at a known step. With ``@stop``, a SIGTERM while held ends the rank as SIGTERM's default
    action would (torchrun stopping its workers for a membership change, which would
    otherwise wait out its timeout for a rank that never gets to the step).
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import time

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Make the kernel SIGKILL this process when its parent (the torchrun agent) dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not Linux: nothing to do
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _rules(var: str) -> list[list[str]]:
    return [r.split("@") for r in os.environ.get(var, "").split(",") if r.strip()]


def kill_armed(point: str, step: int, rank: int | None = None) -> bool:
    """Whether ``kill_point(point, step, rank)`` would kill (callers on hot paths check once)."""
    return any(rule[0] == point and int(rule[1]) == step and (len(rule) < 3 or rank is None or int(rule[2]) == rank)
               for rule in _rules("OPENPOD_KILL_AT"))


def kill_point(point: str, step: int, rank: int | None = None) -> None:
    if kill_armed(point, step, rank):
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # pragma: no cover - the signal is on its way


def _this_rank(rank: int | None) -> int:
    return int(os.environ.get("RANK", "-1")) if rank is None else rank


def enospc_limit(kind: str, step: int, rank: int | None = None) -> int | None:
    """Bytes a tier may write for this step before ENOSPC, or None (no fault)."""
    for rule in _rules("OPENPOD_FAULT_ENOSPC"):
        if rule[0] == kind and rule[1] in ("*", str(step)) and (len(rule) < 3 or int(rule[2]) == _this_rank(rank)):
            return 4096
    return None


_put_failures: dict[tuple[str, int, int], int] = {}


def put_fault(kind: str, step: int, rank: int) -> None:
    """Raise ``OSError(EIO)`` if ``OPENPOD_FAULT_PUT`` fails this copy; sleep first if ``OPENPOD_FAULT_SLOW_PUT``
    slows it (see the module docstring)."""
    for rule in _rules("OPENPOD_FAULT_SLOW_PUT"):
        if rule[0] == kind:
            time.sleep(float(rule[1]))
    for rule in _rules("OPENPOD_FAULT_PUT"):
        if rule[0] == kind and rule[1] in ("*", str(step)) and int(rule[2]) == rank:
            n = _put_failures.get((kind, step, rank), 0)
            if len(rule) < 4 or n < int(rule[3]):
                _put_failures[(kind, step, rank)] = n + 1
                raise OSError(errno.EIO, f"injected failure copying step {step} of rank {rank} to {kind}")


class LimitedWrites:
    """Storage-layer fault: a file system that runs out of space after ``limit`` bytes.

    Charged by the checkpoint writers (``training.checkpoint.hashing``) and directory copies
    (``DirTier.put``) per byte written when the ``OPENPOD_FAULT_ENOSPC`` hook names the tier;
    writes past the limit raise ``OSError(ENOSPC)`` exactly as write(2) would.
    """

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def charge(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def enospc_quota(kind: str, step: int, rank: int | None = None) -> LimitedWrites | None:
    """The ``OPENPOD_FAULT_ENOSPC`` quota of tier ``kind`` for ``step``, or None (no fault)."""
    limit = enospc_limit(kind, step, rank)
    return LimitedWrites(limit) if limit is not None else None


def wait_point(step: int, world_size: int, rank: int) -> None:
    for rule in _rules("OPENPOD_HOOK_WAIT"):
        if rank == 0 and int(rule[0]) == step and int(rule[1]) == world_size:
            while not os.path.exists(rule[2]):
                if rule[3:] == ["stop"]:
                    from training.ft.preemption import end_by_sigterm, signalled

                    if signalled():
                        end_by_sigterm()
                time.sleep(0.05)


def exit_point(step: int, rank: int) -> None:
    for rule in _rules("OPENPOD_EXIT_AT"):
        if int(rule[0]) == step and int(rule[1]) == rank:
            os._exit(1)


def hang_forever() -> None:  # pragma: no cover - ends by SIGKILL
    """Stop advancing: what the watchdog's stack dump of a hung rank shows."""
    while True:
        time.sleep(1.0)


def hang_point(step: int, rank: int) -> None:
    for rule in _rules("OPENPOD_HANG_AT"):
        if int(rule[0]) == step and int(rule[1]) == rank:
            marker = rule[2]
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue  # fired in an earlier incarnation
            os.close(fd)
            hang_forever()
