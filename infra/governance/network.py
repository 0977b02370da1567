"""NetworkPolicies of team namespaces: no traffic into a team's pods from outside its namespace.

A training pod listens on the rendezvous port, NCCL's bootstrap sockets and the peer-replication
server, which serves model weights and checkpoint snapshots; another team's pod must reach none of
them. Per team namespace: ``default-deny-ingress`` selects every pod and allows nothing, and
``allow-same-namespace`` lets the team's own pods talk to each other (multi-node jobs). Egress stays
open (S3, FSx, ECR, DNS). The VPC CNI enforces them once its network-policy agent is on
(``enableNetworkPolicy`` in the add-on configuration, ``platform_constructs/cluster.py``).

Not covered: EFA's RDMA traffic bypasses the kernel's network stack and so every NetworkPolicy;
it flows only between instances of the cluster's EFA security group.
"""

from __future__ import annotations

from typing import Any

from infra.governance.queues import MANAGED_BY
from infra.spec.cluster import ClusterSpec
from infra.spec.teams import TeamSpec
from openpod_core.labels import TRAINING_METRICS_PORT

API = "networking.k8s.io/v1"
DENY_INGRESS = "default-deny-ingress"
SAME_NAMESPACE = "allow-same-namespace"
METRICS = "allow-metrics-scrape"


def _policy(team: TeamSpec, name: str, ingress: list[dict] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": {}, "policyTypes": ["Ingress"]}
    if ingress is not None:
        spec["ingress"] = ingress
    return {"apiVersion": API, "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": team.name, "labels": dict(MANAGED_BY)}, "spec": spec}


def network_policies(spec: ClusterSpec, team: TeamSpec) -> list[dict[str, Any]]:
    """Deny ingress from everywhere, then allow it from the team's own namespace, and the runtime's metrics
    port from inside the VPC (the managed Prometheus scraper's network interfaces live in the cluster's
    subnets; what it serves is step counts and goodput, not weights)."""
    return [_policy(team, DENY_INGRESS, None),
            _policy(team, SAME_NAMESPACE, [{"from": [{"podSelector": {}}]}]),
            _policy(team, METRICS, [{"from": [{"ipBlock": {"cidr": spec.network.vpc_cidr}}],
                                     "ports": [{"protocol": "TCP", "port": TRAINING_METRICS_PORT}]}])]
