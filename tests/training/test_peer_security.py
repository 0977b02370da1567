"""The peer-replication server against hostile peers, over a real socket."""

from __future__ import annotations

import hashlib
import json
import socket
import struct

import pytest

from training.checkpoint.peer import PeerServer
from training.checkpoint.storage import DirTier, Marker


def _raw(address, header: dict, payload: bytes = b"") -> dict | None:
    with socket.create_connection(address, timeout=10) as s:
        h = json.dumps(header).encode()
        try:
            s.sendall(struct.pack(">I", len(h)) + h + payload)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and hang up before it has read everything
        try:
            n = s.recv(4)
        except ConnectionResetError:
            return None
        if len(n) < 4:
            return None  # the server hung up without a reply
        (size,) = struct.unpack(">I", n)
        data = b""
        while len(data) < size:
            chunk = s.recv(size - len(data))
            if not chunk:
                break
            data += chunk
        return json.loads(data)


@pytest.mark.parametrize("name", ["../../escaped", "sub/escaped", "..", ".", "", "a\\b", "x\x00y"])
def test_put_with_a_path_traversal_name_writes_nothing_outside_the_snapshot(tmp_path, name):
    payload = b"owned"
    files = {name: {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}}
    marker = Marker(step=1, rank=0, world_size=2, files=files)
    held = DirTier("memory", tmp_path / "node" / "held", fsync=False)
    server = PeerServer(held, own=None)
    try:
        reply = _raw(server.address, {"op": "put", "marker": marker.to_json(), "names": [name],
                                      "sizes": [len(payload)]}, payload)
    finally:
        server.close()
    assert reply is None or "error" in reply
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.read_bytes() == payload]
    assert written == []
    assert not held.markers()


def test_server_with_a_secret_refuses_unauthenticated_and_wrongly_signed_requests(tmp_path):
    from training.checkpoint.peer import PeerClient
    from training.checkpoint.peer_auth import sign

    secret = bytes(range(32))
    held = DirTier("memory", tmp_path / "held", fsync=False)
    server = PeerServer(held, own=None, secret=secret)
    try:
        assert _raw(server.address, {"op": "list"}) == {"error": "refused: unauthenticated request (no mac)"}
        assert _raw(server.address, sign(b"x" * 32, {"op": "list"})) == {"error": "refused: bad mac"}
        forged = {**sign(secret, {"op": "get", "step": 1, "rank": 0}), "rank": 1}  # tampered after signing
        assert _raw(server.address, forged) == {"error": "refused: bad mac"}
        with pytest.raises(ConnectionError, match="unauthenticated"):
            PeerClient(server.address).list()
        assert PeerClient(server.address, secret=secret).list() == []
    finally:
        server.close()
