"""``python -m training.checkpoint``: checkpoint tools.

``serve-peer HELD_DIR``
    A stand-alone peer server over a directory: prints its port, serves ``list``/``get``/``put`` until
    standard input closes (the recovery benchmark plays the buddy node with it).
``export SOURCE OUT [--step N] [--dtype keep|fp32|bf16|fp16] [--format safetensors|torch]``
    One step's model tensors, merged from every rank's snapshot of any world size, as one file
    (training/checkpoint/export.py). Refuses a partial step with one line.
"""

import argparse
import json
import sys


def _serve_peer(held: str) -> int:
    from training.checkpoint.peer import PeerServer
    from training.checkpoint.storage import DirTier

    server = PeerServer(DirTier("memory", held, fsync=False), own=None)
    print(server.address[1], flush=True)
    sys.stdin.read()
    server.close()
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.checkpoint", description="checkpoint tools")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve-peer", help="a stand-alone peer server over HELD_DIR")
    p.add_argument("held_dir")
    p = sub.add_parser("export", help="one step's model tensors as one safetensors (or torch) file")
    p.add_argument("source", help="a tier: directory (FSx, NVMe, memory) or s3://bucket/prefix")
    p.add_argument("out", help="the file to write (atomically)")
    p.add_argument("--step", type=int, default=None, help="default: the newest complete step")
    p.add_argument("--dtype", default="keep", help="keep, fp32, bf16 or fp16 (floating-point tensors)")
    p.add_argument("--format", default="safetensors", help="safetensors or torch")
    p.add_argument("--s3-endpoint-url", default=None)
    a = ap.parse_args(argv)
    if a.cmd == "serve-peer":
        return _serve_peer(a.held_dir)
    from training.checkpoint.export import ExportError, export

    try:
        print(json.dumps(export(a.source, a.out, step=a.step, dtype=a.dtype, fmt=a.format,
                                endpoint_url=a.s3_endpoint_url), sort_keys=True))
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an unreadable source or unwritable OUT: one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
