"""Shared fixtures of the node agent tests: recorded outputs, sysfs trees, a moto server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import free_port

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_text(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text()


def materialize_sysfs(dump: str, root: Path) -> Path:
    """Turn a recorded ``grep -r . /sys/...`` dump (``path:value`` lines) into a tree under ``root``."""
    for line in dump.splitlines():
        path, _, value = line.partition(":")
        target = root / path.lstrip("/").removeprefix("sys/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")
    return root


@pytest.fixture(scope="session")
def moto_endpoint():
    """A real moto HTTP server (server mode) for this test process."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()
