"""Peer replication: each rank's committed snapshot is also held in a buddy node's memory.

Every worker runs a :class:`PeerServer` (a TCP side-channel next to the collective
backend). A rank sends each committed snapshot to its buddy - the same local rank
on the next node - which keeps it in its node-memory tier under ``held/``; that
directory survives worker restarts. A replacement node, whose own memory is empty,
lists what its peers hold and fetches its snapshot over the network.

Wire format: a 4-byte big-endian length (at most :data:`MAX_HEADER_BYTES`, checked before
anything is allocated), a JSON header, then the raw file bytes whose sizes the header lists
(sent with sendfile, received in 4 MiB chunks and hashed on the fly, so a damaged transfer is
never committed). The header and each file are separate writes with Nagle on (one connection per
request); measured, that costs no delayed-ACK stall (``benchmarks/peer_latency.py`` on loopback, median of 20,
2026-11-29, load 1.9-2.0 on 2 cores: a 1 KB part put in 2.3 ms, 2.3 ms with TCP_NODELAY; 4 x 30 KB parts at a
1448-byte MSS 2.6 ms, 3.2 ms with it). With the job's secret every request and every reply is signed and bound to
the request's nonce (:mod:`training.checkpoint.peer_auth`); a server on an address other than
loopback refuses to start without one, and serves at most :data:`MAX_CONNECTIONS` at a time
(the next ones wait their turn).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import socketserver
import struct
import threading
import time
from pathlib import Path

from training.checkpoint import peer_auth
from training.checkpoint.names import check_file_name
from training.checkpoint.storage import HASHERS, CorruptCheckpoint, DirTier, Marker, file_hash

POLL_S = 0.05
log = logging.getLogger("training.checkpoint")


def buddy_of(rank: int, world_size: int, local_world_size: int) -> int | None:
    """The same local rank on the next node, or None when the job has a single node."""
    if world_size <= local_world_size:
        return None
    return (rank + local_world_size) % world_size


_BUF = 4 << 20
MAX_HEADER_BYTES = 1 << 20  # a list reply of thousands of markers; a request is a few KiB
MAX_CONNECTIONS = 32        # a node's ranks and their buddies' restores, with room to spare
CONNECTION_TIMEOUT_S = 60.0
# A request's header (a few KiB, sent at once by a client) must arrive whole this soon after the connection is
# served: a connection that trickles bytes, each within the idle timeout, no longer holds a slot for good.
HEADER_DEADLINE_S = 10.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (only this machine can reach a server bound there)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes; with ``deadline`` (``time.monotonic()``) TimeoutError once it passes, however steadily the
    peer sends (each wait is at most the socket's own timeout and the time left)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    idle = sock.gettimeout()
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"read deadline passed with {got} of {n} bytes received")
            sock.settimeout(left if idle is None else min(idle, left))
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


def _recv_header(sock: socket.socket, deadline: float | None = None) -> dict:
    idle = sock.gettimeout()
    (n,) = struct.unpack(">I", _recv_exact(sock, 4, deadline))
    if n > MAX_HEADER_BYTES:  # before allocating: an announced length is untrusted input
        raise ConnectionError(f"header of {n} bytes announced; at most {MAX_HEADER_BYTES} allowed")
    header = json.loads(_recv_exact(sock, n, deadline))
    sock.settimeout(idle)
    if not isinstance(header, dict):
        raise ValueError(f"header is a JSON {type(header).__name__}, not an object")
    return header


def _recv_snapshot(sock: socket.socket, header: dict, tier: DirTier) -> Marker:
    """Stream the files into ``tier``, checking each file's hash on the fly; commit only if all match."""
    marker = Marker.from_json(header["marker"])
    names = [check_file_name(n) for n in header["names"]]
    if (sorted(names) != sorted(check_file_name(n) for n in marker.files)
            or header["sizes"] != [marker.files[n]["size"] for n in names]):
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


