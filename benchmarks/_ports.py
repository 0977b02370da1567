"""A free TCP port on loopback, for the benchmarks that start servers (moto, a rendezvous store, a lighthouse)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 (closed again: the caller's server binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
