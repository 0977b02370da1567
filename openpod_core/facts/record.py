"""The record of one external fact: what it is, where it was read and when."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """One external fact: ``key`` names it, ``source`` is a URL or ``owner/repo@tag:path[:line]``."""

    key: str
    value: str
    source: str
    checked: str  # ISO date the value was last compared with its source
    note: str = ""
