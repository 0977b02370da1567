"""HMAC authentication of peer-replication requests.

Every request header carries ``mac``: HMAC-SHA256 under the job's peer secret over the
canonical JSON of the rest of the header (which, for a ``put``, includes the marker with
every file's BLAKE3 hash, so the file bytes are covered too) and a ``ts`` within
``MAX_SKEW_S`` of the server's clock. The secret is per job: ``OPENPOD_PEER_SECRET``
(hex), delivered from a Kubernetes Secret as an environment variable.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time

from openpod_core.labels import PEER_SECRET_ENV as ENV

MAX_SKEW_S = 300


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


def _mac(secret: bytes, header: dict) -> str:
    body = json.dumps({k: v for k, v in header.items() if k != "mac"}, sort_keys=True, separators=(",", ":"))
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()


def sign(secret: bytes, header: dict) -> dict:
    """``header`` with ``ts`` and ``mac`` added."""
    h = {**header, "ts": time.time()}
    return {**h, "mac": _mac(secret, h)}


def verify(secret: bytes, header: dict) -> None:
    """Raise PermissionError unless ``header`` carries a valid, fresh ``mac``."""
    mac, ts = header.get("mac"), header.get("ts")
    if not isinstance(mac, str) or not isinstance(ts, (int, float)):
        raise PermissionError("unauthenticated request (no mac)")
    if not hmac.compare_digest(mac, _mac(secret, header)):
        raise PermissionError("bad mac")
    if abs(time.time() - ts) > MAX_SKEW_S:
        raise PermissionError("stale request")
