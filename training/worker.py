"""Worker entry point, one per rank: ``python -m training.worker --config ...``, started by torchrun or the
``--restart in-process`` launcher, or forked from them (training/worker_start.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path


def _record_stop_requests() -> None:
    """--restart in-process: a SIGTERM during start-up is recorded, not fatal; the runtime's own request takes it
    over (preemption.py)."""
    if os.environ.get("OPENPOD_RESTART_STORE"):
        from training.ft.preemption import StopRequest

        StopRequest().install()


if __name__ == "__main__":
    _record_stop_requests()  # first thing, before the imports below

from training import worker_start
from training.config import RunConfig
from training.storage_utils import write_json_atomic


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.worker")
    ap.add_argument("--config", required=True)
    ap.add_argument("--result-dir", required=True)
    args = ap.parse_args(argv)
    if os.environ.get("OPENPOD_STANDBY"):  # a warm spare (--restart in-process): imports first, then a rank
        from training import faults
        from training.trainer import prepare  # torch, the model, the runtime: the start-up paid before a fault
        from training.ft.inprocess import standby_assignment

        faults.die_with_parent()
        prepare()
        r, g, local = standby_assignment(os.environ["OPENPOD_RESTART_STORE"], os.environ["OPENPOD_STANDBY"])
        os.environ.update(RANK=str(r), LOCAL_RANK=str(local), OPENPOD_GENERATION=str(g))
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True,  # a forked worker: not the agent's
                        format=f"[rank {rank}] %(asctime)s %(name)s %(levelname)s %(message)s")
    if os.environ.get("OPENPOD_STANDBY"):
        logging.getLogger("training").info("standby worker %s takes rank %s, generation %s",
                                           os.environ["OPENPOD_STANDBY"], rank, os.environ["OPENPOD_GENERATION"])
    from training.checkpoint import RefusedFreshStart
    from training.trainer import train

    cfg = RunConfig.load(args.config)
    try:
        if cfg.restart == "in-process":  # the launcher started this worker (no torchrun): see training/ft/inprocess.py
            result = _train_in_process(cfg, train)
        else:
            result = train(cfg)
        result["pid"] = os.getpid()
        result["worker_start"] = os.environ.get(worker_start.ENV, "exec")  # fork | exec
    except RefusedFreshStart as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        (Path(args.result_dir) / "refused.txt").write_text(str(e))  # the launcher's last word
        return 3
    write_json_atomic(Path(args.result_dir) / f"result-{int(rank):05d}.json", result)
    return 0


def run(argv: list[str]) -> int:
    """A worker forked by its launcher (training/worker_start.py): what ``python -m training.worker`` does."""
    _record_stop_requests()
    return main(argv)


def _train_in_process(cfg: RunConfig, train) -> dict:
    from training import faults
    from training.ft.inprocess import InProcessRestart
    from training.runtime import backend

    faults.die_with_parent()  # never outlive the launcher
    restarter = InProcessRestart(store_addr=os.environ["OPENPOD_RESTART_STORE"], rank=int(os.environ["RANK"]),
                                 world_size=int(os.environ["WORLD_SIZE"]), backend=backend(cfg),
                                 pg_timeout_s=cfg.pg_timeout_seconds, max_restarts=cfg.restart_max)
    result = restarter.run(lambda: train(cfg))
    result["restart"] = restarter.summary()
    return result


if __name__ == "__main__":
    from training.process_exit import run_and_exit

    run_and_exit(main)  # an exec'd CPU worker leaves without the interpreter's teardown (training/process_exit.py)
