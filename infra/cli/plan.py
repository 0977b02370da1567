"""``openpod plan``: the command over :mod:`infra.deploy.plan` (what CloudFormation will do to the platform if
this change is deployed; exit codes there)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from infra.cli.common import emit, fail, load_or_exit, output_option
from infra.deploy.plan import PlanError, blocked_lines, make_plan, render_markdown, render_table


@click.command("plan")
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False), required=True, help="cluster spec file")
@click.option("--base", "base_ref", default=None, help="git ref to compare against (spec and code at that ref)")
@click.option("--base-template", type=click.Path(file_okay=False), default=None,
              help="compare against this cdk.out, or a directory of STACK.template.json (e.g. the deployed "
                   "templates from `aws cloudformation get-template`)")
@click.option("--template", "head_template", type=click.Path(file_okay=False), default=None,
              help="use this already-synthesized cdk.out as the new side instead of synthesizing the working tree")
@click.option("--allow-replace", "allow", multiple=True, metavar="LOGICAL_ID",
              help="let this stateful resource be replaced or removed (repeatable)")
@click.option("--allow-failure", "allow_failure", multiple=True, metavar="LOGICAL_ID",
              help="deploy even though this resource's change is known to fail (repeatable)")
@output_option()
@click.option("--json", "as_json", is_flag=True, help="the same as -o json (kept for existing pipelines)")
@click.option("--markdown", is_flag=True, help="a pull-request comment")
def command(spec_path, base_ref, base_template, head_template, allow, allow_failure, as_json, markdown,
            output="table") -> None:
    """Show what deploying the spec would do to each AWS resource; exit 3 if data would be orphaned.

    Both sides are synthesized offline. Replacements come from the CloudFormation resource schemas'
    createOnlyProperties (as cfn-lint ships them) and logical-id changes; a stateful resource (FSx, S3, KMS,
    EKS cluster, log groups, anything retained) replaced or removed fails the plan (exit 3) unless
    --allow-replace names it; a change CloudFormation or the service will refuse (infra/deploy/plan_rules.py, each
    with its source) fails it with exit 4 unless --allow-failure names it. -o json|yaml prints the plan as
    data (docs/gitops.md), with the same exit codes; progress and blocking lines go to stderr.
    """
    for opt, value in (("--base", base_ref), ("--base-template", base_template), ("--template", head_template)):
        if value is not None and not value.strip():
            fail(f"{opt} '' is empty; give a {'git ref' if opt == '--base' else 'directory'}")
    if (base_ref is None) == (base_template is None):
        fail("give exactly one of --base GIT_REF or --base-template DIR")
    if as_json and markdown:
        fail("--json and --markdown are exclusive")
    if as_json and output not in ("table", "json"):
        fail(f"--json and -o {output} are exclusive (--json is -o json)")
    if markdown and output != "table":
        fail(f"--markdown and -o {output} are exclusive")
    output = "json" if as_json else output
    spec = load_or_exit(spec_path, warn=True)
    repo = Path(__file__).resolve().parents[2]
    try:
        plan = make_plan(spec_path=Path(spec_path), base_ref=base_ref,
                         base_template=Path(base_template) if base_template else None,
                         head_template=Path(head_template) if head_template else None,
                         allow=set(allow), region=spec.region, repo=repo, allow_failure=set(allow_failure))
    except PlanError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    unknown = sorted(set(allow) - {c.logical_id for c in plan.changes} - {c.new_logical_id for c in plan.changes})
    for lid in unknown:
        click.echo(f"warning: --allow-replace {lid}: no such resource is replaced or removed", err=True)
    if markdown:
        click.echo(render_markdown(plan), nl=False)
    elif output != "table":
        emit(plan.to_json(), output, [])
    else:
        click.echo(render_table(plan), nl=False)
    for line in blocked_lines(plan) if (markdown or output != "table") else []:
        click.echo(line, err=True)
    if plan.exit_code:
        sys.exit(plan.exit_code)
