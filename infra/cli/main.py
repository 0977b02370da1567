"""The ``openpod`` command line: validate specs, generate docs and manifests, submit jobs.

Every command reports bad input as one line per problem on stderr and exits 2,
never with a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from openpod_core import labels
from infra.cli.common import (EXIT_USAGE, MainGroup, emit, fail, group_or_exit, load_or_exit,  # noqa: F401
                              output_option, resolve_spec_path, spec_option)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openpod")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout without `pip install -e`
        return "unknown"


@click.group(cls=MainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", prog_name="openpod", message="%(prog)s %(version)s")
def main() -> None:
    """Declare, inspect and use an openpod training platform.

    Every command that reads a spec takes --spec PATH (or uses ./openpod.yaml, and says so).
    Shell completion: eval "$(_OPENPOD_COMPLETE=bash_source openpod)" (zsh_source, fish_source).
    """


@main.command()
@spec_option
@click.argument("legacy_spec", metavar="[SPEC]", type=click.Path(dir_okay=False), required=False)
@output_option()
@click.option("--show-defaults", is_flag=True,
              help="print the whole spec as the platform reads it, every default filled in (YAML, or -o json)")
def validate(spec_path: str | None, legacy_spec: str | None, output: str = "table", show_defaults: bool = False) -> None:
    """Validate a cluster spec; print every problem, exit 2 if any."""
    if legacy_spec is not None:
        if spec_path is not None:
            fail(f"give the spec once: --spec {spec_path} or the deprecated positional {legacy_spec}, not both")
        click.echo(f"warning: `openpod validate {legacy_spec}` is deprecated; use "
                   f"`openpod validate --spec {legacy_spec}` like every other command", err=True)
        spec_path = legacy_spec
    path = resolve_spec_path(spec_path)
    s = load_or_exit(path, warn=True)
    if show_defaults:
        emit(s.model_dump(mode="json"), "json" if output == "json" else "yaml", [])
        return
    groups = ", ".join(f"{g.name} ({g.instance_type} x{g.max_size})" for g in s.instance_groups)
    emit({"spec": str(path), "ok": True, "name": s.name, "region": s.region,
          "instance_groups": [{"name": g.name, "instance_type": g.instance_type, "max_size": g.max_size}
                              for g in s.instance_groups]},
         output, f"{path}: ok - {s.name} in {s.region}: {groups}")
    from infra.spec.quota_backing import scale_from_zero_quotas  # desired_size 0: a documented choice, warned

    for where, message in scale_from_zero_quotas(s):
        click.echo(f"warning: {where}: {message}", err=True)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line, per fact (JSON Lines)")
@output_option()
def facts(as_json: bool, output: str = "table") -> None:
    """Print the facts register: each external fact, its value, source and check date."""
    import json

    from openpod_core.facts.register import FACTS

    if as_json and output != "table":
        fail(f"--json (JSON Lines) and -o {output} are exclusive")
    if output != "table":
        emit({"facts": [{"key": f.key, "value": f.value, "source": f.source, "checked": f.checked, "note": f.note}
                        for f in FACTS]}, output, [])
        return
    for f in FACTS:
        if as_json:
            click.echo(json.dumps({"key": f.key, "value": f.value, "source": f.source, "checked": f.checked,
                                   "note": f.note}))
        else:
            click.echo(f"{f.key} = {f.value}\n    source: {f.source} (checked {f.checked})"
                       + (f"\n    {f.note}" if f.note else ""))


# The checkout this CLI runs from, if it runs from one (an installed package has no pyproject.toml beside it).
CHECKOUT = Path(__file__).resolve().parents[2]


@main.command()
@click.option("--out", type=click.Path(), default=None,
              help="directory to write the pages into [default: the docs/ of the openpod checkout this command "
                   "runs from; required elsewhere]")
def docs(out: str | None) -> None:
    """Regenerate the reference docs rendered from the project's data tables."""
    from infra.cli import docs as docgen
    from infra.cli.files import out_dir_or_exit

    if out is None:
        if not (CHECKOUT / "pyproject.toml").is_file() or not (CHECKOUT / "docs").is_dir():
            fail("--out DIR is required: this openpod is not a checkout with a docs/ folder to regenerate")
        out = str(CHECKOUT / "docs")
    target = out_dir_or_exit(out)
    try:
        written = docgen.write_all(target)
    except OSError as e:
        fail(f"--out {out}: cannot write: {e.strerror or e}")
    for path in written:
        click.echo(f"wrote {path}")


