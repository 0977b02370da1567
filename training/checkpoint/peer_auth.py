"""HMAC authentication of the peer-replication channel: requests and replies, each bound to a nonce and a direction.

Every request header carries ``nonce`` (16 random bytes, hex), ``ts``, ``to`` (the server's
port) and ``mac``: HMAC-SHA256 under the job's peer secret over the canonical JSON of the rest
of the header plus its direction (``request``). For a ``put`` that header includes the marker
with every file's BLAKE3 hash, so the file bytes are covered too. The server refuses a request
whose ``ts`` is more than :data:`MAX_SKEW_S` from its clock or whose nonce it has seen within
that window (:class:`ReplayCache`): a captured request cannot be sent again.

Every reply to an authenticated request is signed the same way in the ``reply`` direction and
over the request's nonce, so the client accepts only the answer to the request it sent, from
a holder of the secret: a rogue server at a buddy's address cannot hand over a snapshot, and a
request cannot be reflected back as a reply. A ``get`` reply's marker carries the file hashes,
which the client checks while streaming.

The secret is per job: ``OPENPOD_PEER_SECRET`` (hex), delivered from the Kubernetes Secret that
the platform renders with every job (infra/governance/trainer_pod.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
import time

from openpod_core.labels import PEER_SECRET_ENV as ENV

MAX_SKEW_S = 120
REQUEST, REPLY = "request", "reply"


def secret_from_env(environ=os.environ) -> bytes | None:
    """The job's peer secret from ``OPENPOD_PEER_SECRET`` (hex, at least 32 bytes), or None when unset."""
    raw = environ.get(ENV)
    if not raw:
        return None
    try:
        secret = bytes.fromhex(raw)
    except ValueError:
        raise ValueError(f"{ENV}: must be hex (e.g. `openssl rand -hex 32`)") from None
    if len(secret) < 32:
        raise ValueError(f"{ENV}: must hold at least 32 bytes (64 hex digits), got {len(secret)}")
    return secret


def _mac(secret: bytes, header: dict, direction: str) -> str:
    body = json.dumps({**{k: v for k, v in header.items() if k != "mac"}, "dir": direction},
                      sort_keys=True, separators=(",", ":"))
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()


def sign_request(secret: bytes, header: dict, to_port: int) -> dict:
    """``header`` with a fresh ``nonce``, ``ts``, the server's port ``to`` and ``mac`` added."""
    h = {**header, "nonce": secrets.token_hex(16), "ts": time.time(), "to": int(to_port)}
    return {**h, "mac": _mac(secret, h, REQUEST)}


def sign_reply(secret: bytes, header: dict, nonce: str) -> dict:
    """A reply ``header`` bound to the request's ``nonce``."""
    h = {**header, "nonce": nonce}
    return {**h, "mac": _mac(secret, h, REPLY)}


class ReplayCache:
    """Nonces seen within the freshness window; older ones are dropped (their requests are stale anyway)."""

    def __init__(self, window_s: float = MAX_SKEW_S, max_entries: int = 1 << 16):
        self.window_s, self.max_entries = window_s, max_entries
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, nonce: str, now: float) -> bool:
        """False if ``nonce`` was seen within the window (a replay); otherwise remember it."""
        with self._lock:
            if len(self._seen) >= self.max_entries:
                self._seen = {n: t for n, t in self._seen.items() if now - t <= 2 * self.window_s}
                if len(self._seen) >= self.max_entries:
                    raise PermissionError("too many requests within the replay window")
            if nonce in self._seen:
                return False
            self._seen[nonce] = now
            return True


def verify_request(secret: bytes, header: dict, port: int, seen: ReplayCache) -> str:
    """The request's nonce; PermissionError unless ``header`` is signed, fresh, for this server, and new."""
    mac, ts, nonce = header.get("mac"), header.get("ts"), header.get("nonce")
    if not isinstance(mac, str) or not isinstance(ts, (int, float)) or not isinstance(nonce, str):
        raise PermissionError("unauthenticated request (no mac)")
    if not hmac.compare_digest(mac, _mac(secret, header, REQUEST)):
        raise PermissionError("bad mac")
    now = time.time()
    if abs(now - ts) > MAX_SKEW_S:
        raise PermissionError(f"stale request (clocks more than {MAX_SKEW_S} s apart)")
    if header.get("to") != port:
        raise PermissionError("request signed for another server")
    if not seen.add(nonce, now):
        raise PermissionError("replayed request (nonce already seen)")
    return nonce


def verify_reply(secret: bytes, header: dict, nonce: str) -> None:
    """PermissionError unless ``header`` is the signed reply to the request with ``nonce``."""
    mac = header.get("mac")
    if not isinstance(mac, str):
        raise PermissionError("unauthenticated reply (no mac)")
    if header.get("nonce") != nonce or not hmac.compare_digest(mac, _mac(secret, header, REPLY)):
        raise PermissionError("bad reply mac (not the answer to this request from a holder of the job's secret)")
