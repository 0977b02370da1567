"""The real Prometheus tools (Debian package ``prometheus``; the Makefile's setup installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    package = "prometheus-alertmanager" if name in ("amtool", "prometheus-alertmanager") else "prometheus"
    msg = (f"{name} not found: install the Debian package `{package}` (`make setup` does: "
           f"apt-get install -y --no-install-recommends prometheus prometheus-alertmanager)")
    if os.environ.get("CI") == "true":
        pytest.fail(msg)  # CI must run these tests, never skip them
    pytest.skip(msg)


@pytest.fixture(scope="session")
def promtool() -> str:
    return _tool("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return _tool("prometheus")


@pytest.fixture(scope="session")
def amtool() -> str:
    return _tool("amtool")


@pytest.fixture(scope="session")
def alertmanager_bin() -> str:
    return _tool("prometheus-alertmanager")   # Debian's name for the alertmanager binary


def stop_process(p, timeout: float = 15) -> None:
    """Terminate a server the test started; kill it if it does not exit within ``timeout`` seconds."""
    p.terminate()
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=10)
