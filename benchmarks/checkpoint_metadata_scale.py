"""Shared-tier metadata cost at 8, 64 and 1024 simulated ranks, against a local S3 (moto server).

For each world size W it writes ``--keep`` complete steps in the checkpoint layout (per rank: a DCP
``.metadata``, one ``__0_0.distcp`` and the commit marker; tiny bodies: metadata cost does not depend on the
data's size) plus one step only half the ranks reached, seals the complete steps (one manifest each, as the
promoter does), then counts the S3 requests and times one rank's

* ``markers()`` - what every rank reads at restore;
* ``index()`` - what every rank's retention reads after each copy;

and the same two with the reading of ca277c7 (one ``ListObjectsV2`` of every object under ``step_``, one
``GetObject`` per marker, for restore and retention alike). Job-wide figures are one rank's times W.

    .venv/bin/python benchmarks/checkpoint_metadata_scale.py [--worlds 8,64,1024] [--keep 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks._ports import free_port
from training.checkpoint.storage import MARKER_SUFFIX, Marker, S3Tier, checkpoint_key


def populate(tier: S3Tier, world: int, steps: list[int], partial: int) -> None:
    def part(step_rank):
        step, rank = step_rank
        key = checkpoint_key(step, rank)
        files = {}
        for name, body in ((".metadata", b"m" * 200), ("__0_0.distcp", b"d" * 1000)):
            tier.s3.put_object(Bucket=tier.bucket, Key=tier._key(f"{key}/{name}"), Body=body)
            files[name] = {"size": len(body), "blake3": "0" * 64}
        m = Marker(step=step, rank=rank, world_size=world, files=files, replicated=False)
        tier.s3.put_object(Bucket=tier.bucket, Key=tier._key(key + MARKER_SUFFIX), Body=m.to_json().encode())

    jobs = [(s, r) for s in steps for r in range(world)] + [(partial, r) for r in range(world // 2)]
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(part, jobs))
    for s in steps:
        tier.seal(s, world)


def old_markers(tier: S3Tier) -> list[Marker]:
    """ca277c7 training/checkpoint/storage.py S3Tier.markers: every object listed, every marker read."""
    out = []
    for page in tier.s3.get_paginator("list_objects_v2").paginate(Bucket=tier.bucket, Prefix=tier._key("step_")):
        for obj in page.get("Contents", []):
            if obj["Key"].endswith(MARKER_SUFFIX):
                out.append(Marker.from_json(tier.s3.get_object(Bucket=tier.bucket, Key=obj["Key"])["Body"].read()))
    return out


def measure(tier: S3Tier, fn) -> tuple[dict[str, int], float]:
    calls: dict[str, int] = {}

    def count(event_name, **_kw):
        op = event_name.rsplit(".", 1)[-1]
        calls[op] = calls.get(op, 0) + 1

    tier.s3.meta.events.register("before-call.s3", count)
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    tier.s3.meta.events.unregister("before-call.s3", count)
    return calls, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", default="8,64,1024")
    ap.add_argument("--keep", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="--worlds 8,64 (make bench)")
    a = ap.parse_args()
    if a.quick:
        a.worlds = "8,64"
    from moto.server import ThreadedMotoServer

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        for world in map(int, a.worlds.split(",")):
            tier = S3Tier(f"s3://bench-{world}/job", endpoint_url=url)
            tier.s3.create_bucket(Bucket=f"bench-{world}")
            steps = [10 * (i + 1) for i in range(a.keep)]
            populate(tier, world, steps, partial=10 * (a.keep + 1))
            for what, fn in (("restore listing (old)", lambda: old_markers(tier)),
                             ("restore listing (manifests)", tier.markers),
                             ("retention listing (old)", lambda: old_markers(tier)),
                             ("retention listing (names)", tier.index)):
                calls, dt = measure(tier, fn)
                n = sum(calls.values())
                rows.append((world, what, json.dumps(calls, sort_keys=True), n, n * world, f"{dt * 1000:.0f}"))
    finally:
        server.stop()
    print(f"| ranks | one rank's read (keep {a.keep} complete steps + 1 partial) | requests | per rank | "
          "job-wide (x ranks) | ms (one rank, moto) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    main()
