"""Peer channel: one snapshot's put and get latency on loopback, with Nagle as shipped and with TCP_NODELAY.

The channel writes a header, then each file (sendfile), as separate writes with Nagle on; a delayed-ACK stall
(~40 ms on Linux) would show as a median at or above 40 ms for small parts. Each transfer is a fresh connection,
as in training/checkpoint/peer.py. ``--mss`` sets the client's segment size (a real network's 1448 instead of
loopback's 64 KiB). Reports the median [min-max] of ``--runs`` transfers per case.

Run: python -m benchmarks.peer_latency [--quick] [--files 1] [--size 1000] [--mss 1448]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from training.checkpoint import peer  # noqa: E402
from training.checkpoint.peer import PeerClient, PeerServer  # noqa: E402
from training.checkpoint.storage import DirTier, Marker, describe_dir  # noqa: E402


def measure(tmp: Path, files: int, size: int, runs: int, mss: int | None, nodelay: bool) -> tuple[list, list]:
    real_send = peer._send

    def send(sock, header, paths=()):
        if nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        real_send(sock, header, paths)

    def connect(client):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if mss:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
        s.settimeout(client.timeout)
        s.connect(client.address)
        return s

    src = tmp / "src"
    src.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (src / f"__{i}_0.distcp").write_bytes(bytes([i % 256]) * size)
    (src / ".metadata").write_bytes(b"m" * 300)
    described = describe_dir(src)
    server = PeerServer(DirTier("memory", tmp / "held", keep=2, fsync=False), None, host="127.0.0.1", secret=None)
    peer._send, real_connect, PeerClient._connect = send, PeerClient._connect, connect
    put, get = [], []
    try:
        for step in range(1, runs + 2):  # the first transfer warms up
            marker = Marker(step=step, rank=0, world_size=1, files=described, replicated=True)
            t0 = time.perf_counter()
            PeerClient(server.address).put(marker, src)
            t1 = time.perf_counter()
            PeerClient(server.address).get(step, 0, DirTier("memory", tmp / f"into{step}", fsync=False))
            t2 = time.perf_counter()
            if step > 1:
                put.append(t1 - t0)
                get.append(t2 - t1)
    finally:
        peer._send, PeerClient._connect = real_send, real_connect
        server.close()
    return put, get


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:.1f} ms [{min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f}]"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 transfers per case instead of --runs")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--files", type=int, default=1, help="tensor files per snapshot (plus a 300-byte .metadata)")
    ap.add_argument("--size", type=int, default=1000, help="bytes per tensor file")
    ap.add_argument("--mss", type=int, default=None, help="the client's TCP_MAXSEG (default: the kernel's)")
    a = ap.parse_args(argv)
    runs = 5 if a.quick else a.runs
    print(f"{a.files} file(s) of {a.size} B + .metadata, mss {a.mss or 'default'}, median [min-max] of {runs}")
    for nodelay in (False, True):
        with tempfile.TemporaryDirectory() as d:
            put, get = measure(Path(d), a.files, a.size, runs, a.mss, nodelay)
        print(f"  {'TCP_NODELAY' if nodelay else 'Nagle (shipped)':16s} put {fmt(put)}  get {fmt(get)}")


if __name__ == "__main__":
    main()