class _BoundedServer(socketserver.ThreadingTCPServer):
    """A threading TCP server that serves at most ``max_connections`` at once.

    Beyond that it stops accepting until a connection ends (the others wait in the listen backlog: a
    whole job's ranks listing one peer at restore are served in turn, not refused); one that waited
    ``slot_wait_s`` is closed. Each connection's socket times out after ``timeout`` seconds idle.
    """

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address, handler, max_connections: int, slot_wait_s: float):
        self.max_connections, self.slot_wait_s, self.closing = max_connections, slot_wait_s, False
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        waited = 0.0
        while not self._slots.acquire(timeout=0.5):  # short waits: close() must not hang behind a full server
            waited += 0.5
            if self.closing or waited >= self.slot_wait_s:
                log.warning("peer server: closing a connection from %s that waited %.0f s for one of %d slots",
                            client_address[0], waited, self.max_connections)
                self.shutdown_request(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class PeerServer:
    """Serves this node's memory tiers to peers: ``put`` (hold a buddy's snapshot), ``list``, ``get``."""

    def __init__(self, held: DirTier, own: DirTier | None, host: str = "127.0.0.1",
                 secret: bytes | None = None, max_connections: int = MAX_CONNECTIONS,
                 timeout: float = CONNECTION_TIMEOUT_S, header_deadline: float | None = None):
        """``secret``: the job's peer secret (default: ``OPENPOD_PEER_SECRET``); every request and reply is signed
        with it (:mod:`training.checkpoint.peer_auth`). Without one the server only binds a loopback address.
        A connection's request header must arrive whole within ``header_deadline`` seconds (default
        :data:`HEADER_DEADLINE_S`) of it being served, before it is authenticated; after that each read may wait
        ``timeout`` seconds. With connections accepted in order, a client waits at most one deadline behind
        connections that never send a valid request."""
        self.held, self.own = held, own
        self.secret = secret if secret is not None else peer_auth.secret_from_env()
        if self.secret is None and not is_loopback(host):
            raise PermissionError(
                f"peer server on {host}: {peer_auth.ENV} is not set; refusing to serve checkpoints to the network "
                f"unauthenticated (the platform renders a Secret with every job: `openpod submit`, or its --dry-run "
                f"output, creates it; or run with --no-peer-replication)")
        self._seen = peer_auth.ReplayCache()
        self.header_deadline = HEADER_DEADLINE_S if header_deadline is None else header_deadline
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(timeout)
                try:
                    server._handle(self.request)
                except (OSError, CorruptCheckpoint, ValueError, TypeError, KeyError) as e:
                    log.warning("peer request from %s failed: %s: %s", self.client_address[0], type(e).__name__, e)

        self._srv = _BoundedServer((host, 0), Handler, max_connections, slot_wait_s=timeout)
        self.address = (host, self._srv.server_address[1])
        # shutdown() returns once serve_forever sees it, at its next poll: socketserver's 0.5 s default was half a
        # second of every worker's exit (and of every in-process restart generation) spent waiting
        threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": POLL_S}, name="peer-server",
                         daemon=True).start()

    def _tiers(self) -> list[DirTier]:
        return [t for t in (self.held, self.own) if t is not None]

    def _handle(self, sock: socket.socket) -> None:
        header = _recv_header(sock, time.monotonic() + self.header_deadline)
        nonce = None
        if self.secret is not None:
            try:
                nonce = peer_auth.verify_request(self.secret, header, self.address[1], self._seen)
            except PermissionError as e:
                _send(sock, {"error": f"refused: {e}"})  # unsigned: the client trusts no data from it
                return

        def reply(h: dict, files: list[Path] = ()) -> None:
            _send(sock, peer_auth.sign_reply(self.secret, h, nonce) if nonce is not None else h, files)

        op = header.get("op")
        if op == "put":
            try:
                marker = _recv_snapshot(sock, header, self.held)
            except (ValueError, TypeError, KeyError) as e:
                reply({"error": f"refused: {e}"})
                return
            self.held.retain(marker.rank)
            reply({"ok": True})
        elif op == "list":
            markers = {m.key: m for t in self._tiers() for m in t.markers()}
            reply({"markers": [m.to_json() for m in markers.values()]})
        elif op == "get":
            for t in self._tiers():
                for m in t.markers():
                    if m.step == header["step"] and m.rank == header["rank"]:
                        d = t.snapshot_dir(m.step, m.rank)
                        paths = [d / n for n in m.files]
                        if not all(p.is_file() for p in paths):
                            continue
                        reply({"marker": m.to_json(), "names": list(m.files),
                               "sizes": [m.files[n]["size"] for n in m.files]}, paths)
                        return
            reply({"error": f"no snapshot for step {header['step']} rank {header['rank']}"})
        else:
            reply({"error": f"unknown op {op!r}"})

    def close(self) -> None:
        self._srv.closing = True
        self._srv.shutdown()
        self._srv.server_close()


