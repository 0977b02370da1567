"""Peer replication: each rank's committed snapshot is also held in a buddy node's memory.

Every worker runs a :class:`PeerServer` (a TCP side-channel next to the collective
backend). A rank sends each committed snapshot to its buddy - the same local rank
on the next node - which keeps it in its node-memory tier under ``held/``; that
directory survives worker restarts. A replacement node, whose own memory is empty,
lists what its peers hold and fetches its snapshot over the network.

Wire format: a 4-byte big-endian length, a JSON header, then the raw file bytes
whose sizes the header lists (sent with sendfile, received in 4 MiB chunks and
hashed on the fly, so a damaged transfer is never committed).
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import struct
import threading
from pathlib import Path

from training.checkpoint import peer_auth
from training.checkpoint.storage import HASHERS, CorruptCheckpoint, DirTier, Marker, file_hash

log = logging.getLogger("training.checkpoint")


def buddy_of(rank: int, world_size: int, local_world_size: int) -> int | None:
    """The same local rank on the next node, or None when the job has a single node."""
    if world_size <= local_world_size:
        return None
    return (rank + local_world_size) % world_size


_BUF = 4 << 20


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise ConnectionError("peer closed the connection")
        got += k
    return bytes(buf)


def _send(sock: socket.socket, header: dict, files: list[Path] = ()) -> None:
    """Header, then each file's bytes straight from the page cache (sendfile)."""
    h = json.dumps(header).encode()
    sock.sendall(struct.pack(">I", len(h)) + h)
    for p in files:
        with open(p, "rb") as f:
            sock.sendfile(f)


def _recv_header(sock: socket.socket) -> dict:
    (n,) = struct.unpack(">I", _recv_exact(sock, 4))
    return json.loads(_recv_exact(sock, n))


def check_file_name(name: object) -> str:
    """``name`` if it is one plain file name: no separators, no ``.``/``..``, no NUL; else ValueError.

    Peers choose the names of the files they send; a name is joined to the snapshot
    directory only after this check, so no peer can write outside it.
    """
    if (not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name
            or "\x00" in name or len(name) > 255):
        raise ValueError(f"bad snapshot file name {name!r}: allowed are plain names without separators or '..'")
    return name


def _recv_snapshot(sock: socket.socket, header: dict, tier: DirTier) -> Marker:
    """Stream the files into ``tier``, checking each file's hash on the fly; commit only if all match."""
    marker = Marker.from_json(header["marker"])
    names = [check_file_name(n) for n in header["names"]]
    if sorted(names) != sorted(check_file_name(n) for n in marker.files) or len(names) != len(header["sizes"]):
        raise ValueError("snapshot header: names and sizes must list exactly the marker's files")
    hashes = {name: file_hash(f) for name, f in marker.files.items()}  # ValueError: no known algorithm
    d = tier.prepare(marker.step, marker.rank)
    buf = bytearray(_BUF)
    for name, size in zip(header["names"], header["sizes"]):
        alg, want = hashes[name]
        h, left = HASHERS[alg](), size
        with open(d / name, "wb") as f:
            while left:
                k = sock.recv_into(buf, min(len(buf), left))
                if not k:
                    raise ConnectionError("peer closed the connection")
                view = memoryview(buf)[:k]
                h.update(view)
                f.write(view)
                left -= k
        if h.hexdigest() != want:
            tier.delete(marker.step, marker.rank)
            raise CorruptCheckpoint(f"peer copy of {marker.key}: file {name} fails its {alg} check")
    tier.commit(marker)
    return marker


class PeerServer:
    """Serves this node's memory tiers to peers: ``put`` (hold a buddy's snapshot), ``list``, ``get``."""

    def __init__(self, held: DirTier, own: DirTier | None, host: str = "127.0.0.1",
                 secret: bytes | None = None):
        """``secret``: the job's peer secret (default: ``OPENPOD_PEER_SECRET``); when set, every
        request must carry its HMAC (:mod:`training.checkpoint.peer_auth`)."""
        self.held, self.own = held, own
        self.secret = secret if secret is not None else peer_auth.secret_from_env()
        if self.secret is None:
            log.warning("peer server without %s: requests are not authenticated", peer_auth.ENV)
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    server._handle(self.request)
                except (ConnectionError, OSError, CorruptCheckpoint) as e:
                    log.warning("peer request failed: %s", e)

        self._srv = socketserver.ThreadingTCPServer((host, 0), Handler)
        self._srv.daemon_threads = True
        self.address = (host, self._srv.server_address[1])
        threading.Thread(target=self._srv.serve_forever, name="peer-server", daemon=True).start()

    def _tiers(self) -> list[DirTier]:
        return [t for t in (self.held, self.own) if t is not None]

    def _handle(self, sock: socket.socket) -> None:
        header = _recv_header(sock)
        if self.secret is not None:
            try:
                peer_auth.verify(self.secret, header)
            except PermissionError as e:
                _send(sock, {"error": f"refused: {e}"})
                return
        op = header["op"]
        if op == "put":
            try:
                marker = _recv_snapshot(sock, header, self.held)
            except (ValueError, TypeError, KeyError) as e:
                _send(sock, {"error": f"refused: {e}"})
                return
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
                        paths = [d / n for n in m.files]
                        if not all(p.is_file() for p in paths):
                            continue
                        _send(sock, {"marker": m.to_json(), "names": list(m.files),
                                     "sizes": [m.files[n]["size"] for n in m.files]}, paths)
                        return
            _send(sock, {"error": f"no snapshot for step {header['step']} rank {header['rank']}"})
        else:
            _send(sock, {"error": f"unknown op {op!r}"})

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()


class PeerClient:
    def __init__(self, address: tuple[str, int], timeout: float = 60.0, secret: bytes | None = None):
        self.address, self.timeout = tuple(address), timeout
        self.secret = secret if secret is not None else peer_auth.secret_from_env()

    def _signed(self, header: dict) -> dict:
        return peer_auth.sign(self.secret, header) if self.secret is not None else header

    def _reply(self, s: socket.socket) -> dict:
        reply = _recv_header(s)
        if "error" in reply:
            raise ConnectionError(f"peer {self.address[0]}:{self.address[1]}: {reply['error']}")
        return reply

    def put(self, marker: Marker, src: Path) -> None:
        with socket.create_connection(self.address, timeout=self.timeout) as s:
            _send(s, self._signed({"op": "put", "marker": marker.to_json(), "names": list(marker.files),
                                   "sizes": [marker.files[n]["size"] for n in marker.files]}),
                  [src / n for n in marker.files])
            self._reply(s)

    def list(self) -> list[Marker]:
        with socket.create_connection(self.address, timeout=self.timeout) as s:
            _send(s, self._signed({"op": "list"}))
            return [Marker.from_json(m) for m in self._reply(s)["markers"]]

    def get(self, step: int, rank: int, into: DirTier) -> Marker:
        """Fetch a snapshot into ``into`` (verified while streaming, committed there)."""
        with socket.create_connection(self.address, timeout=self.timeout) as s:
            _send(s, self._signed({"op": "get", "step": step, "rank": rank}))
            return _recv_snapshot(s, self._reply(s), into)

