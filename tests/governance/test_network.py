"""Team namespaces' NetworkPolicies: another team's pods (and anything outside the namespace) cannot reach a
team's pods - its rendezvous, NCCL bootstrap and peer-replication server (which serves model weights).

``reaches`` evaluates NetworkPolicy ingress as the Kubernetes API defines it
(kubernetes.io/docs/concepts/services-networking/network-policies/: a pod selected by any policy with
policyType Ingress is isolated, and then admits a connection that any of those policies' rules allows;
rules are unions of peers; an empty podSelector selects every pod of the policy's namespace).
"""

from __future__ import annotations

import pytest

from infra.governance import all_objects
import ipaddress

from infra.governance.network import DENY_EGRESS, DENY_INGRESS, EGRESS_ALLOWS, METRICS, SAME_NAMESPACE
from platform_constructs.network import LUSTRE_PORTS, subnet_layout
from tests.governance.netpol import Endpoint, connects
from openpod_core.labels import TRAINING_METRICS_PORT
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES
from tests.governance.k8s_schema import model_errors

SPEC = load_spec(EXAMPLES / "default.yaml")
POLICIES = [o for o in all_objects(SPEC) if o["kind"] == "NetworkPolicy"]


def _selects(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def reaches(src_ns: str, src_labels: dict, dst_ns: str, dst_labels: dict, ns_labels: dict[str, dict],
            port: int = 29500, src_ip: str = "10.0.3.7") -> bool:
    applying = [p for p in POLICIES if p["metadata"]["namespace"] == dst_ns
                and "Ingress" in p["spec"]["policyTypes"] and _selects(p["spec"]["podSelector"], dst_labels)]
    if not applying:
        return True
    for p in applying:
        for rule in p["spec"].get("ingress", []):
            if "ports" in rule and not any(r["port"] == port for r in rule["ports"]):
                continue
            for peer in rule.get("from", []):
                if "ipBlock" in peer:
                    if ipaddress.ip_address(src_ip) in ipaddress.ip_network(peer["ipBlock"]["cidr"]):
                        return True
                    continue
                ns_ok = (_selects(peer["namespaceSelector"], ns_labels.get(src_ns, {}))
                         if "namespaceSelector" in peer else src_ns == dst_ns)
                pod_ok = _selects(peer["podSelector"], src_labels) if "podSelector" in peer else True
                if ns_ok and pod_ok:
                    return True
    return False


NS = {"research": {"openpod.io/team": "research"}, "product": {"openpod.io/team": "product"}, "kube-system": {}}
TRAINER = {"app.kubernetes.io/name": "llama", "jobset.sigs.k8s.io/jobset-name": "llama"}


def test_every_team_namespace_denies_ingress_and_allows_its_own_pods():
    for team in SPEC.teams:
        mine = {p["metadata"]["name"]: p for p in POLICIES if p["metadata"]["namespace"] == team.name}
        assert set(mine) == {DENY_INGRESS, SAME_NAMESPACE, METRICS, DENY_EGRESS, *EGRESS_ALLOWS}
        for p in mine.values():
            assert model_errors(p, "V1NetworkPolicy") == []


@pytest.mark.parametrize("src_ns, dst_ns, allowed", [
    ("product", "research", False),       # another team: not its rendezvous, NCCL or peer server
    ("kube-system", "research", False),   # nothing outside the namespace
    ("research", "research", True),       # a multi-node job's own pods
    ("research", "product", False),
])
def test_ingress_between_namespaces(src_ns, dst_ns, allowed):
    assert {t.name for t in SPEC.teams} == {"research", "product"}
    assert reaches(src_ns, {"app": "x"}, dst_ns, TRAINER, NS) is allowed


def test_the_metrics_port_is_open_to_the_vpc_and_nothing_else_is():
    """The managed scraper reaches each pod's metrics from its network interfaces in the cluster's subnets;
    another team's pod (also a VPC address) can read those metrics, but no other port."""
    assert reaches("product", {}, "research", TRAINER, NS, port=TRAINING_METRICS_PORT, src_ip="10.0.200.4")
    assert not reaches("product", {}, "research", TRAINER, NS, port=29500, src_ip="10.0.200.4")
    assert not reaches("product", {}, "research", TRAINER, NS, port=TRAINING_METRICS_PORT, src_ip="192.0.2.1")


# --- egress: what a team's pods may open (tests/governance/netpol.py evaluates the policies) -----------------

# kubernetes.io/metadata.name is set on every namespace by the API server (kubernetes/api@v0.34.0
# core/v1/well_known_labels.go:73, LabelMetadataName).
NS_LABELS = {n: {"kubernetes.io/metadata.name": n, **({"openpod.io/team": n} if n in ("research", "product") else {})}
             for n in ("research", "product", "kube-system", "openpod-system")}
POD = Endpoint("10.0.3.7", "research", TRAINER)
PEER = Endpoint("10.0.17.9", "research", {"app.kubernetes.io/name": "llama", "jobset.sigs.k8s.io/job-index": "1"})
OTHER_TEAM = Endpoint("10.0.18.4", "product", TRAINER)
KUBE_DNS_POD = Endpoint("10.0.5.20", "kube-system", {"k8s-app": "kube-dns"})
KUBE_DNS_SERVICE = Endpoint("172.20.0.10", "kube-system", service_selector={"k8s-app": "kube-dns"})


def _lustre_ports() -> list[int]:
    """Every port of the FSx security group's Lustre rules (platform_constructs/network.py LUSTRE_PORTS)."""
    out = []
    for p in LUSTRE_PORTS:
        rule = p.to_rule_json()
        out += range(rule["fromPort"], rule["toPort"] + 1)
    return out


def _fsx_addresses() -> list[str]:
    """Addresses the file servers' network interfaces can have: FSx lives in a private subnet of the spec's
    VPC (infra/app/stacks.py); a few of each private subnet, both ends included."""
    out = []
    for private, _ in subnet_layout(SPEC.network.vpc_cidr, len(SPEC.availability_zones), SPEC.network.layout_azs):
        net = ipaddress.ip_network(private)
        out += [str(net[4]), str(net[net.num_addresses // 2]), str(net[-2])]
    return out


def test_a_team_pod_cannot_open_the_lustre_servers_ports():
    """The Lustre finding: the FSx security group admits the cluster security group on 988 and 1018-1023, and a
    pod's packets carry it (pods share the node's network interfaces, fact eks.vpc-cni.pod-security-groups), so
    only the egress policy stands between a Lustre client run in a pod and the file servers. The nodes' kernel
    client runs in the host network namespace, where no NetworkPolicy applies."""
    assert _lustre_ports() == [988, 1018, 1019, 1020, 1021, 1022, 1023]
    for team in ("research", "product"):
        pod = Endpoint("10.0.3.7", team, TRAINER)
        for ip in _fsx_addresses():
            for port in _lustre_ports():
                assert not connects(POLICIES, NS_LABELS, pod, Endpoint(ip), port), (team, ip, port)


@pytest.mark.parametrize("dst, port, protocol, why", [
    (PEER, 29500, "TCP", "torch rendezvous with the job's other pods"),
    (PEER, 43127, "TCP", "NCCL bootstrap / the peer server on an ephemeral port"),
    (KUBE_DNS_POD, 53, "UDP", "cluster DNS"),
    (KUBE_DNS_POD, 53, "TCP", "cluster DNS over TCP"),
    (KUBE_DNS_SERVICE, 53, "UDP", "cluster DNS at the kube-dns Service's cluster IP"),
    (Endpoint("169.254.170.23"), 80, "TCP", "EKS Pod Identity agent: the training role's credentials"),
    (Endpoint("52.219.100.4"), 443, "TCP", "S3 through the gateway endpoint (checkpoints, datasets)"),
    (Endpoint("10.0.1.40"), 443, "TCP", "an interface endpoint in the VPC (ECR, STS)"),
])
def test_what_training_needs_stays_open(dst, port, protocol, why):
    assert connects(POLICIES, NS_LABELS, POD, dst, port, protocol), why


@pytest.mark.parametrize("dst, port, why", [
    (OTHER_TEAM, 29500, "another team's rendezvous"),
    (OTHER_TEAM, 443, "another team's pod, even on 443 (its ingress policy)"),
    (Endpoint("10.0.9.9", "openpod-system", {"app": "node-remediation"}), 8080, "the platform's controllers"),
    (Endpoint("169.254.169.254"), 80, "IMDS"),
    (Endpoint("10.0.3.1"), 10250, "a node's kubelet"),
    (Endpoint("203.0.113.7"), 22, "anything but HTTPS outside the VPC"),
    (Endpoint("10.0.5.20"), 53, "DNS at an address that is not the kube-dns pods"),
])
def test_everything_else_is_closed(dst, port, why):
    assert not connects(POLICIES, NS_LABELS, POD, dst, port), why