class PeerClient:
    def __init__(self, address: tuple[str, int], timeout: float = 60.0, secret: bytes | None = None):
        self.address, self.timeout = tuple(address), timeout
        self.secret = secret if secret is not None else peer_auth.secret_from_env()

    def _connect(self) -> socket.socket:
        if self.secret is None and not is_loopback(self.address[0]):
            raise PermissionError(f"peer {self.address[0]}:{self.address[1]}: {peer_auth.ENV} is not set; refusing "
                                  f"to trust an unauthenticated peer on the network")
        return socket.create_connection(self.address, timeout=self.timeout)

    def _request(self, s: socket.socket, header: dict, files: list[Path] = ()) -> str | None:
        """Send ``header`` (signed when there is a secret); the nonce its reply must carry."""
        if self.secret is None:
            _send(s, header, files)
            return None
        signed = peer_auth.sign_request(self.secret, header, self.address[1])
        _send(s, signed, files)
        return signed["nonce"]

    def _reply(self, s: socket.socket, nonce: str | None) -> dict:
        where = f"peer {self.address[0]}:{self.address[1]}"
        reply = _recv_header(s)
        if nonce is not None:
            if "mac" not in reply and isinstance(reply.get("error"), str):
                raise ConnectionError(f"{where}: {reply['error']}")  # a refusal; nothing of it is used
            try:
                peer_auth.verify_reply(self.secret, reply, nonce)
            except PermissionError as e:
                raise PermissionError(f"{where}: {e}") from None
        if "error" in reply:
            raise ConnectionError(f"{where}: {reply['error']}")
        return reply

    def put(self, marker: Marker, src: Path) -> None:
        with self._connect() as s:
            nonce = self._request(s, {"op": "put", "marker": marker.to_json(), "names": list(marker.files),
                                      "sizes": [marker.files[n]["size"] for n in marker.files]},
                                  [src / n for n in marker.files])
            self._reply(s, nonce)

    def list(self) -> list[Marker]:
        with self._connect() as s:
            nonce = self._request(s, {"op": "list"})
            reply = self._reply(s, nonce)
        try:
            return [Marker.from_json(m) for m in reply["markers"]]
        except (KeyError, ValueError, TypeError) as e:
            raise ConnectionError(f"peer {self.address[0]}:{self.address[1]}: unreadable list reply ({e})") from None

    def get(self, step: int, rank: int, into: DirTier) -> Marker:
        """Fetch a snapshot into ``into`` (verified while streaming, committed there)."""
        with self._connect() as s:
            nonce = self._request(s, {"op": "get", "step": step, "rank": rank})
            reply = self._reply(s, nonce)
            marker = _recv_snapshot(s, reply, into)
            if (marker.step, marker.rank) != (step, rank):
                into.delete(marker.step, marker.rank)
                raise ValueError(f"peer {self.address[0]}:{self.address[1]}: sent step {marker.step} rank "
                                 f"{marker.rank} for step {step} rank {rank}")
            return marker