@main.command()
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="write the schema to this file instead of stdout (e.g. openpod.schema.json next to the spec)")
def schema(out: str | None) -> None:
    """Print the JSON Schema of the cluster spec, for editors (docs/platform.md, 'Editing a spec').

    The schema covers each field's type, range and allowed values; the rules across fields (quotas against
    group sizes, capacity, regions) are `openpod validate`'s."""
    import json

    from infra.spec.schema import spec_json_schema

    text = json.dumps(spec_json_schema(), indent=2) + "\n"
    if out is None:
        click.echo(text, nl=False)
        return
    from infra.cli.files import write_text_or_exit

    write_text_or_exit(out, "--out", text)
    click.echo(f"wrote {out}")


@main.command()
@spec_option
@click.option("--out", type=click.Path(), required=True,
              help="directory to write the YAML files into (for Argo CD / Flux)")
def manifests(spec_path: str | None, out: str) -> None:
    """Write every Kubernetes object of the spec's task governance as YAML files."""
    from infra import governance
    from infra.cli.files import out_dir_or_exit

    s = load_or_exit(spec_path)
    files = governance.render(s)
    target = out_dir_or_exit(out)
    try:
        governance.write(target, files)
    except OSError as e:
        fail(f"--out {out}: cannot write: {e.strerror or e}")
    click.echo(f"wrote {len(files)} objects to {out}")


@main.command()
@spec_option
@click.option("--live", is_flag=True, help="usage from the cluster: in use, borrowed, idle, admitted, pending")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="with --live")
@click.option("--context", "kube_context", default=None, help="with --live: kubeconfig context")
@output_option()
def queues(spec_path: str | None, live: bool = False, kubeconfig=None, kube_context=None, output="table") -> None:
    """Show each team's quota, lending and borrowing per instance group."""
    from infra.governance import queues as q

    s = load_or_exit(spec_path)
    if not s.teams:
        click.echo("no teams in this spec")
        return
    if live:
        from infra.cli import jobs as jobs_cli
        from infra.governance import live as live_
        from infra.governance.apply import ClusterError

        try:
            rows = live_.queue_usage(s, jobs_cli.connect(kubeconfig, kube_context).cluster_queues())
        except ClusterError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        emit({"usage": [{"team": u.team, "group": u.group, "nominal_nodes": u.nominal, "in_use_nodes": u.in_use,
                         "borrowed_nodes": u.borrowed, "idle_nodes": u.idle, "admitted": u.admitted,
                         "pending": u.pending} for u in rows], "idle_pool": list(q.idle_pools(s))},
             output, live_.render_usage(s, rows))
        return
    rows = [("TEAM", "GROUP", "TYPE", "NOMINAL", "ACCELERATORS", "LEND LIMIT", "BORROW LIMIT", "MAX NODES")]
    data = []
    for team in s.teams:
        for g in q.queued_groups(s):
            c = q.capacity(s, team, g.name)
            t = g.type
            accel = f"{c.nominal * t.accelerator_count} {t.accelerator_model}" if t.is_accelerated else "-"
            rows.append((team.name, g.name, t.name, str(c.nominal), accel,
                         "all" if c.lending_limit is None else str(c.lending_limit),
                         "none" if c.borrowing_limit is None else str(c.borrowing_limit), str(c.max_nodes)))
            data.append({"team": team.name, "group": g.name, "instance_type": t.name, "nominal_nodes": c.nominal,
                         "accelerators": c.nominal * t.accelerator_count if t.is_accelerated else 0,
                         "lending_limit": c.lending_limit, "borrowing_limit": c.borrowing_limit,
                         "max_nodes": c.max_nodes})
    if output != "table":
        emit({"quotas": data, "priorities": {p.name: p.value for p in s.priorities},
              "idle_pool": list(q.idle_pools(s))}, output, [])
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    prio = ", ".join(f"{p.name} {p.value}" for p in sorted(s.priorities, key=lambda p: -p.value))
    click.echo(f"\npriorities: {prio}")
    click.echo("nodes are whole nodes; LEND LIMIT all = idle quota may be lent, BORROW LIMIT none = no limit; "
               "MAX NODES = nominal + what the others lend (capped by the borrow limit)")
    pools = q.idle_pools(s)
    if pools:
        click.echo("idle pool (nodes in no team's quota, any team may borrow them): " + ", ".join(pools))
    from infra.governance import preemption
    click.echo("\n" + "\n".join(preemption.summary(s)))


