"""The series names a PromQL expression reads, so rules and dashboards can be checked against the metric table."""

from __future__ import annotations

import re

WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool",
}
BUILTIN_SERIES = {"up"}  # synthesized by Prometheus for every scrape target


def metric_names(expr: str) -> set[str]:
    """Series names ``expr`` reads (strings, label matchers, grouping lists and ranges removed; a name
    followed by ``(`` is a function)."""
    e = re.sub(r'"[^"]*"', "", expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    tokens = {m.group(0) for m in re.finditer(r"(?<![\w:.])[a-zA-Z_:][\w:]*", e)
              if not e[m.end():].lstrip().startswith("(")}
    return {t for t in tokens if t not in WORDS and not re.fullmatch(r"\d+[smhdw]", t)}


def unknown_names(expr: str) -> set[str]:
    """Names ``expr`` reads that are neither in observability/metrics.py, nor a record, nor built in."""
    from observability.metrics import family
    from observability.rules import records

    recorded = {r.record for r in records()}
    return {n for n in metric_names(expr) if n not in recorded and n not in BUILTIN_SERIES and family(n) is None}
