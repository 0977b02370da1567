"""``openpod status``: instance groups, nodes, health labels, hot spares and queue use, from the live cluster
(:mod:`infra.governance.status`), as a table or ``-o json|yaml``."""

from __future__ import annotations

import click

from infra.cli import jobs as jobs_cli
from infra.cli.common import emit, load_or_exit, output_option, spec_option
from infra.governance.apply import ClusterError


@click.command()
@spec_option
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="default: $KUBECONFIG or ~/.kube/config")
@click.option("--context", "kube_context", default=None, help="kubeconfig context")
@output_option()
def status(spec_path: str | None, kubeconfig: str | None, kube_context: str | None, output: str = "table") -> None:
    """Show the cluster: each instance group's nodes and their health, hot spares, and each team's queue use."""
    from infra.governance import status as st

    s = load_or_exit(spec_path)
    try:
        cluster = st.read_status(s, jobs_cli.connect(kubeconfig, kube_context))
    except ClusterError as e:
        jobs_cli._cluster_fail(e)
    emit(cluster.as_data(), output, st.render(s, cluster))
