"""NetworkPolicies of team namespaces: nothing reaches a team's pods from outside its namespace, and a team's
pods reach only what training needs.

A training pod listens on the rendezvous port, NCCL's bootstrap sockets and the peer-replication server, which
serves model weights and checkpoint snapshots; another team's pod must reach none of them. Per team namespace:
``default-deny-ingress`` selects every pod and allows nothing, ``allow-same-namespace`` lets the team's own pods
talk to each other (multi-node jobs), ``allow-metrics-scrape`` admits the runtime's metrics port from the VPC.

Egress is denied by default too (``default-deny-egress``): the FSx for Lustre servers (TCP 988, 1018-1023) admit
the cluster security group, which a pod's packets carry (the VPC CNI puts pods on the node's network interfaces,
facts ``eks.vpc-cni.pod-security-groups``), so without an egress policy a Lustre client run inside a pod reaches
them directly and mounts the whole file system. The nodes' kernel client runs in the host's network namespace,
where no NetworkPolicy applies (fact ``eks.vpc-cni.network-policy-host-network``): mounts through the team's
PersistentVolume keep working. What a team's pods may open (``EGRESS_ALLOWS``, one policy each):

- every pod of the team's namespace, any port (torch rendezvous, NCCL bootstrap, the peer server, the torchft
  Lighthouse: all inside the job's JobSet);
- cluster DNS: the ``kube-dns`` pods of ``kube-system`` on port 53; the VPC CNI's policy controller also admits
  the Service's cluster IP because the rule's pod selector matches the Service's selector (fact
  ``eks.vpc-cni.network-policy-service-ip``);
- the EKS Pod Identity agent on the node, 169.254.170.23:80 (fact ``eks.pod-identity-agent.address``): the
  training role's credentials;
- HTTPS (TCP 443) to any address: S3 through the gateway endpoint (at S3's public addresses: the prefix list a
  NetworkPolicy cannot name, as it matches CIDRs only), ECR, STS and the other interface endpoints in the VPC.

Nothing else: no Lustre ports, no IMDS, no kubelet, no other team's pods on any port. The VPC CNI enforces these
once its network-policy agent is on (``enableNetworkPolicy`` in the add-on configuration,
``platform_constructs/cluster.py``; fact ``eks.vpc-cni.network-policy``).

Not covered: EFA's RDMA traffic bypasses the kernel's network stack and so every NetworkPolicy; it flows only
between instances of the cluster's EFA security group.
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
DENY_EGRESS = "default-deny-egress"

# The EKS Pod Identity agent's link-local address and port (fact eks.pod-identity-agent.address).
POD_IDENTITY_AGENT = ("169.254.170.23/32", 80)
HTTPS = 443
# CoreDNS as EKS installs it: the kube-dns Service and its pods carry k8s-app=kube-dns in kube-system.
DNS_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}

# name -> the one egress rule of that policy: what a team's pods may open.
EGRESS_ALLOWS: dict[str, dict[str, Any]] = {
    "allow-egress-same-namespace": {"to": [{"podSelector": {}}]},
    "allow-egress-dns": {"to": [DNS_PEER], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
    "allow-egress-pod-identity": {"to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT[0]}}],
                                  "ports": [{"protocol": "TCP", "port": POD_IDENTITY_AGENT[1]}]},
    "allow-egress-https": {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": HTTPS}]},
}


def _policy(team: TeamSpec, name: str, kind: str, rules: list[dict] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": {}, "policyTypes": [kind]}
    if rules is not None:
        spec[kind.lower()] = rules
    return {"apiVersion": API, "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": team.name, "labels": dict(MANAGED_BY)}, "spec": spec}


def network_policies(spec: ClusterSpec, team: TeamSpec) -> list[dict[str, Any]]:
    """Deny ingress from everywhere, then allow it from the team's own namespace, and the runtime's metrics
    port from inside the VPC (the managed Prometheus scraper's network interfaces live in the cluster's
    subnets; what it serves is step counts and goodput, not weights). Deny egress, then allow ``EGRESS_ALLOWS``."""
    return [_policy(team, DENY_INGRESS, "Ingress", None),
            _policy(team, SAME_NAMESPACE, "Ingress", [{"from": [{"podSelector": {}}]}]),
            _policy(team, METRICS, "Ingress", [{"from": [{"ipBlock": {"cidr": spec.network.vpc_cidr}}],
                                                "ports": [{"protocol": "TCP", "port": TRAINING_METRICS_PORT}]}]),
            _policy(team, DENY_EGRESS, "Egress", None),
            *(_policy(team, name, "Egress", [rule]) for name, rule in EGRESS_ALLOWS.items())]
