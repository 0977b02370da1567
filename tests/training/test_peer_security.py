"""The peer-replication server against hostile peers, over a real socket."""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time

import pytest

from training.checkpoint.peer import PeerServer
from training.checkpoint.storage import DirTier, Marker, describe_dir


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
    marker_json = json.dumps({"step": 1, "rank": 0, "world_size": 2, "files": files})  # no Marker takes this name
    held = DirTier("memory", tmp_path / "node" / "held", fsync=False)
    server = PeerServer(held, own=None)
    try:
        reply = _raw(server.address, {"op": "put", "marker": marker_json, "names": [name],
                                      "sizes": [len(payload)]}, payload)
    finally:
        server.close()
    assert reply is None or "error" in reply
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.read_bytes() == payload]
    assert written == []
    assert not held.markers()


def test_server_with_a_secret_refuses_unauthenticated_and_wrongly_signed_requests(tmp_path):
    from training.checkpoint.peer import PeerClient
    from training.checkpoint.peer_auth import sign_request

    secret = bytes(range(32))
    held = DirTier("memory", tmp_path / "held", fsync=False)
    server = PeerServer(held, own=None, secret=secret)
    port = server.address[1]
    try:
        assert _raw(server.address, {"op": "list"}) == {"error": "refused: unauthenticated request (no mac)"}
        assert _raw(server.address, sign_request(b"x" * 32, {"op": "list"}, port)) == {"error": "refused: bad mac"}
        forged = {**sign_request(secret, {"op": "get", "step": 1, "rank": 0}, port), "rank": 1}  # tampered
        assert _raw(server.address, forged) == {"error": "refused: bad mac"}
        elsewhere = sign_request(secret, {"op": "list"}, port + 1)  # captured on its way to another server
        assert _raw(server.address, elsewhere) == {"error": "refused: request signed for another server"}
        with pytest.raises(ConnectionError, match="unauthenticated"):
            PeerClient(server.address).list()
        assert PeerClient(server.address, secret=secret).list() == []
    finally:
        server.close()


# ------------------------------------------------------------------ the channel's trust boundaries (issue 28)
SECRET = bytes(range(32, 64))


def _snapshot_files(tmp_path):
    """One snapshot's files and their marker, as a buddy would hold them."""
    src = tmp_path / "src"
    src.mkdir()
    (src / ".metadata").write_bytes(b"metadata bytes")
    (src / "__0_0.distcp").write_bytes(b"tensor bytes" * 100)
    return src, Marker(step=4, rank=0, world_size=2, files=describe_dir(src))


def _rogue_server(reply_for):
    """A listener at a buddy's address that answers one request with ``reply_for(request_header)``: header + bytes."""
    lst = socket.create_server(("127.0.0.1", 0))
    got = {}

    def serve():
        conn, _ = lst.accept()
        with conn:
            (n,) = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))
            got["request"] = json.loads(conn.recv(n, socket.MSG_WAITALL))
            header, payload = reply_for(got["request"])
            h = json.dumps(header).encode()
            conn.sendall(struct.pack(">I", len(h)) + h + payload)
        lst.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return lst.getsockname(), got, t


def test_a_rogue_reply_is_refused_and_nothing_is_committed(tmp_path):
    """A server without the job's secret answers a get with a well-formed snapshot (hashes match): refused."""
    from training.checkpoint.peer import PeerClient

    src, marker = _snapshot_files(tmp_path)
    payload = b"".join((src / n).read_bytes() for n in marker.files)
    address, _, t = _rogue_server(lambda req: ({"marker": marker.to_json(), "names": list(marker.files),
                                                "sizes": [marker.files[n]["size"] for n in marker.files]}, payload))
    into = DirTier("memory", tmp_path / "landing", fsync=False)
    with pytest.raises(OSError, match="unauthenticated reply"):
        PeerClient(address, timeout=10, secret=SECRET).get(4, 0, into)
    t.join(10)
    assert into.markers() == []
    assert not any(p.is_file() for p in (tmp_path / "landing").rglob("*"))


