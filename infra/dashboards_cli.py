"""``openpod dashboards --out DIR``: write the platform's Grafana dashboards (observability/dashboards.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("dashboards")
@click.option("--out", "out", type=click.Path(file_okay=False), required=True, help="directory for the JSON files")
def command(out: str) -> None:
    """Write one Grafana dashboard JSON per file (import them, or point Amazon Managed Grafana at them)."""
    from infra.docs import write_atomic
    from observability.dashboards import DASHBOARDS, dashboard_json

    for d in DASHBOARDS:
        path = Path(out) / f"{d.uid}.json"
        write_atomic(path, json.dumps(dashboard_json(d), indent=2, sort_keys=True) + "\n")
        click.echo(f"wrote {path}")
