"""Pod placement fragments the platform's own DaemonSets and chart values share."""

from __future__ import annotations


def require_label(key: str, *values: str) -> dict:
    """A required node affinity on one label: replaces a chart's default affinity (Helm replaces lists)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}}}


def tolerate_all() -> list[dict]:
    """Tolerate every taint: node daemons that must run before the startup health check lifts its taint."""
    return [{"operator": "Exists"}]
