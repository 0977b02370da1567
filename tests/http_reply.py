"""One way for the tests' small HTTP stand-ins (API servers, EC2) to answer a request."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def reply(handler: BaseHTTPRequestHandler, status: int, body: Any, content_type: str | None = None) -> None:
    """Send ``body`` with ``status``: bytes as they are, a str as text/plain, anything else as JSON."""
    if isinstance(body, bytes):
        data, kind = body, content_type or "application/octet-stream"
    elif isinstance(body, str):
        data, kind = body.encode(), content_type or "text/plain"
    else:
        data, kind = json.dumps(body).encode(), content_type or "application/json"
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
