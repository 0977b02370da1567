"""The facts register: every table of external facts, in the order ``docs/facts.md`` lists them, and the
lookup by key that code and tests read a fact through."""

from __future__ import annotations

from openpod_core.facts import (
    admission,
    capacity,
    checkpoint_io,
    device_plugins,
    eks_addons,
    instances,
    kernel_log,
    lifecycle,
    network_boundary,
    observability,
    references,
    remediation_iam,
    scheduling,
    training_image,
    trust,
    updates,
)
from openpod_core.facts.record import Fact

TABLES = (training_image, instances, eks_addons, device_plugins, capacity, updates, scheduling, references,
          observability, trust, network_boundary, remediation_iam, lifecycle, admission, kernel_log,
          checkpoint_io)
FACTS: tuple[Fact, ...] = tuple(f for table in TABLES for f in table.FACTS)

_BY_KEY = {f.key: f for f in FACTS}
assert len(_BY_KEY) == len(FACTS), "duplicate fact keys"


def fact(key: str) -> Fact:
    """The fact named ``key``; KeyError names the known keys when it is missing."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no fact {key!r} in openpod_core.facts (known: {', '.join(sorted(_BY_KEY))})") from None


def value(key: str) -> str:
    """Shorthand for ``fact(key).value``."""
    return fact(key).value
