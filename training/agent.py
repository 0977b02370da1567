"""The per-node agent the launcher starts: ``python -m training.agent <torchrun arguments> -m training.worker ...``.

It is torchrun (torch.distributed.run: the same arguments, rendezvous, restarts and signal handling) with one
choice added, how each rank's worker process starts (``OPENPOD_WORKER_START``, training/worker_start.py): with
``fork`` the agent imports torch, the runtime and the checkpoint stack once, then forks every rank, and every
restarted rank, from itself (torchrun's function entry point with ``start_method="fork"``); on the 2-core CI
machine a 2-rank run of the tiny model took 4.8 s of wall and 5.9 s of CPU instead of 6.8 s and 9.9 s exec'd
(2026-11-27). With ``exec`` it is torchrun's own way, a new ``python -m training.worker`` per rank.

A forked rank also gets its own session, as torchrun starts exec'd workers with ``start_new_session``.
"""

from __future__ import annotations

import os
import sys

from training.worker_start import ENV, WORKER, become_worker, preload, start_method


def run_rank(*argv: str) -> None:
    """A forked rank: become what an exec'd worker would be, then run the worker (its exit status kept)."""
    os.setsid()
    become_worker(WORKER, list(argv))  # the agent's torchrun signal handlers would turn a SIGTERM into an exception
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
        how = start_method(os.environ.get(ENV, "auto"), torch.backends.cuda.is_built())
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if how == "exec" or not (args.module and args.training_script == WORKER):
        os.environ[ENV] = "exec"
        torchrun.main(argv)  # torchrun itself: a new python per rank
        exit_without_teardown(0)  # the job succeeded (a failure raises, with torchrun's report)
    from torch.distributed.elastic.multiprocessing.errors import record
    from torch.distributed.launcher.api import elastic_launch

    preload()
    args.start_method = "fork"
    config, _, _ = torchrun.config_from_args(args)
    record(elastic_launch(config=config, entrypoint=run_rank))(*args.training_script_args)
    exit_without_teardown(0)  # the job succeeded and every worker has exited (a failure raises)


if __name__ == "__main__":
    main()