def test_a_reply_signed_for_another_request_is_refused(tmp_path):
    """A genuine signed reply captured earlier (another nonce) and played back to a new request: refused."""
    from training.checkpoint.peer import PeerClient
    from training.checkpoint.peer_auth import sign_reply

    address, _, t = _rogue_server(lambda req: (sign_reply(SECRET, {"markers": []}, "0" * 32), b""))
    with pytest.raises(PermissionError, match="bad reply mac"):
        PeerClient(address, timeout=10, secret=SECRET).list()
    t.join(10)


_connect = socket.create_connection  # the proxy's own, whatever a test patches


def _recording_proxy(upstream):
    """Forwards one connection to ``upstream`` and records what the client sent."""
    lst = socket.create_server(("127.0.0.1", 0))
    sent = bytearray()

    def serve():
        conn, _ = lst.accept()
        with conn, _connect(upstream, timeout=10) as up:
            (n,) = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))
            body = conn.recv(n, socket.MSG_WAITALL)
            sent.extend(struct.pack(">I", n) + body)
            up.sendall(sent)
            while chunk := up.recv(1 << 16):
                conn.sendall(chunk)
        lst.close()

    threading.Thread(target=serve, daemon=True).start()
    return lst.getsockname(), sent


def test_a_captured_request_is_refused_when_sent_again(tmp_path, monkeypatch):
    from training.checkpoint.peer import PeerClient

    monkeypatch.setenv("OPENPOD_PEER_SECRET", SECRET.hex())
    server = PeerServer(DirTier("memory", tmp_path / "held", fsync=False), own=None, secret=SECRET)
    try:
        proxy, sent = _recording_proxy(server.address)
        c = PeerClient(proxy, timeout=10, secret=SECRET)
        c.address = (proxy[0], server.address[1])  # signed for the real server; connects through the proxy
        monkeypatch.setattr(socket, "create_connection", lambda addr, timeout=None, _c=socket.create_connection:
                            _c(proxy, timeout=timeout))
        assert c.list() == []
        monkeypatch.undo()
        with socket.create_connection(server.address, timeout=10) as s:  # the same bytes, 0 s later
            s.sendall(bytes(sent))
            (n,) = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))
            reply = json.loads(s.recv(n, socket.MSG_WAITALL))
    finally:
        server.close()
    assert reply == {"error": "refused: replayed request (nonce already seen)"}


def test_an_oversized_header_is_refused_before_anything_is_allocated(tmp_path, monkeypatch):
    from training.checkpoint import peer

    asked = []
    real = peer._recv_exact

    def recv_exact(sock, n, *deadline):
        asked.append(n)
        if n > 1 << 20:
            raise ConnectionError("test: refused to allocate")  # the old server would allocate n bytes here
        return real(sock, n, *deadline)

    monkeypatch.setattr(peer, "_recv_exact", recv_exact)
    server = PeerServer(DirTier("memory", tmp_path / "held", fsync=False), own=None, secret=SECRET)
    try:
        with socket.create_connection(server.address, timeout=10) as s:
            s.sendall(struct.pack(">I", 256 << 20))  # announce 256 MiB, send nothing
            assert s.recv(1) == b""  # closed at once, not waiting for 256 MiB
    finally:
        server.close()
    assert asked == [4]


def test_connections_beyond_the_bound_wait_their_turn(tmp_path):
    """Idle connections hold every slot: the next request is served only once one of them ends, not in parallel
    (a thread and its buffers per connection), and not refused (a job's ranks all list one peer at restore)."""
    from training.checkpoint.peer import PeerClient

    server = PeerServer(DirTier("memory", tmp_path / "held", fsync=False), own=None, secret=SECRET,
                        max_connections=2)
    idle = [socket.create_connection(server.address, timeout=10) for _ in range(2)]
    result = {}
    try:
        time.sleep(0.3)  # both accepted and holding a slot
        t = threading.Thread(target=lambda: result.setdefault(
            "markers", PeerClient(server.address, timeout=10, secret=SECRET).list()), daemon=True)
        t.start()
        t.join(1.5)
        assert t.is_alive() and not result  # waiting for a slot
        idle[0].close()
        t.join(10)
        assert result == {"markers": []}
    finally:
        for s in idle:
            s.close()
        server.close()