@main.command(context_settings={"ignore_unknown_options": False})
@spec_option
@click.option("--name", required=True, help="job name (the JobSet's name)")
@click.option("--team", required=True, help="team (namespace) submitting the job")
@click.option("--group", "group", required=True, help="instance group to run on")
@click.option("--image", required=True, help="container image with the training code")
@click.option("--nodes", type=int, required=True, help="nodes (one pod per node)")
@click.option("--accelerators-per-node", type=int, default=None, help="default: all of the instance type's")
@click.option("--priority", default="training", show_default=True, help="a priority of the spec")
@click.option("--require-topology", default=None, help="all pods in one domain: ultraserver, layer-1..3, host")
@click.option("--prefer-topology", default=None, help="pack pods into as few domains of this level as possible")
@click.option("--max-restarts", type=int, default=10, show_default=True,
              help="times the whole job is recreated after a failure (e.g. a replaced node)")
@click.option("--hugepages", "hugepages_mi", type=int, default=None,
              help=f"2 MiB hugepages, MiB (EFA groups only; default {labels.EFA_HUGEPAGES_MI} for a whole node, "
                   "in proportion to --accelerators-per-node for part of one)")
@click.option("--shm", "shm_gi", type=int, default=None, help="/dev/shm size in GiB (default: 1/4 of memory, <= 64)")
@click.option("--env", "env", multiple=True, help="KEY=VALUE for the training container (repeatable)")
@click.option("--runtime", type=click.Choice(["torchrun", "openpod"]), default="torchrun", show_default=True,
              help="per-node launcher: torchrun SCRIPT, or the platform's `python -m training run` "
                   "(checkpoint tiers, peer recovery)")
@click.option("--s3-uri", default=None,
              help="--runtime openpod: s3://bucket/prefix checkpoint tier (the stack's checkpoints bucket)")
@click.option("--grace-seconds", type=int, default=None,
              help="seconds a pod gets after SIGTERM (eviction, preemption) before it is killed; --runtime openpod "
                   "checkpoints the current step durably in that time [default: 300 for openpod, 60 for torchrun]")
@click.option("--fault-tolerance", type=click.Choice(["restart", "replica"]), default="restart", show_default=True,
              help="--runtime openpod: restart = every worker restarts from the newest checkpoint; replica = "
                   "--replicas replica groups (one child Job each) and a torchft Lighthouse: a group whose worker "
                   "fails restarts alone and heals from a live peer")
@click.option("--replicas", type=int, default=None,
              help="--fault-tolerance replica: replica groups, a divisor of --nodes [default: one per node]")
@click.option("--min-replicas", type=int, default=0,
              help="--fault-tolerance replica: groups a step needs [0: all - survivors wait for a lost group]")
@click.option("--restart", type=click.Choice(["process", "in-process"]), default="process", show_default=True,
              help="--runtime openpod: process = a failed worker restarts every worker of its node; in-process = "
                   "the failed rank alone is replaced and the others re-form the process group in their own "
                   "processes (docs/training.md)")
@click.option("--spare-workers", type=int, default=None,
              help="--restart in-process: warm standby workers per node, processes of the same pod within its "
                   "resources [default: the runtime's, 1]")
