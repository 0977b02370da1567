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

from infra.governance.network import DENY_INGRESS, METRICS, SAME_NAMESPACE
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
        assert set(mine) == {DENY_INGRESS, SAME_NAMESPACE, METRICS}
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
