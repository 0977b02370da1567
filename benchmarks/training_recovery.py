"""Recovery after losing a node: restore time and steps lost, from buddy memory vs NVMe vs S3.

    python -m benchmarks.training_recovery [--quick]

One model + AdamW state is checkpointed once through every path, then restored into
a fresh model from each source alone, timing the whole restore (fetch, sha256
verification, DCP load):

* buddy memory - the snapshot another node holds in RAM, fetched over the peer
  TCP side-channel (loopback here);
* NVMe - a local directory on disk (page cache dropped first when permitted);
* S3 - a bucket on a moto server running in its own process (HTTP on loopback).

Steps lost per failure = the checkpoint interval that tier sustains (its save cost
in steps, at least 1) / 2 for a failure at a random moment, plus the restore time in
steps. Restart and rendezvous costs are the same for every path and are left out.
"""

from __future__ import annotations

import argparse
import math
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks._ports import free_port
from benchmarks.training_checkpoint import build, train_step
from training.checkpoint import Checkpointer, DirTier
from training.checkpoint.restore import PeerSource
from training.checkpoint.peer import PeerClient
from training.checkpoint.storage import S3Tier
from training.config import MODELS, CheckpointConfig, TierConfig


def start_moto() -> tuple[subprocess.Popen, str]:
    port = free_port()
    exe = Path(sys.executable).parent / "moto_server"
    p = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p, url
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError("moto_server did not start")


def drop_page_cache() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--model", default=None, choices=sorted(MODELS))
    a = ap.parse_args(argv)
    import os

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    model_name = a.model or ("medium" if a.quick else "xl")
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    disk = Path(tempfile.mkdtemp(prefix="recovery-", dir=out))
    shm = Path(tempfile.mkdtemp(prefix="openpod-recovery-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    moto, url = start_moto()
    import boto3

    boto3.client("s3", endpoint_url=url).create_bucket(Bucket="bench")
    try:
        model, opt = build(model_name, 1)
        c = MODELS[model_name]
        batch = torch.randint(c.vocab_size, (1, 33 if a.quick else 65))
        steps = []
        for _ in range(4):
            t0 = time.perf_counter()
            train_step(model, opt, batch)
            steps.append(time.perf_counter() - t0)
        step_time = statistics.median(steps[1:])

        cfg = CheckpointConfig(every=1, peer_replication=False,
                               tiers=[TierConfig("memory", str(shm / "mem"), keep=1)])
        ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=disk / "scratch")
        ck.save(1, model, opt)
        ck.flush()
        mem_write = ck.stats.last_write_seconds
        marker = ck.first.markers()[0]
        src = ck.first.snapshot_dir(1, 0)
        gib = marker.nbytes / 2**30

        # The buddy is another process (another node in production): its own interpreter and GIL.
        buddy = subprocess.Popen([sys.executable, "-m", "training.checkpoint", "serve-peer", str(shm / "buddy.held")],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        buddy_addr = ("127.0.0.1", int(buddy.stdout.readline()))
        t0 = time.perf_counter()
        PeerClient(buddy_addr).put(marker, src)
        t_peer_put = time.perf_counter() - t0
        nvme = DirTier("nvme", disk / "nvme")
        t0 = time.perf_counter()
        nvme.put(src, marker)
        t_nvme_put = time.perf_counter() - t0
        s3 = S3Tier("s3://bench/job", endpoint_url=url)
        t0 = time.perf_counter()
        s3.put(src, marker)
        t_s3_put = time.perf_counter() - t0

        def restore(source) -> float:
            m2, o2 = build(model_name, 1)
            train_step(m2, o2, batch)
            t0 = time.perf_counter()
            source.markers()  # listing is part of finding the newest checkpoint
            info = ck.restorer.load_step(1, [(source, marker)], m2, o2, ck.state(m2, o2))
            dt = time.perf_counter() - t0
            assert info is not None, f"restore from {source.name} failed"
            return dt

        t_peer = restore(PeerSource([buddy_addr], -1, DirTier("memory", shm / "landing", fsync=False)))
        cold = drop_page_cache()
        t_nvme = restore(nvme)
        t_s3 = restore(s3)
        buddy.stdin.close()
        buddy.wait()
        ck.close()

        rows = [("buddy memory (peer)", mem_write + t_peer_put, t_peer),
                ("local NVMe dir", mem_write + t_nvme_put, t_nvme),
                ("S3 (moto server)", mem_write + t_s3_put, t_s3)]
        print(f"model {model_name}: checkpoint {gib:.2f} GiB; step time {step_time * 1e3:.0f} ms (1 thread); "
              f"NVMe restore with {'cold' if cold else 'WARM (could not drop)'} page cache")
        print()
        print(f"{'source':22} {'save cost':>10} {'interval':>9} {'restore':>9} {'steps lost':>11} {'vs peer':>8}")
        lost_peer = None
        for name, save_cost, rest in rows:
            k = max(1, math.ceil(save_cost / step_time))
            lost = k / 2 + rest / step_time
            lost_peer = lost_peer or lost
            print(f"{name:22} {save_cost:9.2f}s {k:6d} st {rest:8.2f}s {lost:11.1f} {lost / lost_peer:7.1f}x")
        print()
        print(f"restore time ratios: NVMe / peer = {t_nvme / t_peer:.1f}x, S3 / peer = {t_s3 / t_peer:.1f}x")
    finally:
        moto.terminate()
        moto.wait()
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)


if __name__ == "__main__":
    main()
