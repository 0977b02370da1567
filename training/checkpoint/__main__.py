"""``python -m training.checkpoint serve-peer HELD_DIR``: a stand-alone peer server over a directory.

Prints its port, serves ``list``/``get``/``put`` until standard input closes. Used by
the recovery benchmark to play the buddy node in a separate process.
"""

import sys

from training.checkpoint.peer import PeerServer
from training.checkpoint.storage import DirTier


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "serve-peer":
        print("usage: python -m training.checkpoint serve-peer HELD_DIR", file=sys.stderr)
        return 2
    server = PeerServer(DirTier("memory", argv[1], fsync=False), own=None)
    print(server.address[1], flush=True)
    sys.stdin.read()
    server.close()
    return 0


sys.exit(main(sys.argv[1:]))
