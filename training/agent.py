"""The per-node agent the launcher starts: ``python -m training.agent <torchrun arguments> -m training.worker ...``.

It is torchrun (torch.distributed.run: the same arguments, rendezvous, restarts and signal handling) with one
choice added, how each rank's worker process starts (``OPENPOD_WORKER_START``):

* ``fork``: the agent imports torch, the runtime and the checkpoint stack once, then forks every rank from itself
  (torchrun's function entry point with ``start_method="fork"``). A worker starts with everything imported, so a
  start or restart costs no imports: on the 2-core CI machine a 2-rank run of the tiny model took 4.8 s of wall
  and 5.9 s of CPU instead of 6.8 s and 9.9 s (2026-11-27).
* ``exec``: torchrun's own way, a new ``python -m training.worker`` per rank that imports everything itself.
* ``auto`` (default): ``fork`` on a torch built without CUDA, ``exec`` on a CUDA (or ROCm) build. A CUDA context cannot
  cross a fork, and torchrun's launch config asks the CUDA runtime whether there is a GPU in this very process
  (facts: torchrun.launch-config-cuda-check), after which torch refuses CUDA in forked children; fork on a CUDA
  build has not run on a GPU, so it is refused.

A forked worker is made to look like an exec'd one before the worker code runs: its own session (torchrun starts
exec'd workers with ``start_new_session``), the signal dispositions of a fresh interpreter (the agent's torchrun
handlers would otherwise turn a SIGTERM into an exception), and the worker's own arguments.
"""

from __future__ import annotations

import os
import signal
import sys

WORKER = "training.worker"
STARTS = ("auto", "fork", "exec")
# Imported by the agent before it forks (fork only): what a worker would otherwise import at its start or first
# step. training.checkpoint loads its names lazily, so its modules are named here.
PRELOAD = ("training.worker", "training.trainer", "training.checkpoint.manager",
           "torch.distributed.checkpoint", "torch.distributed.checkpoint.state_dict", "torch.distributed.tensor",
           "torch.distributed.fsdp", "torch.distributed.device_mesh", "torch._dynamo")
# The dispositions a new interpreter starts with, for the signals torchrun's agent handles (its
# --signals-to-handle default) - a forked worker inherits the agent's handlers for them.
FRESH_DISPOSITIONS = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler,
                      signal.SIGHUP: signal.SIG_DFL, signal.SIGQUIT: signal.SIG_DFL}


def start_method(requested: str, cuda_build: bool) -> str:
    """``fork`` or ``exec`` for ``OPENPOD_WORKER_START=requested`` on a torch with or without CUDA; ValueError: why
    not."""
    if requested not in STARTS:
        raise ValueError(f"OPENPOD_WORKER_START={requested!r}: one of {', '.join(STARTS)}")
    if requested == "fork" and cuda_build:
        raise ValueError("OPENPOD_WORKER_START=fork: this torch is a CUDA build, whose workers must be exec'd (a CUDA "
                         "context cannot cross a fork); use auto or exec")
    if requested == "auto":
        return "exec" if cuda_build else "fork"
    return requested


def run_rank(*argv: str) -> None:
    """A forked rank: become what an exec'd worker would be, then run the worker (its exit status kept)."""
    os.setsid()
    for signum, disposition in FRESH_DISPOSITIONS.items():
        signal.signal(signum, disposition)
    sys.argv = [WORKER, *argv]  # the worker's own arguments, not the agent's
    os.environ["OPENPOD_WORKER_START"] = "fork"
    from training.worker import main

    rc = main(list(argv))
    from training.ft.preemption import signalled

    if rc:
        raise SystemExit(rc)  # torchrun reads it as the rank's exit code, as an exec'd worker's
    if signalled():
        # A returned value (or SystemExit(0), which torch's @record turns into one) is handed to the agent, and the
        # rank then waits until the agent has read it (facts: torchrun.function-return-wait). An agent that
        # signalled its workers is shutting down and reads nothing: it waits --shutdown-timeout for them to exit,
        # then kills them. So a rank stopped by SIGTERM ends here, as an exec'd worker would: exit hooks run,
        # non-daemon threads joined, streams flushed.
        from training.process_exit import exit_without_teardown

        exit_without_teardown(0)


def main(argv: list[str] | None = None) -> None:
    import torch
    import torch.distributed.run as torchrun

    from training.process_exit import exit_without_teardown

    args = torchrun.get_args_parser().parse_args(argv)
    try:
        how = start_method(os.environ.get("OPENPOD_WORKER_START", "auto"), torch.backends.cuda.is_built())
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if how == "exec" or not (args.module and args.training_script == WORKER):
        os.environ["OPENPOD_WORKER_START"] = "exec"
        torchrun.main(argv)  # torchrun itself: a new python per rank
        exit_without_teardown(0)  # the job succeeded (a failure raises, with torchrun's report)
    import importlib

    from torch.distributed.elastic.multiprocessing.errors import record
    from torch.distributed.launcher.api import elastic_launch

    for module in PRELOAD:
        importlib.import_module(module)
    args.start_method = "fork"
    config, _, _ = torchrun.config_from_args(args)
    record(elastic_launch(config=config, entrypoint=run_rank))(*args.training_script_args)
    exit_without_teardown(0)  # the job succeeded and every worker has exited (a failure raises)


if __name__ == "__main__":
    main()
