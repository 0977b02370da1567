"""How a rank's worker process starts (``OPENPOD_WORKER_START``): exec'd, or forked from a process that imported
everything once.

* ``exec``: a new ``python -m training.worker`` per rank, which imports torch, the runtime and the checkpoint stack
  itself (about 3 s of CPU on the 2-core CI machine, 2026-11-27).
* ``fork``: the starting process (torchrun's agent, training/agent.py; or the ``--restart in-process`` launcher,
  training/ft/inprocess.py) imports those once (:data:`PRELOAD`) and forks every rank, and every replacement, from
  itself.
* ``auto`` (default): ``fork`` on a torch built without CUDA, ``exec`` on a CUDA (or ROCm) build. A CUDA context cannot
  cross a fork, and torchrun's launch config asks the CUDA runtime whether there is a GPU in the agent itself
  (facts: torchrun.launch-config-cuda-check), after which torch refuses CUDA in forked children; fork on a CUDA
  build has not run on a GPU, so it is refused.

A forked worker is made to look like an exec'd one before the worker code runs: the signal dispositions a new
interpreter would have (exec resets every caught signal to its default and keeps the ignored ones), the worker's
own arguments and environment, ``OPENPOD_WORKER_START=fork`` (the result JSON's ``worker_start``).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

ENV = "OPENPOD_WORKER_START"
STARTS = ("auto", "fork", "exec")
WORKER = "training.worker"
# Imported before the first fork (fork only): what a worker would otherwise import at its start or first step.
# training.checkpoint loads its names lazily, so its modules are named here.
PRELOAD = ("training.worker", "training.trainer", "training.checkpoint.manager",
           "torch.distributed.checkpoint", "torch.distributed.checkpoint.state_dict", "torch.distributed.tensor",
           "torch.distributed.fsdp", "torch.distributed.device_mesh", "torch._dynamo")


def start_method(requested: str, cuda_build: bool) -> str:
    """``fork`` or ``exec`` for ``OPENPOD_WORKER_START=requested`` on a torch with or without CUDA; ValueError: why
    not."""
    if requested not in STARTS:
        raise ValueError(f"{ENV}={requested!r}: one of {', '.join(STARTS)}")
    if requested == "fork" and cuda_build:
        raise ValueError(f"{ENV}=fork: this torch is a CUDA build, whose workers must be exec'd (a CUDA "
                         "context cannot cross a fork); use auto or exec")
    if requested == "auto":
        return "exec" if cuda_build else "fork"
    return requested


def preload() -> None:
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)


def fresh_signal_dispositions() -> None:
    """What exec gives a new program, then what Python adds at start: every signal this process catches back to
    its default (the ignored ones stay ignored), SIGINT to Python's KeyboardInterrupt (facts:
    posix.exec-signal-dispositions)."""
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        if callable(handler):
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


def become_worker(module: str, argv: list[str]) -> None:
    """In a forked child, before the worker (``python -m module argv``) runs: a fresh interpreter's signal
    dispositions, the worker's own arguments, ``OPENPOD_WORKER_START=fork``."""
    fresh_signal_dispositions()
    sys.argv = [module, *argv]  # the worker's own arguments, not its parent's
    os.environ[ENV] = "fork"


def close_inherited_sockets() -> None:
    """Close every socket this forked process got from its parent, as an exec'd worker (``close_fds``) has none.
    A socket outlives its closing while any process holds it, and shutting one down acts on every holder (facts:
    posix.socket-shutdown-shared): a worker that kept the launcher's store connections would keep that store open
    after the launcher had gone, and its in-process abort (training/ft/inprocess.py ``abort_transport``, which
    shuts down every TCP connection of its process) broke the launcher's own connection to the store it hosts
    (seen in a 2-node test before this was done)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:  # the descriptor of the listing itself, already closed
            pass


class ForkedWorker:
    """``python -m MODULE ARGS`` (``cmd``) with ``env``, forked from this process instead of exec'd: the child runs
    ``MODULE.run(ARGS)`` (training.worker's) and its stdout goes to this process's stderr, as the launcher's
    ``subprocess.Popen(cmd, env=env, stdout=sys.stderr)`` does. It has the part of :class:`subprocess.Popen` the
    launcher uses: ``pid``, ``returncode``, ``poll``, ``wait``, ``send_signal``, ``kill``; ``returncode`` is ``-N``
    for a worker ended by signal N, as Popen's."""

    def __init__(self, cmd: list[str], env: dict[str, str]):
        if len(cmd) < 3 or cmd[1] != "-m":
            raise ValueError(f"a forked worker runs a module (python -m MODULE ...), not {' '.join(cmd[:3])}")
        self.args, self.returncode = cmd, None
        for stream in (sys.stdout, sys.stderr):  # else what is buffered would be written twice
            stream.flush()
        pid = os.fork()
        if pid == 0:
            _run(cmd[2], cmd[3:], env)  # never returns
        self.pid = pid

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # never a pid the kernel may have given to another process
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _run(module: str, argv: list[str], env: dict[str, str]) -> None:
    """The forked child: the worker's whole life, then its exit status (an exception: its traceback and 1)."""
    import importlib

    from training.process_exit import exit_status_of, exit_without_teardown

    def life() -> int | None:
        close_inherited_sockets()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        os.environ.clear()
        os.environ.update(env)
        become_worker(module, argv)
        return importlib.import_module(module).run(argv)  # by name, as `python -m` finds it (already imported)

    exit_without_teardown(exit_status_of(life))  # never the teardown: it holds a copy of its parent's objects
