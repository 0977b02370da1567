"""Shared fixtures of the node agent tests: recorded outputs, sysfs trees, a moto server."""

from __future__ import annotations

from pathlib import Path

import pytest


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


# moto_endpoint: tests/conftest.py (one moto server per test process).
