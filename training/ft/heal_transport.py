"""The checkpoint transport replica healing uses: authenticated, and nothing received is unpickled unsafely.

torchft 0.2.0's transports both run what a peer sends: ``HTTPTransport`` loads the reply with
``weights_only=False`` from whatever address the quorum names (torchft
``checkpointing/http_transport.py:146-164``), and the unauthenticated Lighthouse hands out that
address (a participant registers its own); ``PGTransport`` ``pickle.loads`` the state's metadata
(``checkpointing/pg_transport.py:252``). Facts ``torchft.http-transport-unpickles``,
``torchft.pg-transport-unpickles``.

:class:`SignedHTTPTransport` keeps HTTPTransport's serving rules (serve one step, only between
``send_checkpoint`` and ``disallow_checkpoint``, which waits for readers - torchft's RWLock) and adds:

- **requests** carry a header signed with the job's peer secret (:mod:`training.checkpoint.peer_auth`:
  nonce, time, the server's port, the step); the server refuses any other (403) and replays;
- **replies** end in a MAC over the body (keyed BLAKE3 under a key derived from the secret), bound to the
  request's nonce and step; the client checks it before it parses a byte, so only a holder of the secret, answering
  this very request, can hand over state;
- the body is loaded with torch's restricted unpickler (``weights_only=True``): tensors and plain values.
  A peer holding the secret still cannot run code in the healing worker.

Without a secret the transport serves and fetches on loopback only (one machine: tests, a laptop).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import secrets
import socket
import threading
import urllib.error
import urllib.request
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlparse

import blake3
import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from training.checkpoint import peer_auth
from training.checkpoint.peer import is_loopback

log = logging.getLogger("training.ft")

AUTH_HEADER = "X-Openpod-Auth"
TAG_BYTES = 32
MAX_AUTH_HEADER = 4096
_CHUNK = 1 << 20


class HealRefused(RuntimeError):
    """A healing reply (or request) that is not authentic, too large, or holds more than tensors and plain values."""


def _reply_mac(secret: bytes, nonce: str, step: int):
    """BLAKE3 in keyed mode (a MAC; the checkpoint files' hash already) under a key derived from the secret,
    bound to the request: 0.18 s per 256 MiB here against HMAC-SHA256's 0.48 s."""
    key = hashlib.sha256(b"openpod-heal-reply-key|" + secret).digest()  # keyed BLAKE3 takes exactly 32 bytes
    mac = blake3.blake3(key=key, max_threads=blake3.blake3.AUTO)
    mac.update(f"{nonce}|{step}|".encode())
    return mac


class _MacWriter(io.RawIOBase):
    """Writes through to ``out`` while the HMAC follows every byte."""

    def __init__(self, out, mac):
        self.out, self.mac = out, mac

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.mac.update(b)
        self.out.write(b)
        return len(b)


def _to_cpu(values: list) -> list:
    return [v.cpu() if isinstance(v, torch.Tensor) and v.device.type != "cpu" else v for v in values]


class SignedHTTPTransport:
    """A torchft ``CheckpointTransport`` (duck-typed: ``metadata``, ``send_checkpoint``, ``disallow_checkpoint``,
    ``recv_checkpoint``, ``shutdown``) over HTTP with signed requests, tagged replies and ``weights_only`` loads.

    ``host``: the address other replica groups reach (bound and advertised). ``secret``: the job's peer secret
    (default ``OPENPOD_PEER_SECRET``); required unless ``host`` is loopback. ``max_bytes``: the largest reply
    accepted (called per fetch; default 64 GiB), so a peer cannot fill the healing worker's memory."""

    def __init__(self, host: str, timeout: timedelta, *, secret: bytes | None = None,
                 max_bytes: Callable[[], int] | None = None):
        from torchft.checkpointing._rwlock import RWLock

        self.secret = secret if secret is not None else peer_auth.secret_from_env()
        if self.secret is None and not is_loopback(host):
            raise PermissionError(f"replica healing on {host}: {peer_auth.ENV} is not set; refusing to serve or "
                                  "fetch a model over the network unauthenticated (the job's Secret, which "
                                  "`openpod submit` renders)")
        self._key = self.secret or b""
        self.host, self._timeout = host, timeout
        self.max_bytes = max_bytes or (lambda: 64 << 30)
        self._lock = RWLock(timeout=timeout.total_seconds())
        self._disallowed = False
        self._step = -1
        self._state = None
        self._seen = peer_auth.ReplayCache()
        self.disallow_checkpoint()  # nothing is served before the first send_checkpoint (as HTTPTransport)
        transport, seconds = self, timeout.total_seconds()

        class Handler(BaseHTTPRequestHandler):
            timeout = seconds  # a slow client cannot hold a server thread forever

            def log_message(self, *args) -> None:  # requests are logged by the transport, not to stderr
                pass

            def do_GET(self) -> None:
                transport._serve(self)

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_cls = type("_Server", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
        self._server = server_cls((host, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="openpod-heal-transport",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ serving
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def metadata(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/checkpoint/"

    address = metadata

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        parts = h.path.split("/")
        if len(parts) != 4 or parts[1] != "checkpoint" or parts[3] != "full" or not parts[2].isdigit():
            h.send_error(400, "expected /checkpoint/<step>/full")
            return
        step = int(parts[2])
        raw = h.headers.get(AUTH_HEADER, "")
        try:
            if len(raw) > MAX_AUTH_HEADER:
                raise PermissionError("authentication header too large")
            auth = json.loads(raw) if raw else {}
            if not isinstance(auth, dict):
                raise PermissionError("unauthenticated request")
            if self.secret is not None:
                nonce = peer_auth.verify_request(self.secret, auth, self.port, self._seen)
            else:
                nonce = str(auth.get("nonce", ""))
            if auth.get("op") != "heal" or auth.get("step") != step:
                raise PermissionError("request signed for another operation or step")
        except (PermissionError, ValueError) as e:
            log.warning("healing transport: refused a request from %s: %s", h.client_address[0], e)
            h.send_error(403, str(e))
            return
        try:
            with self._lock.r_lock():
                if step != self._step:
                    h.send_error(400, f"serving step {self._step}, not {step}")
                    return
                h.send_response(200)
                h.send_header("Content-Type", "application/octet-stream")
                h.end_headers()
                from torch.distributed._serialization import _streaming_save

                mac = _reply_mac(self._key, nonce, step)
                _streaming_save(self._state, _MacWriter(h.wfile, mac))
                h.wfile.write(mac.digest())
        except TimeoutError as e:
            h.send_error(503, str(e))
        except OSError as e:  # the client went away
            log.warning("healing transport: sending step %d to %s failed: %s", step, h.client_address[0], e)

    def send_checkpoint(self, dst_ranks: list[int], step: int, state_dict, timeout: timedelta) -> None:
        values, spec = tree_flatten(state_dict)
        self._state = tree_unflatten(_to_cpu(values), spec)
        self.allow_checkpoint(step)

    def allow_checkpoint(self, step: int) -> None:
        self._step = step
        if self._disallowed:
            self._disallowed = False
            self._lock.w_release()

    def disallow_checkpoint(self) -> None:
        """Wait for the replies in flight; then nothing is served until the next ``send_checkpoint``."""
        if not self._disallowed:
            self._disallowed = True
            self._lock.w_acquire()

    def shutdown(self, wait: bool = True) -> None:
        if not wait:  # serve_forever ends within its 0.5 s poll (as HTTPTransport.shutdown(wait=False))
            self._server._BaseServer__shutdown_request = True
            return
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()

    # ------------------------------------------------------------------ fetching
    def recv_checkpoint(self, src_rank: int, metadata: str, step: int, timeout: timedelta):
        """The state a peer serves at ``metadata`` for ``step``; HealRefused unless the reply is authentic
        (tagged for this request by a holder of the secret) and holds only tensors and plain values."""
        url = f"{metadata}{step}/full"
        u = urlparse(url)
        if u.scheme != "http" or not u.hostname or u.port is None:
            raise HealRefused(f"healing source {metadata!r}: not an http://host:port/ address")
        if self.secret is None and not is_loopback(u.hostname):
            raise HealRefused(f"healing source {u.hostname}: {peer_auth.ENV} is not set; refusing to fetch a model "
                              "over the network unauthenticated")
        header = {"op": "heal", "step": step}
        signed = (peer_auth.sign_request(self.secret, header, u.port) if self.secret is not None
                  else {**header, "nonce": secrets.token_hex(16)})
        req = urllib.request.Request(url, headers={AUTH_HEADER: json.dumps(signed, separators=(",", ":"))})
        limit = int(self.max_bytes())
        try:
            with urllib.request.urlopen(req, timeout=timeout.total_seconds()) as f:
                data = self._read_tagged(f, _reply_mac(self._key, signed["nonce"], step), limit, url)
        except urllib.error.HTTPError as e:
            raise HealRefused(f"healing source {url}: HTTP {e.code} {e.reason}") from None
        except OSError as e:  # refused, reset, timed out: the manager reports it and the step is run again
            raise HealRefused(f"healing source {url}: {type(e).__name__}: {e}") from None
        from torch.distributed._serialization import _streaming_load

        body = io.BytesIO(data)  # over bytes: no copy; the tag stays at its end, unread
        try:
            state = _streaming_load(body, weights_only=True)  # the restricted unpickler
            if body.tell() != len(data) - TAG_BYTES:
                raise ValueError("the state does not end where its tag begins")
            return state
        except Exception as e:  # noqa: BLE001 - torch's UnpicklingError names the refused global
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise HealRefused(f"healing source {url}: refused its state: only tensors and plain Python values "
                              f"load from a peer ({first})") from None

    @staticmethod
    def _read_tagged(f, mac, limit: int, url: str) -> bytes:
        """The bytes read (body, then tag), once the tag matched the MAC over the body; at most ``limit`` held."""
        chunks, n = [], 0
        while chunk := f.read(_CHUNK):
            chunks.append(chunk)
            n += len(chunk)
            if n > limit + TAG_BYTES:
                raise HealRefused(f"healing source {url}: reply larger than {limit} bytes; refused")
        data = b"".join(chunks)
        del chunks
        if len(data) < TAG_BYTES:
            raise HealRefused(f"healing source {url}: reply without an authentication tag")
        mac.update(memoryview(data)[:-TAG_BYTES])
        if not hmac.compare_digest(data[-TAG_BYTES:], mac.digest()):
            raise HealRefused(f"healing source {url}: reply not signed for this request with the job's secret; "
                              "refused (a rogue or stale replica at the address the quorum named)")
        return data