@click.option("--dry-run", is_flag=True, help="print the JobSet YAML instead of creating it")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="default: $KUBECONFIG or ~/.kube/config")
@click.option("--context", "kube_context", default=None, help="kubeconfig context")
@click.argument("script", nargs=-1, type=click.UNPROCESSED)
def submit(spec_path, name, team, group, image, nodes, accelerators_per_node, priority, require_topology,
           prefer_topology, max_restarts, hugepages_mi, shm_gi, env, runtime, s3_uri, grace_seconds, dry_run,
           kubeconfig, kube_context, script, fault_tolerance="restart", replicas=None, min_replicas=0,
           restart="process", spare_workers=None) -> None:
    """Submit a multi-node PyTorch job as a Kueue-managed JobSet.

    The training script and its arguments follow `--`, e.g.
    `openpod submit --team research --group p5 --nodes 2 --image IMG --name llama -- train.py --steps 100`.
    With `--runtime openpod` they are arguments of `python -m training run`, e.g. `-- --model xl --steps 1000`.
    """
    from infra.governance import jobset

    s = load_or_exit(spec_path)
    env_map = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--env {item!r} not allowed; use KEY=VALUE")
        env_map[key] = value
    req = jobset.JobRequest(
        name=name, team=team, group=group, image=image, nodes=nodes, script=tuple(script),
        accelerators_per_node=accelerators_per_node, priority=priority, require_topology=require_topology,
        prefer_topology=prefer_topology, max_restarts=max_restarts, hugepages_mi=hugepages_mi, shm_gi=shm_gi,
        env=env_map, runtime=runtime, s3_uri=s3_uri, grace_seconds=grace_seconds,
        fault_tolerance=fault_tolerance, replicas=replicas, min_replicas=min_replicas,
        restart=restart, spare_workers=spare_workers,
    )
    try:
        jobset.validate(s, req)
    except jobset.JobError as e:
        fail(str(e))
    from infra.governance.admission import allowed_priorities

    allowed = allowed_priorities(s, s.team(team))
    if priority not in allowed:   # admission would refuse the JobSet's pods' workload later
        fail(f"--priority {priority!r} is not one team {team} may use; its priorities are: {', '.join(allowed)} "
             "(teams[].allowed_priorities in the spec)")
    obj = jobset.build(s, req)
    secret = jobset.peer_secret(req) if runtime == "openpod" else None
    from infra.governance import compute_domain

    # GB200 across nodes: the job's IMEX domain (cross-node NVLink), whose channel the trainer pods claim
    owned = [compute_domain.compute_domain(req)] if compute_domain.needed(s, req) else []
    if dry_run:
        from infra.governance.objects import to_yaml

        # the job's peer key last (the JobSet stays the first document): its pods do not start without it
        click.echo("---\n".join(to_yaml(o) for o in (obj, *owned, *([secret] if secret else []))), nl=False)
        if secret is not None:
            click.echo(f"note: the last document is Secret {secret['metadata']['name']}, the job's peer-replication "
                       "key; apply it with the JobSet (the pods wait for it) and keep it out of plain-text "
                       "repositories (seal or encrypt it for GitOps)", err=True)
        return
    from infra.governance import apply

    try:
        apply.create_jobset(obj, kubeconfig=kubeconfig, context=kube_context, secret=secret, owned=owned)
    except apply.ClusterError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo(f"jobset.jobset.x-k8s.io/{name} created in namespace {team} "
               f"(queue {team}, priority {priority}); watch: kubectl -n {team} get workloads,jobsets")
    for o in owned:
        click.echo(f"{o['kind'].lower()}.{o['apiVersion'].split('/')[0]}/{o['metadata']['name']} created "
                   f"(owned by the JobSet)")


from infra.cli.plan import command as _plan  # noqa: E402

main.add_command(_plan)

from infra.cli.preflight import capacity_command as _capacity, preflight_command as _preflight  # noqa: E402

main.add_command(_preflight)
main.add_command(_capacity)

from infra.cli.teardown import teardown_command as _teardown  # noqa: E402

main.add_command(_teardown)

from infra.cli.drain import drain as _drain  # noqa: E402

main.add_command(_drain)

from infra.cli.jobs import jobs as _jobs  # noqa: E402

main.add_command(_jobs)

from infra.cli.observability import dashboards as _dashboards, rules as _rules  # noqa: E402

main.add_command(_dashboards)
main.add_command(_rules)


from infra.cli.pair_check import pair_check as _pair_check  # noqa: E402

main.add_command(_pair_check)

from infra.cli.status import status as _status  # noqa: E402

main.add_command(_status)

from infra.cli.init import init as _init  # noqa: E402

main.add_command(_init)


if __name__ == "__main__":  # pragma: no cover
    main()