def test_slow_unauthenticated_connections_do_not_hold_every_slot(tmp_path, monkeypatch):
    """Connections that announce a header and trickle it a byte at a time, each byte within the idle timeout, held
    every slot for as long as they kept trickling (the slot wait then closed real clients). Each connection's header
    must now arrive whole within the header deadline: the trickling ones are closed and the client is served."""
    from training.checkpoint import peer
    from training.checkpoint.peer import PeerClient

    monkeypatch.setattr(peer, "HEADER_DEADLINE_S", 0.5, raising=False)
    server = PeerServer(DirTier("memory", tmp_path / "held", fsync=False), own=None, secret=SECRET,
                        max_connections=4, timeout=6.0)
    stop = threading.Event()

    def trickle(s: socket.socket) -> None:
        try:
            s.sendall(struct.pack(">I", 1000))
            while not stop.is_set():
                s.sendall(b" ")
                time.sleep(0.2)   # well within the 6 s idle timeout
        except OSError:
            pass

    slow = [socket.create_connection(server.address, timeout=10) for _ in range(4)]
    for s in slow:
        threading.Thread(target=trickle, args=(s,), daemon=True).start()
    result = {}
    try:
        time.sleep(0.3)  # all four accepted and trickling
        t = threading.Thread(target=lambda: result.setdefault(
            "markers", PeerClient(server.address, timeout=10, secret=SECRET).list()), daemon=True)
        t.start()
        t.join(5.0)   # before the 6 s slot wait would close the client (served within ~0.5 s)
        assert result == {"markers": []}
    finally:
        stop.set()
        for s in slow:
            s.close()
        server.close()


def test_no_server_on_the_network_and_no_client_to_it_without_the_secret(tmp_path, monkeypatch):
    from training.checkpoint.peer import PeerClient

    monkeypatch.delenv("OPENPOD_PEER_SECRET", raising=False)
    held = DirTier("memory", tmp_path / "held", fsync=False)
    with pytest.raises(PermissionError, match="OPENPOD_PEER_SECRET is not set; refusing to serve checkpoints"):
        server = PeerServer(held, own=None, host="0.0.0.0")
        server.close()
    with pytest.raises(PermissionError, match="refusing to trust an unauthenticated peer"):
        PeerClient(("192.0.2.1", 9), timeout=1).list()  # TEST-NET-1: never connected
    PeerServer(held, own=None, host="127.0.0.1").close()  # one machine's own tests: loopback only


def test_training_run_refuses_a_peer_channel_beyond_loopback_without_the_secret(tmp_path, monkeypatch):
    """A clear usage error before anything starts, instead of a traceback from every worker's PeerServer."""
    from click.testing import CliRunner

    from training.cli import peer_secret_problems, run

    monkeypatch.delenv("OPENPOD_PEER_SECRET", raising=False)
    r = CliRunner().invoke(run, ["--checkpoint-dir", str(tmp_path / "ck"), "--bind-host", "10.1.2.3", "--steps", "5",
                                 "--checkpoint-every", "1"])
    assert r.exit_code == 2, r.output
    assert "--bind-host 10.1.2.3: the peer side-channel needs OPENPOD_PEER_SECRET" in r.output
    assert not (tmp_path / "ck").exists()
    assert peer_secret_problems("127.0.0.1") == []
    assert peer_secret_problems("10.1.2.3", {"OPENPOD_PEER_SECRET": SECRET.hex()}) == []
    assert peer_secret_problems("10.1.2.3", {"OPENPOD_PEER_SECRET": "abc"}) == [
        "OPENPOD_PEER_SECRET: must be hex (e.g. `openssl rand -hex 32`)"]


def test_closing_the_server_does_not_wait_out_a_poll_interval(tmp_path):
    """Failed on the old code: serve_forever's default 0.5 s poll made every close (every worker's exit, every
    in-process restart generation) wait about half a second."""
    held = DirTier("memory", tmp_path / "held", fsync=False)
    servers = [PeerServer(held, own=None) for _ in range(4)]
    time.sleep(0.05)  # each serve_forever is inside its poll
    t0 = time.monotonic()
    for server in servers:
        server.close()
    assert time.monotonic() - t0 < 1.0  # 4 x ~0.5 s before
