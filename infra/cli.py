"""The ``openpod`` command line: validate specs, generate docs and manifests, submit jobs.

Every command reports bad input as one line per problem on stderr and exits 2,
never with a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from infra.spec import DEFAULT_SPEC, SpecError, load_spec

EXIT_USAGE = 2


def fail(lines: list[str] | str) -> None:
    """Print problems (one per line) to stderr and exit 2."""
    for line in [lines] if isinstance(lines, str) else lines:
        click.echo(f"error: {line}", err=True)
    sys.exit(EXIT_USAGE)


def load_or_exit(path: str | Path | None):
    try:
        return load_spec(path)
    except SpecError as e:
        fail([f"{e.source}: {p}" for p in e.problems])


spec_option = click.option(
    "--spec", "spec_path", type=click.Path(dir_okay=False), default=None,
    help=f"cluster spec file (default: the embedded {DEFAULT_SPEC.name})",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Declare, inspect and use an openpod training platform."""


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False), required=False)
def validate(spec: str | None) -> None:
    """Validate a cluster spec; print every problem, exit 2 if any."""
    s = load_or_exit(spec)
    groups = ", ".join(f"{g.name} ({g.instance_type} x{g.max_size})" for g in s.instance_groups)
    click.echo(f"{spec or DEFAULT_SPEC}: ok - {s.name} in {s.region}: {groups}")


@main.command()
@click.option("--out", type=click.Path(file_okay=False), default="docs", show_default=True)
def docs(out: str) -> None:
    """Regenerate the reference docs rendered from the project's data tables."""
    from infra import docs as docgen

    for path in docgen.write_all(Path(out)):
        click.echo(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    main()
