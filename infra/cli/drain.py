"""``openpod drain --group NAME``: drain an instance group before its node group is upgraded.

Uses the node agent's drain path (:mod:`node_agent.drain`): cordon every node of the
group, evict through the Eviction API with PodDisruptionBudgets honoured, and wait
until the evicted pods are gone - training pods checkpoint on SIGTERM in their grace
period. Then the node group update replaces nodes that run nothing, and each job stops
once instead of once per replaced node. ``--undo`` uncordons what this command cordoned.
"""

from __future__ import annotations

import sys

import click

from infra.cli.common import fail, group_or_exit, spec_option
from openpod_core import labels

# EKS fails a managed node group update with PodEvictionFailure when a node's pods have not
# left within 15 minutes (docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html,
# "Upgrade phase", checked 2026-11-23): draining beforehand within the same bound keeps them in step.
DEFAULT_TIMEOUT_S = 900
EXIT_TIMEOUT = 1


def connect(kubeconfig: str | None, context: str | None):
    """The Kubernetes boundary for ``kubeconfig``/``context`` (tests replace this)."""
    from kubernetes import client

    from infra.governance.apply import _client
    from node_agent.kube import KubeCluster

    _client(kubeconfig, context)
    return KubeCluster(api_client=client.ApiClient(), component="openpod-drain")


def _cluster_error(e: Exception) -> str:
    """One line for an error of the kubernetes client; anything else is re-raised (a bug, not bad input)."""
    status, reason = getattr(e, "status", None), getattr(e, "reason", None)
    if type(e).__name__ == "ApiException" and status is not None:
        return f"the API server refused the drain ({status} {reason}); check your RBAC (nodes, pods, evictions)"
    if type(e).__module__.startswith(("urllib3", "socket", "ssl")) or isinstance(e, OSError):
        detail = (str(getattr(e, "reason", None) or e).strip().splitlines() or [""])[0][:200]
        return (f"cannot reach the cluster API server: {type(e).__name__}: {detail}; the endpoint is private by "
                "default (docs/platform.md, 'Day one: reaching the cluster')")
    raise e


@click.command()
@spec_option
@click.option("--group", required=True, help="instance group to drain")
@click.option("--timeout", "timeout_s", type=int, default=DEFAULT_TIMEOUT_S, show_default=True,
              help="seconds to wait for the evicted pods to be gone")
@click.option("--poll", "poll_s", type=float, default=5.0, show_default=True, help="seconds between checks")
@click.option("--undo", is_flag=True, help="uncordon the nodes this command cordoned (upgrade called off)")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="default: $KUBECONFIG or ~/.kube/config")
@click.option("--context", "kube_context", default=None, help="kubeconfig context")
def drain(spec_path, group, timeout_s, poll_s, undo, kubeconfig, kube_context) -> None:
    """Cordon an instance group and evict its pods (they checkpoint first); exit 1 if pods remain at --timeout."""
    from infra.governance.apply import ClusterError
    from node_agent import drain as d

    group_or_exit(spec_path, group)
    if timeout_s <= 0:
        fail(f"--timeout must be > 0 seconds, got {timeout_s}")
    if poll_s <= 0:
        fail(f"--poll must be > 0 seconds, got {poll_s}")
    try:
        cluster = connect(kubeconfig, kube_context)
        if undo:
            nodes = d.uncordon_group(cluster, group)
            click.echo(f"uncordoned {len(nodes)} node(s) of group {group}: {', '.join(nodes) or '(none)'}")
            return
        result = d.drain_group(cluster, group, timeout_s=timeout_s, poll_s=poll_s,
                               progress=lambda line: click.echo(line, err=True))
    except ClusterError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_TIMEOUT)
    except Exception as e:  # noqa: BLE001 - the kubernetes client's errors, said in one line
        click.echo(f"error: {_cluster_error(e)}", err=True)
        sys.exit(EXIT_TIMEOUT)
    if not result.nodes:
        click.echo(f"group {group}: no nodes (label {labels.INSTANCE_GROUP}={group}); nothing to drain")
        return
    if not result.done:
        for node, pods in sorted(result.remaining.items()):
            if pods:
                click.echo(f"error: {node}: still running {', '.join(pods)}", err=True)
        click.echo(f"error: group {group} not drained within {timeout_s}s (PodDisruptionBudgets or long "
                   "checkpoints); rerun to keep waiting, or `openpod drain --undo` to call the upgrade off",
                   err=True)
        sys.exit(EXIT_TIMEOUT)
    click.echo(f"group {group}: {len(result.nodes)} node(s) cordoned and empty; deploy the node group update now")
