"""What every spec module shares: the frozen model base, the field patterns, and :class:`Problem` /
:class:`SpecError`, how a spec that cannot be used is reported (field path + what is allowed, every problem at once).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from openpod_core.cloudwatch import LOG_RETENTION_DAYS

DNS_LABEL = r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$"
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
RESERVATION_ID = r"^cr-[0-9a-f]{8,17}$"
IAM_PRINCIPAL_ARN = r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$"
# An image source of teams[].images: a registry host (with a dot, or localhost; an optional port) and a
# repository path, lowercase path components as in a Docker reference, no tag or digest; a trailing '/' makes it
# a prefix (every repository below it).
IMAGE_SOURCE = (r"^(?:[a-z0-9-]+(?:\.[a-z0-9-]+)+|localhost)(?::\d+)?/"
                r"(?:[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*/)*(?:[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)?$")


def log_retention(days: int) -> int:
    """``days`` if CloudWatch Logs accepts it as a retention, else a ValueError naming the allowed values."""
    if days not in LOG_RETENTION_DAYS:
        raise ValueError(f"{days} is not a retention CloudWatch Logs accepts (it is never rounded); allowed: "
                         f"{', '.join(map(str, LOG_RETENTION_DAYS))}")
    return days


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where, and what is allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(Exception):
    """A spec that cannot be used; ``problems`` lists every reason."""

    def __init__(self, problems: list[Problem], source: str = "spec"):
        self.problems = problems
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(f"{self.source}: {p}" for p in self.problems)


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
