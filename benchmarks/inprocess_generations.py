"""In-process restart over many generations (issue 24): the survivor's fds, threads and memory-tier files.

Runs ``python -m training run --restart in-process`` (tiny model, 2 gloo ranks, checkpoint every 5 steps) with
``OPENPOD_EXIT_AT=12@1``: rank 1 exits before step 12 in every incarnation, so the launcher replaces it again
and again and rank 0 - one process throughout - re-forms its process group each generation (restore step 10,
steps 10-11, the failure) until ``--max-restarts`` is used up. Rank 0 logs its open fds and threads (Python's
``threading.active_count()`` and the kernel's ``/proc/self/task``) as it joins each generation; this script
counts the files under the memory tier (``--memory-dir``) at the same moments, prints one row per generation
and exits 1 if any figure grew (the lowest of the last three generations above the lowest of generations 1-3).
The table in docs/training.md, "In-process restart", is its output.

    .venv/bin/python -m benchmarks.inprocess_generations [--generations 20]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOINED = re.compile(r"rank 0 joined the process group of generation (\d+) in [\d.]+s "
                    r"\(fds (\d+), threads (\d+) python (\d+) os\)")


def measure(generations: int, work: Path) -> dict[int, tuple[int, int, int, int]]:
    """generation -> (fds, Python threads, OS threads, memory-tier files) of the surviving rank 0."""
    shm, log_path = work / "shm", work / "run.log"
    cmd = [sys.executable, "-m", "training", "run", "--model", "tiny", "--steps", "20", "--checkpoint-every", "5",
           "--checkpoint-dir", str(work / "ck"), "--memory-dir", str(shm), "--nproc-per-node", "2",
           "--restart", "in-process", "--max-restarts", str(generations)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENPOD_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENPOD_EXIT_AT="12@1")
    seen: dict[int, tuple[int, int, int, int]] = {}
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        while p.poll() is None:
            for m in JOINED.finditer(log_path.read_text()):
                g = int(m.group(1))
                if g not in seen:
                    files = sum(1 for f in shm.rglob("*") if f.is_file() and ".beats" not in f.parts)
                    seen[g] = (*map(int, m.group(2, 3, 4)), files)
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    if len(seen) < generations + 1:
        sys.exit(f"only generations {sorted(seen)} seen; log: {log_path}")
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.inprocess_generations", description=__doc__.splitlines()[0])
    ap.add_argument("--generations", type=int, default=20, help="in-process restarts to go through (default 20)")
    ap.add_argument("--quick", action="store_true", help="6 generations (make bench)")
    a = ap.parse_args(argv)
    n = 6 if a.quick else a.generations
    if n < 4:
        ap.error(f"--generations: must be >= 4 (generations 1-3 are the reference), got {n}")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="openpod-generations-") as tmp:
        seen = measure(n, Path(tmp))
    print("| generation | open fds | threads (Python) | threads (OS) | memory-tier files |")
    print("|---|---|---|---|---|")
    for g in sorted(seen):
        print(f"| {g} | " + " | ".join(map(str, seen[g])) + " |")
    # A generation's peer server closes in the background (0.5 s poll): one join may still count it. A leak
    # raises every later figure, so the lowest of the last three is compared with the lowest of generations 1-3.
    grew = [name for i, name in enumerate(["fds", "Python threads", "OS threads", "memory-tier files"])
            if min(seen[g][i] for g in range(n - 2, n + 1)) > min(seen[g][i] for g in (1, 2, 3))]
    span = f"generations 1-3 to {n - 2}-{n}"
    print(f"\n{n} generations in {time.monotonic() - t0:.0f}s; "
          + (f"grew from {span}: {', '.join(grew)}" if grew else f"flat from {span}"))
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main())
