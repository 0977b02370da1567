"""Worker entry point, one per rank, started by torchrun: ``python -m training.worker --config ...``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from training.config import RunConfig
from training.storage_utils import write_json_atomic


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.worker")
    ap.add_argument("--config", required=True)
    ap.add_argument("--result-dir", required=True)
    args = ap.parse_args(argv)
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"[rank {rank}] %(asctime)s %(name)s %(levelname)s %(message)s")
    from training.checkpoint import RefusedFreshStart
    from training.trainer import train

    try:
        result = train(RunConfig.load(args.config))
    except RefusedFreshStart as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        (Path(args.result_dir) / "refused.txt").write_text(str(e))  # the launcher's last word
        return 3
    write_json_atomic(Path(args.result_dir) / f"result-{int(rank):05d}.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
