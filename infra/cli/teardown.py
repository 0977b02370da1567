"""``openpod teardown``: delete the platform's stack in an order AWS can follow (:mod:`infra.deploy.teardown`)."""

from __future__ import annotations

import click

from infra.cli.common import load_or_exit, spec_option
from infra.deploy import teardown as td


@click.command("teardown")
@spec_option
@click.option("--no-backup", is_flag=True, help="delete the FSx file system without a final backup")
@click.option("--yes", is_flag=True, help="do it; without --yes only the steps are printed")
def teardown_command(spec_path, no_backup, yes) -> None:
    """Delete the platform: the FSx file system first (final backup), then the stack. Buckets, keys and log
    groups are retained."""
    import boto3

    spec = load_or_exit(spec_path)
    session = boto3.session.Session()
    cfn = session.client("cloudformation", region_name=spec.region)
    fsx = session.client("fsx", region_name=spec.region)
    try:
        template, physical = td.stack_template(cfn, spec.name)
        steps = td.plan(template, physical, spec.name, backup=not no_backup)
    except Exception as e:   # botocore ClientError (no such stack, no access) or a template teardown cannot order
        raise click.ClickException(f"teardown {spec.name}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    if not yes:
        for i, s in enumerate(steps, 1):
            click.echo(f"{i}. {s.line}")
        click.echo("nothing done; run again with --yes to do it")
        return
    try:
        td.run(steps, cfn=cfn, fsx=fsx, backup=not no_backup, say=click.echo)
    except Exception as e:
        raise click.ClickException(f"teardown {spec.name}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    click.echo(f"deleted {spec.name}")
