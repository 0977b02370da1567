"""Peer replication: each rank's committed snapshot is also held in a buddy node's memory.

Every worker runs a :class:`PeerServer` (a TCP side-channel next to the collective
backend). A rank sends each committed snapshot to its buddy - the same local rank
on the next node - which keeps it in its node-memory tier under ``held/``; that
directory survives worker restarts. A replacement node, whose own memory is empty,
lists what its peers hold and fetches its snapshot over the network.

Wire format: a 4-byte big-endian length, a JSON header, then the raw file bytes
whose sizes the header lists.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import struct
import threading
from pathlib import Path

from training.checkpoint.storage import DirTier, Marker

log = logging.getLogger("training.checkpoint")


def buddy_of(rank: int, world_size: int, local_world_size: int) -> int | None:
    """The same local rank on the next node, or None when the job has a single node."""
    if world_size <= local_world_size:
        return None
    return (rank + local_world_size) % world_size


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise ConnectionError("peer closed the connection")
        got += k
    return bytes(buf)


def _send(sock: socket.socket, header: dict, payloads: list[bytes] = ()) -> None:
    h = json.dumps(header).encode()
    sock.sendall(struct.pack(">I", len(h)) + h)
    for p in payloads:
        sock.sendall(p)


def _recv(sock: socket.socket) -> tuple[dict, list[bytes]]:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    header = json.loads(_recv_exact(sock, n))
    return header, [_recv_exact(sock, s) for s in header.get("sizes", [])]


class PeerServer:
    """Serves this node's memory tiers to peers: ``put`` (hold a buddy's snapshot), ``list``, ``get``."""

    def __init__(self, held: DirTier, own: DirTier | None, host: str = "127.0.0.1"):
        self.held, self.own = held, own
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    server._handle(self.request)
                except (ConnectionError, OSError) as e:
                    log.warning("peer request failed: %s", e)

        self._srv = socketserver.ThreadingTCPServer((host, 0), Handler)
        self._srv.daemon_threads = True
        self.address = (host, self._srv.server_address[1])
        threading.Thread(target=self._srv.serve_forever, name="peer-server", daemon=True).start()

    def _tiers(self) -> list[DirTier]:
        return [t for t in (self.held, self.own) if t is not None]

    def _handle(self, sock: socket.socket) -> None:
        header, payloads = _recv(sock)
        op = header["op"]
        if op == "put":
            marker = Marker.from_json(header["marker"])
            self.held.put_bytes(marker, dict(zip(header["names"], payloads)))
            self.held.retain(marker.rank)
            _send(sock, {"ok": True})
        elif op == "list":
            markers = {m.key: m for t in self._tiers() for m in t.markers()}
            _send(sock, {"markers": [m.to_json() for m in markers.values()]})
        elif op == "get":
            for t in self._tiers():
                for m in t.markers():
                    if m.step == header["step"] and m.rank == header["rank"]:
                        d = t.snapshot_dir(m.step, m.rank)
                        try:
                            data = [(d / n).read_bytes() for n in m.files]
                        except FileNotFoundError:
                            continue
                        _send(sock, {"marker": m.to_json(), "names": list(m.files),
                                     "sizes": [len(b) for b in data]}, data)
                        return
            _send(sock, {"error": f"no snapshot for step {header['step']} rank {header['rank']}"})
        else:
            _send(sock, {"error": f"unknown op {op!r}"})

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()


class PeerClient:
    def __init__(self, address: tuple[str, int], timeout: float = 60.0):
        self.address, self.timeout = tuple(address), timeout

    def _call(self, header: dict, payloads: list[bytes] = ()) -> tuple[dict, list[bytes]]:
        with socket.create_connection(self.address, timeout=self.timeout) as s:
            _send(s, header, payloads)
            reply, data = _recv(s)
        if "error" in reply:
            raise ConnectionError(f"peer {self.address[0]}:{self.address[1]}: {reply['error']}")
        return reply, data

    def put(self, marker: Marker, src: Path) -> None:
        data = [(src / n).read_bytes() for n in marker.files]
        self._call({"op": "put", "marker": marker.to_json(), "names": list(marker.files),
                    "sizes": [len(b) for b in data]}, data)

    def list(self) -> list[Marker]:
        reply, _ = self._call({"op": "list"})
        return [Marker.from_json(m) for m in reply["markers"]]

    def get(self, step: int, rank: int) -> tuple[Marker, dict[str, bytes]]:
        reply, data = self._call({"op": "get", "step": step, "rank": rank})
        return Marker.from_json(reply["marker"]), dict(zip(reply["names"], data))
