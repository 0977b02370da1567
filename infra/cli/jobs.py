"""``openpod jobs list|status|cancel|logs``: a team's JobSets with their Kueue state, from the cluster.

Reads through ``infra.governance.live`` (the kubernetes client); ``connect`` is the one place the
boundary is made, so tests replay recorded API objects through ``InMemoryQueueApi``.
"""

from __future__ import annotations

import sys

import click

from infra.cli.common import emit, output_option
from infra.governance import live
from infra.governance.apply import ClusterError

# JobSet labels every pod with its JobSet's name
# (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, JobSetNameKey).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def connect(kubeconfig: str | None, context: str | None) -> live.QueueApi:
    return live.KubeQueueApi(kubeconfig, context)


def _api(kubeconfig, context) -> live.QueueApi:
    try:
        return connect(kubeconfig, context)
    except ClusterError as e:
        _cluster_fail(e)


def _cluster_fail(e: ClusterError):
    click.echo(f"error: {e}", err=True)
    sys.exit(1)


def _team_jobs(api: live.QueueApi, team: str) -> list[live.JobState]:
    return live.job_states(api.jobsets(team), api.workloads(team))


cluster_options = [
    click.option("--team", required=True, help="team (namespace) whose jobs to show"),
    click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
                 help="default: $KUBECONFIG or ~/.kube/config"),
    click.option("--context", "kube_context", default=None, help="kubeconfig context"),
]


def with_cluster(f):
    for opt in reversed(cluster_options):
        f = opt(f)
    return f


@click.group()
def jobs() -> None:
    """A team's jobs and their Kueue state (pending reason, admitted flavor, preempted by whom)."""


def _job_data(s: live.JobState) -> dict:
    from dataclasses import asdict

    return asdict(s)


@jobs.command("list")
@with_cluster
@output_option()
def list_(team: str, kubeconfig, kube_context, output: str = "table") -> None:
    """Every JobSet of the team, one line each."""
    api = _api(kubeconfig, kube_context)
    try:
        states = _team_jobs(api, team)
    except ClusterError as e:
        _cluster_fail(e)
    if output != "table":
        emit({"namespace": team, "jobs": [_job_data(s) for s in states]}, output, [])
        return
    if not states:
        click.echo(f"no jobs in namespace {team}")
        return
    click.echo("\n".join(live.render_jobs(states)))


@jobs.command()
@click.argument("name")
@with_cluster
@output_option()
def status(name: str, team: str, kubeconfig, kube_context, output: str = "table") -> None:
    """One job: its Kueue state and why."""
    api = _api(kubeconfig, kube_context)
    try:
        states = {s.name: s for s in _team_jobs(api, team)}
    except ClusterError as e:
        _cluster_fail(e)
    s = states.get(name)
    if s is None:
        click.echo(f"error: no job {name!r} in namespace {team}; jobs are: {', '.join(states) or 'none'}", err=True)
        sys.exit(2)
    if output != "table":
        emit({"namespace": team, **_job_data(s)}, output, [])
        return
    click.echo(f"job:       {s.name} ({team})\npriority:  {s.priority}\nnodes:     {s.nodes}\nstate:     {s.state}\n"
               f"flavor:    {s.flavor or '-'}\ndetail:    {s.detail or '-'}\npreempted: {s.preempted_by or '-'}")


@jobs.command()
@click.argument("name")
@with_cluster
def cancel(name: str, team: str, kubeconfig, kube_context) -> None:
    """Delete the JobSet (Kueue releases its quota; its pods are deleted with it)."""
    api = _api(kubeconfig, kube_context)
    try:
        api.delete_jobset(team, name)
    except ClusterError as e:
        _cluster_fail(e)
    click.echo(f"jobset {name} deleted in namespace {team}")


@jobs.command()
@click.argument("name")
@click.option("--tail", default=100, show_default=True, help="lines per pod")
@with_cluster
def logs(name: str, tail: int, team: str, kubeconfig, kube_context) -> None:
    """The last lines of every pod of the job, pod by pod."""
    api = _api(kubeconfig, kube_context)
    try:
        pods = api.pods(team, f"{JOBSET_NAME_LABEL}={name}")
        if not pods:
            click.echo(f"no pods of job {name} in namespace {team} (pending or finished)")
            return
        for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
            click.echo(f"==> {p['metadata']['name']} <==")
            click.echo(api.pod_log(team, p["metadata"]["name"], tail), nl=False)
    except ClusterError as e:
        _cluster_fail(e)
