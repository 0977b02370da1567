"""The FSx for Lustre servers from inside a team pod (issue 35), on the synthesized platform template.

The security-group half: the file system's security group admits the Lustre ports (TCP 988, 1018-1023) from the
cluster security group; every node's network interfaces carry that group; the VPC CNI runs without security groups
for pods, so a pod's packets leave on the node's interfaces with the node's groups (fact
eks.vpc-cni.pod-security-groups). The security groups therefore admit a pod, and only the team namespaces' egress
NetworkPolicies (taken here from the synthesized governance manifest, evaluated by tests/governance/netpol.py)
stand between a Lustre client run inside a pod and the servers. The nodes' kernel client, in the host network
namespace, is outside every NetworkPolicy (fact eks.vpc-cni.network-policy-host-network).
"""

from __future__ import annotations

import ipaddress
import json

import pytest

from tests.governance.netpol import Endpoint, connects

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]

LUSTRE = [(988, 988), (1018, 1023)]


def _manifest_objects(prop) -> list[dict]:
    if isinstance(prop, dict) and "Fn::Join" in prop:
        prop = "".join(p if isinstance(p, str) else "TOKEN" for p in prop["Fn::Join"][1])
    return json.loads(prop)


def _cluster_sg(default) -> dict:
    (cluster,) = default.resources("AWS::EKS::Cluster")
    return {"Fn::GetAtt": [cluster, "ClusterSecurityGroupId"]}


def test_the_security_groups_admit_a_pods_packets_to_the_lustre_ports(default):
    (fs,) = default.resources("AWS::FSx::FileSystem").values()
    (sg_ref,) = fs["Properties"]["SecurityGroupIds"]
    sg = default.template["Resources"][sg_ref["Fn::GetAtt"][0]]["Properties"]
    from_cluster = {(r["FromPort"], r["ToPort"]) for r in sg["SecurityGroupIngress"]
                    if r["IpProtocol"] == "tcp" and r.get("SourceSecurityGroupId") == _cluster_sg(default)}
    assert from_cluster == set(LUSTRE)
    # every node's primary interface carries the cluster security group ...
    templates = default.resources("AWS::EC2::LaunchTemplate").values()
    assert templates
    for lt in templates:
        nics = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
        assert all(_cluster_sg(default) in nic["Groups"] for nic in nics if nic["DeviceIndex"] == 0)
    # ... and pods share it: the VPC CNI add-on runs without security groups for pods (ENABLE_POD_ENI)
    (cni,) = [a for a in default.resources("AWS::EKS::Addon").values() if a["Properties"]["AddonName"] == "vpc-cni"]
    assert "ENABLE_POD_ENI" not in cni["Properties"].get("ConfigurationValues", "")
    assert json.loads(cni["Properties"]["ConfigurationValues"])["enableNetworkPolicy"] == "true"


def test_the_synthesized_egress_policies_keep_every_team_pod_off_the_lustre_servers(default):
    objects = [o for r in default.resources("Custom::AWSCDK-EKS-KubernetesResource").values()
               for o in _manifest_objects(r["Properties"]["Manifest"])]
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    teams = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"
             and "openpod.io/team" in o["metadata"].get("labels", {})]
    assert sorted(teams) == ["product", "research"]
    ns_labels = {t: {"kubernetes.io/metadata.name": t} for t in teams}
    (fs,) = default.resources("AWS::FSx::FileSystem").values()
    (subnet_ref,) = fs["Properties"]["SubnetIds"]
    subnet = ipaddress.ip_network(default.template["Resources"][subnet_ref["Ref"]]["Properties"]["CidrBlock"])
    servers = [str(subnet[4]), str(subnet[subnet.num_addresses // 2]), str(subnet[-2])]
    for team in teams:
        pod = Endpoint("10.0.3.7", team, {"app.kubernetes.io/name": "llama"})
        for ip in servers:
            for lo, hi in LUSTRE:
                for port in range(lo, hi + 1):
                    assert not connects(policies, ns_labels, pod, Endpoint(ip), port), (team, ip, port)
        # what the job needs still passes: its own pods, and S3 over HTTPS
        assert connects(policies, ns_labels, pod, Endpoint("10.0.9.9", team, {}), 29500)
        assert connects(policies, ns_labels, pod, Endpoint("52.219.100.4"), 443)
