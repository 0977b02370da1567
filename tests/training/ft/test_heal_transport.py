"""Replica healing never unpickles untrusted bytes (issue 35): signed requests, tagged replies, weights_only loads.

torchft 0.2.0's HTTPTransport, which replica mode used, loads a peer's reply with ``weights_only=False``
(torchft checkpointing/http_transport.py:161-164) from the address the unauthenticated Lighthouse's quorum names.
The malicious server below is that address: it answers any request with a torch streaming payload whose
``__reduce__`` writes a file.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from torch.distributed._serialization import _streaming_save

from tests.training.test_safe_load import Payload
from training.ft.heal_transport import AUTH_HEADER, HealRefused, SignedHTTPTransport, _reply_mac

SECRET = bytes(range(32))
T = timedelta(seconds=10)


def _state(step=5):
    return {"openpod": {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "optim": {"state": {}, "param_groups": []},
                        "components": {"lr_schedule": {"step": 3, "base": 0.1}}, "loss": 1.25},
            "torchft": {"step": step, "batches_committed": 2}}


class _Evil:
    """An HTTP server at the address a quorum names, answering every GET with ``body(request_headers)``."""

    def __init__(self, body):
        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                data = body(self.headers)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/checkpoint/"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _payload(sentinel) -> bytes:
    import io

    buf = io.BytesIO()
    _streaming_save({"torchft": {"step": 5}, "x": Payload(sentinel)}, buf)
    return buf.getvalue()


def test_a_live_peer_heals_a_replica_and_the_state_round_trips():
    src, dst = SignedHTTPTransport("127.0.0.1", T, secret=SECRET), SignedHTTPTransport("127.0.0.1", T, secret=SECRET)
    try:
        src.send_checkpoint([1], 5, _state(), T)
        got = dst.recv_checkpoint(0, src.metadata(), 5, T)
        assert torch.equal(got["openpod"]["model"]["w"], _state()["openpod"]["model"]["w"])
        assert got["openpod"]["components"] == {"lr_schedule": {"step": 3, "base": 0.1}}
        assert got["torchft"] == {"step": 5, "batches_committed": 2} and got["openpod"]["loss"] == 1.25
        with pytest.raises(HealRefused, match="HTTP 400"):  # only the step being served
            dst.recv_checkpoint(0, src.metadata(), 4, T)
        src.disallow_checkpoint()
    finally:
        src.shutdown()
        dst.shutdown()


def test_a_request_without_the_jobs_secret_gets_nothing():
    src = SignedHTTPTransport("127.0.0.1", T, secret=SECRET)
    other = SignedHTTPTransport("127.0.0.1", T, secret=bytes(32))
    try:
        src.send_checkpoint([1], 5, _state(), T)
        with pytest.raises(HealRefused, match="HTTP 403"):
            other.recv_checkpoint(0, src.metadata(), 5, T)
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError, match="403"):  # no header at all
            urllib.request.urlopen(f"{src.metadata()}5/full", timeout=10)
    finally:
        src.shutdown()
        other.shutdown()


@pytest.mark.slow  # the Lighthouse binary takes ~10 s to listen on the loaded 2-core machine
def test_a_rogue_address_in_the_quorum_cannot_run_code_in_the_healing_replica(tmp_path, monkeypatch):
    """The replica group's own transport (as ReplicaGroup builds it, against a real Lighthouse) fetching from a
    rogue server: refused, and the payload never ran. On the old code (torchft's HTTPTransport) it ran."""
    from tests.training.test_replica_ft import lighthouse
    from training.config import FaultToleranceConfig
    from training.ft.replica import ReplicaGroup

    monkeypatch.setenv("OPENPOD_PEER_SECRET", SECRET.hex())
    sentinel = tmp_path / "heal-payload-ran"
    evil = _Evil(lambda headers: _payload(sentinel) + os.urandom(32))
    try:
        with lighthouse(1, tmp_path / "lighthouse.log") as addr:
            cfg = FaultToleranceConfig(mode="replica", replica_id=1, replicas=2, min_replicas=1, lighthouse=addr,
                                       host="127.0.0.1")
            rg = ReplicaGroup(cfg, group_rank=0, group_world_size=1, device=torch.device("cpu"))
            try:
                with pytest.raises(Exception, match="not signed for this request"):
                    rg.manager._checkpoint_transport.recv_checkpoint(0, evil.base, 5, T)
            finally:
                rg.shutdown()
    finally:
        evil.close()
    assert not sentinel.exists()


def test_a_peer_holding_the_secret_still_cannot_run_code(tmp_path):
    """Authentication says who sent it, not that it is harmless: an insider's correctly tagged payload is
    refused by the restricted unpickler (weights_only=True)."""
    sentinel = tmp_path / "insider-payload-ran"

    def tagged(headers):
        nonce = json.loads(headers[AUTH_HEADER])["nonce"]
        body = _payload(sentinel)
        mac = _reply_mac(SECRET, nonce, 5)  # the insider knows the secret and the scheme
        mac.update(body)
        return body + mac.digest()

    evil = _Evil(tagged)
    dst = SignedHTTPTransport("127.0.0.1", T, secret=SECRET)
    try:
        with pytest.raises(HealRefused, match="only tensors and plain Python values load from a peer"):
            dst.recv_checkpoint(0, evil.base, 5, T)
    finally:
        evil.close()
        dst.shutdown()
    assert not sentinel.exists()


def test_a_reply_larger_than_the_bound_is_refused_before_it_fills_memory():
    evil = _Evil(lambda headers: b"\0" * (3 << 20))
    dst = SignedHTTPTransport("127.0.0.1", T, secret=SECRET, max_bytes=lambda: 1 << 20)
    try:
        with pytest.raises(HealRefused, match="reply larger than 1048576 bytes"):
            dst.recv_checkpoint(0, evil.base, 5, T)
    finally:
        evil.close()
        dst.shutdown()


def test_no_network_healing_without_the_secret(monkeypatch):
    monkeypatch.delenv("OPENPOD_PEER_SECRET", raising=False)
    with pytest.raises(PermissionError, match="OPENPOD_PEER_SECRET is not set; refusing to serve or fetch"):
        SignedHTTPTransport("10.0.0.7", T)
    dst = SignedHTTPTransport("127.0.0.1", T)
    try:
        with pytest.raises(HealRefused, match="OPENPOD_PEER_SECRET is not set"):
            dst.recv_checkpoint(0, "http://10.0.0.8:1234/checkpoint/", 5, T)
    finally:
        dst.shutdown()


def test_training_run_refuses_replica_healing_beyond_loopback_without_the_secret(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from training.cli import run

    monkeypatch.delenv("OPENPOD_PEER_SECRET", raising=False)
    r = CliRunner().invoke(run, ["--checkpoint-dir", str(tmp_path / "ck"), "--bind-host", "10.1.2.3", "--steps", "5",
                                 "--no-peer-replication", "--fault-tolerance", "replica", "--replicas", "2",
                                 "--lighthouse", "http://10.1.2.4:29510", "--max-restarts", "1"])
    assert r.exit_code == 2, r.output
    assert "--fault-tolerance replica heals over a channel signed with OPENPOD_PEER_SECRET" in r.output
    assert r.output.strip().count("\n") == 0 and not (tmp_path / "ck").exists()
