"""``openpod dashboards`` and ``openpod rules``: the platform's Grafana dashboards, and its Prometheus rules and
scrape configuration at the spec's thresholds, as files for a Grafana or an in-cluster Prometheus."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml

from infra.cli.common import load_or_exit, spec_option


def _write(path: Path, text: str) -> None:
    from infra.cli.files import write_text_or_exit

    write_text_or_exit(path, "--out", text)
    click.echo(f"wrote {path}")


@click.command("dashboards")
@click.option("--out", "out", type=click.Path(), required=True, help="directory for the JSON files")
def dashboards(out: str) -> None:
    """Write one Grafana dashboard JSON per file (import them, or point Amazon Managed Grafana at them)."""
    from infra.cli.files import out_dir_or_exit
    from observability.dashboards import DASHBOARDS, dashboard_json

    target = out_dir_or_exit(out)
    for d in DASHBOARDS:
        _write(target / f"{d.uid}.json", json.dumps(dashboard_json(d), indent=2, sort_keys=True) + "\n")


@click.command("rules")
@spec_option
@click.option("--out", "out", type=click.Path(), required=True, help="directory for the YAML files")
def rules(spec_path: str | None, out: str) -> None:
    """Write the Prometheus rule file (the spec's alert thresholds) and scrape configuration."""
    from observability.rules import rules_yaml
    from observability.scrape import prometheus_config

    from infra.cli.files import out_dir_or_exit

    o = load_or_exit(spec_path).observability
    target = out_dir_or_exit(out)
    _write(target / "openpod-rules.yaml", rules_yaml(o.alerts))
    _write(target / "openpod-scrape.yaml", yaml.safe_dump(
        prometheus_config(f"{o.scrape_interval_seconds}s"), sort_keys=False))
