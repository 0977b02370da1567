"""NetworkPolicy evaluation, as the Kubernetes API defines it, plus the one addition of the VPC CNI's policy
controller (Service cluster IPs), for the promise tests of ``infra/governance/network.py``.

Kubernetes (kubernetes/api@v0.34.0 networking/v1/types.go): a pod selected by any policy whose ``policyTypes``
name a direction is isolated in that direction, and then a connection passes if it matches at least one rule of
those policies (:70-90: rules of every selecting policy combine additively; an empty ``egress`` list admits
nothing). ``policyTypes`` left out means Ingress, plus Egress when the policy has an ``egress`` section (:93-105).
A rule matches when its ``ports`` (empty: every port) and its ``to``/``from`` (empty: every peer) both match
(:108-149); a port is protocol (default TCP) and number, with ``endPort`` an inclusive range (:154-172); an
``ipBlock`` matches its CIDR minus ``except`` (:176-189); a peer's ``podSelector`` alone selects pods of the
policy's own namespace, with ``namespaceSelector`` pods of the selected namespaces (:191-210). Both directions
must allow a connection between two pods.

VPC CNI (aws/amazon-network-policy-controller-k8s@v1.1.7 pkg/resolvers/endpoints.go:449-510): the node agent sees a
pod's packets before kube-proxy's DNAT, so for an egress peer with a pod selector the controller also admits the
cluster IP of every non-headless Service in the peer's namespaces whose ``spec.selector`` the pod selector matches.

Label selectors here hold ``matchLabels`` only (the platform's policies use no expressions: asserted).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Endpoint:
    """One end of a connection: an address, and a pod's namespace and labels (``namespace`` None: not a pod -
    a file server, an S3 address, a node, a link-local agent) or a Service's selector (its cluster IP)."""

    ip: str
    namespace: str | None = None
    labels: dict = field(default_factory=dict)
    service_selector: dict | None = None


def _selects(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _types(policy: dict) -> list[str]:
    spec = policy["spec"]
    return spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]


def _port_ok(rule: dict, port: int, protocol: str) -> bool:
    ports = rule.get("ports") or []
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p:
            return True
        assert isinstance(p["port"], int), p   # no named ports in the platform's policies
        if p["port"] <= port <= p.get("endPort", p["port"]):
            return True
    return False


def _peer_ok(peer: dict, policy_ns: str, other: Endpoint, ns_labels: dict[str, dict], egress: bool) -> bool:
    if "ipBlock" in peer:
        ip = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return (ip in ipaddress.ip_network(block["cidr"])
                and not any(ip in ipaddress.ip_network(e) for e in block.get("except", [])))
    ns = other.namespace
    if ns is None:
        return False
    ns_ok = (_selects(peer["namespaceSelector"], ns_labels.get(ns, {})) if "namespaceSelector" in peer
             else ns == policy_ns)
    if not ns_ok:
        return False
    if other.service_selector is not None:   # the VPC CNI controller's cluster-IP addition, egress only
        return egress and _selects(peer.get("podSelector", {}), other.service_selector)
    return _selects(peer["podSelector"], other.labels) if "podSelector" in peer else True


def allowed(policies: list[dict], ns_labels: dict[str, dict], direction: str, subject: Endpoint, other: Endpoint,
            port: int, protocol: str = "TCP") -> bool:
    """Whether ``direction`` ("Egress": from ``subject`` to ``other``; "Ingress": from ``other`` into ``subject``)
    passes ``subject``'s policies on ``port``/``protocol``."""
    applying = [p for p in policies if p["metadata"]["namespace"] == subject.namespace
                and direction in _types(p) and _selects(p["spec"].get("podSelector", {}), subject.labels)]
    if not applying:
        return True
    key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    for p in applying:
        for rule in p["spec"].get(key, []):
            if not _port_ok(rule, port, protocol):
                continue
            peers = rule.get(peers_key) or []
            if not peers or any(_peer_ok(peer, p["metadata"]["namespace"], other, ns_labels, direction == "Egress")
                                for peer in peers):
                return True
    return False


def connects(policies: list[dict], ns_labels: dict[str, dict], src: Endpoint, dst: Endpoint, port: int,
             protocol: str = "TCP") -> bool:
    """Whether ``src`` (a pod) can open ``dst``:``port``: its egress, and ``dst``'s ingress when ``dst`` is a pod."""
    if not allowed(policies, ns_labels, "Egress", src, dst, port, protocol):
        return False
    if dst.namespace is None or dst.service_selector is not None:
        return True
    return allowed(policies, ns_labels, "Ingress", dst, src, port, protocol)
