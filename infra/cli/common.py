"""What every ``openpod`` sub-command shares: the ``--spec`` option, loading a spec or exiting with one line per
problem, and ``-o json|yaml|table`` for commands whose output is data.

Sub-command modules import these from here, never from :mod:`infra.cli.main` (which imports them: no circle).

Where the spec comes from: ``--spec PATH``, else ``./openpod.yaml`` in the current directory (named on stderr),
else the command stops and says so. It never falls back to the bundled example.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from infra.spec.base import SpecError
from infra.spec.loading import load_spec

EXIT_USAGE = 2
# The one documented place a spec is found without --spec (docs/platform.md, "Where the spec comes from").
LOCAL_SPEC = Path("openpod.yaml")


def fail(lines: list[str] | str) -> NoReturn:
    """Print problems (one per line) to stderr and exit 2."""
    for line in [lines] if isinstance(lines, str) else lines:
        click.echo(f"error: {line}", err=True)
    sys.exit(EXIT_USAGE)


def resolve_spec_path(path: str | Path | None) -> Path:
    """``--spec`` as given, else ``./openpod.yaml`` (said on stderr), else exit 2 naming both."""
    if path is not None:
        if str(path) == "":
            fail("--spec '' is empty; give the path of a cluster spec file")
        return Path(path)
    if LOCAL_SPEC.is_file():
        click.echo(f"using spec {LOCAL_SPEC} (found in the current directory; --spec PATH to use another)", err=True)
        return LOCAL_SPEC
    fail("no spec: pass --spec PATH (e.g. --spec examples/default.yaml) or put the spec at ./openpod.yaml")


def load_or_exit(path: str | Path | None, warn: bool = False):
    """The validated spec at ``path`` (see :func:`resolve_spec_path`), or exit 2 with every problem.

    ``warn``: also print the spec's warnings (:mod:`infra.spec.warnings`: what a deploy will refuse or cannot
    serve). The commands that judge a deploy ask for them (validate, plan, preflight, and synthesis in app.py);
    the day-to-day ones (submit, jobs, queues, manifests ...) do not repeat them on every call."""
    path = resolve_spec_path(path)
    try:
        spec = load_spec(path)
    except SpecError as e:
        fail([f"{e.source}: {p}" for p in e.problems])
    if warn:
        from infra.spec.warnings import warnings_for

        for w in warnings_for(spec):
            click.echo(f"warning: {path}: {w}", err=True)
    return spec


def group_or_exit(path: str | Path | None, group: str):
    """The spec at ``path`` and its instance group named ``group`` (a ``--group`` option), or exit with the
    groups there are."""
    s = load_or_exit(path)
    by_name = {g.name: g for g in s.instance_groups}
    if group not in by_name:
        fail(f"--group {group!r} is not an instance group of this spec; groups are: {', '.join(by_name)}")
    return by_name[group]


SPEC_HELP = "cluster spec file [default: ./openpod.yaml if present; otherwise required]"

spec_option = click.option("--spec", "spec_path", type=click.Path(dir_okay=False), default=None, help=SPEC_HELP)

OUTPUT_FORMATS = ("table", "json", "yaml")


class OneLineError(click.ClickException):
    """Bad input said as one ``error:`` line on stderr, exit 2 (click's usage errors take three lines)."""

    exit_code = EXIT_USAGE

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class OutputFormat(click.Choice):
    """``-o``'s choice; a value outside it is one line (:class:`OneLineError`)."""

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        raise OneLineError(f"-o/--output {value!r}: choose one of {', '.join(self.choices)}")


def output_option(default: str = "table"):
    return click.option("-o", "--output", "output", type=OutputFormat(OUTPUT_FORMATS), default=default,
                        show_default=True, help="output format: table for people, json or yaml for programs")


# The optional third-party modules a command imports, and the extra of pyproject.toml that brings each: a command
# run without its extra says this in one line (:class:`MainGroup`) instead of a traceback. `make synth` installs
# openpod[cdk] only; tests/test_cli_extras.py checks each entry against the installed distributions.
EXTRA_OF_MODULE = {
    "boto3": "aws", "botocore": "aws",
    "kubernetes": "k8s", "cryptography": "k8s",
    "grafana_foundation_sdk": "observability",
    "aws_cdk": "cdk", "constructs": "cdk", "cdk_nag": "cdk", "cfnlint": "cdk", "jsii": "cdk",
    "torch": "training", "numpy": "training",
}
EXIT_MISSING_EXTRA = 1


def missing_extra_line(command: str, error: ModuleNotFoundError) -> str | None:
    """The one line for ``command`` failing on a module of an uninstalled extra; None for any other missing module
    (a bug, re-raised)."""
    module = (error.name or "").partition(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return (f"openpod {command} needs {module}, which is not installed here: pip install 'openpod[{extra}]' "
            f"(in an openpod checkout: .venv/bin/pip install -e '.[{extra}]')")


class MainGroup(click.Group):
    """The ``openpod`` group: a sub-command that needs an extra that is not installed exits 1 with one line."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as e:
            line = missing_extra_line(ctx.invoked_subcommand or "", e)
            if line is None:
                raise
            click.echo(f"error: {line}", err=True)
            sys.exit(EXIT_MISSING_EXTRA)


def emit(data: Any, output: str, table: list[str] | str) -> None:
    """Print ``data`` as JSON or YAML, or the ``table`` lines for people."""
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    elif output == "yaml":
        import yaml

        click.echo(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False), nl=False)
    else:
        click.echo(table if isinstance(table, str) else "\n".join(table))
