"""Checkpoint chaos runs (issue 24): random SIGKILL, per-rank copy failures, full disks per tier.

Each scenario runs ``python -m training run`` (tiny model, 2 ranks, FSDP2 so every rank writes its own part of
each step; memory + NVMe + FSx + S3 on a moto server; checkpoint every 5 steps, FSx every 2nd, S3 every 4th
by default, i.e. steps 10 and 20 in FSx, step 20 in S3) with a fault hook from training/faults.py, reruns the
same command where the fault ended the job, and compares the final ``state_sha256`` with an uninterrupted
run's. The SIGKILL trials kill the whole job at a random moment and rerun it, every other one without the
node's memory tier (a replaced node). A scenario passes when the job ends bit-identical to the baseline, or
refuses with one clear line. Prints a Markdown table (the one in docs/training.md, "Chaos runs").

    .venv/bin/python benchmarks/chaos_checkpoint.py [--kills 4] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


S3 = {"url": None}


def args_for(tmp: Path) -> list[str]:
    return [sys.executable, "-m", "training", "run", "--model", "tiny", "--steps", "20", "--checkpoint-every", "5",
            "--checkpoint-dir", str(tmp / "ck"), "--memory-dir", str(tmp / "shm"), "--nvme-dir", str(tmp / "nvme"),
            "--nproc-per-node", "2", "--parallelism", "fsdp", "--seed", "1", "--fsx-every", "2",
            "--s3-uri", f"s3://chaos/{tmp.name}", "--s3-endpoint-url", S3["url"]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_with(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENPOD_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", AWS_ACCESS_KEY_ID="chaos", AWS_SECRET_ACCESS_KEY="chaos",
               AWS_DEFAULT_REGION="us-east-1", **extra)
    return env


def run(tmp: Path, **faults: str) -> tuple[int, dict | None, str]:
    r = subprocess.run(args_for(tmp), cwd=ROOT, env=env_with(**faults), capture_output=True, text=True, timeout=600)
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    return r.returncode, (json.loads(lines[-1]) if r.returncode == 0 and lines else None), r.stderr


def killed_run(tmp: Path, delay: float) -> None:
    p = subprocess.Popen(args_for(tmp), cwd=ROOT, env=env_with(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(delay)
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


SCENARIOS = {
    "rank 1's FSx copy of step 10 fails once": {"OPENPOD_FAULT_PUT": "fsx@10@1@1"},
    "rank 1's FSx copy of step 20 fails (every try)": {"OPENPOD_FAULT_PUT": "fsx@20@1"},
    "rank 1's S3 upload of step 20 fails once": {"OPENPOD_FAULT_PUT": "s3@20@1@1"},
    "rank 0's S3 upload of step 20 fails (every try)": {"OPENPOD_FAULT_PUT": "s3@20@0"},
    "memory tier full at step 10 (all ranks)": {"OPENPOD_FAULT_ENOSPC": "memory@10"},
    "memory tier full on rank 1 at every step": {"OPENPOD_FAULT_ENOSPC": "memory@*@1"},
    "NVMe full at step 10": {"OPENPOD_FAULT_ENOSPC": "nvme@10"},
    "FSx full at every step on rank 1": {"OPENPOD_FAULT_ENOSPC": "fsx@*@1"},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=4, help="random-SIGKILL trials")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="the first scenario and one SIGKILL trial (make bench)")
    a = ap.parse_args()
    scenarios = dict(list(SCENARIOS.items())[:1]) if a.quick else SCENARIOS
    kills = 1 if a.quick else a.kills
    rng = random.Random(a.seed)
    rows = []
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    S3["url"] = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=S3["url"], aws_access_key_id="chaos", aws_secret_access_key="chaos",
                 region_name="us-east-1").create_bucket(Bucket="chaos")
    with tempfile.TemporaryDirectory(prefix="openpod-chaos-") as d:
        t0 = time.perf_counter()
        base_rc, base, err = run(Path(d, "baseline"))
        wall = time.perf_counter() - t0
        assert base_rc == 0, err[-2000:]
        want = base["state_sha256"]
        for name, faults in scenarios.items():
            tmp = Path(d, name.replace(" ", "_").replace("'", ""))
            t0 = time.perf_counter()
            rc, out, err = run(tmp, **faults)
            ck = (out or {}).get("checkpoints", {})
            verdict = "bit-identical" if out and out["state_sha256"] == want else f"DIFFERS (exit {rc})"
            rows.append((name, verdict, ck.get("failed", "-"), json.dumps(ck.get("promote_failed", {})),
                         json.dumps(ck.get("durable", {})), f"{time.perf_counter() - t0:.0f}"))
        for i in range(kills):
            tmp = Path(d, f"kill{i}")
            delay = rng.uniform(0.4, 0.95) * wall  # start-up is about a third of a run
            t0 = time.perf_counter()
            killed_run(tmp, delay)
            lost = i % 2 == 1
            if lost:  # the node is replaced: its memory tier is gone
                shutil.rmtree(tmp / "shm", ignore_errors=True)
            rc, out, err = run(tmp)
            if out:
                verdict = "bit-identical" if out["state_sha256"] == want else "DIFFERS"
                extra = f"resumed from step {out['restored_step']} ({(out['restored_from'] or 'fresh').split(':')[0]})"
            else:
                last = err.strip().splitlines()[-1] if err.strip() else ""
                verdict = f"refused: {last}" if rc == 3 else f"FAILED (exit {rc})"
                extra = ""
            rows.append((f"SIGKILL of the job after {delay:.1f} s, rerun{' without its memory tier' if lost else ''}",
                         verdict, "-", "-", extra,
                         f"{time.perf_counter() - t0:.0f}"))
    server.stop()
    print("| scenario | outcome | saves failed | copies failed | newest complete step / resume | s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    main()
