"""Templates whose changes succeed on AWS: replaceable node groups, MINIMAL updates for reserved capacity,
the Lustre client on every node, and a cluster that keeps the subnets it was created with."""

from __future__ import annotations

import base64

import pytest

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]


@pytest.mark.parametrize("example", ["default", "large"])
def test_node_groups_carry_no_fixed_name(synthesized, example):
    """A fixed NodegroupName makes every replacement fail: CloudFormation creates the new group first and EKS
    answers that it exists (fact cfn.custom-name-replacement, aws/aws-cdk#26931)."""
    groups = synthesized[example].resources("AWS::EKS::Nodegroup")
    assert groups and all("NodegroupName" not in g["Properties"] for g in groups.values())


def test_reserved_and_capacity_block_groups_update_old_nodes_first(large):
    """A full reservation or block has no room for the default surge (fact eks.nodegroup.update-strategy)."""
    for name in ("gb200", "p5en"):     # capacity block, ODCR
        assert large.nodegroup(name)["Properties"]["UpdateConfig"] == {"MaxUnavailable": 1,
                                                                       "UpdateStrategy": "MINIMAL"}
    for name in ("system", "trn1"):    # on-demand: EKS's default
        assert "UpdateStrategy" not in large.nodegroup(name)["Properties"]["UpdateConfig"]


@pytest.mark.parametrize("example", ["default", "large"])
def test_every_node_installs_the_lustre_client(synthesized, example):
    s = synthesized[example]
    for g in s.resources("AWS::EKS::Nodegroup").values():
        name = g["Properties"]["Labels"]["openpod.io/instance-group"]
        data = s.launch_template(name)["UserData"]["Fn::Base64"]
        assert "dnf install -y -q lustre-client" in (data if isinstance(data, str) else base64.b64decode(data).decode())


def test_the_cluster_keeps_the_subnets_of_its_layout(large):
    cluster = next(iter(large.resources("AWS::EKS::Cluster").values()))
    subnets = cluster["Properties"]["ResourcesVpcConfig"]["SubnetIds"]
    zones = {large.template["Resources"][s["Ref"]]["Properties"]["AvailabilityZone"] for s in subnets}
    assert zones == {"us-east-1a", "us-east-1b", "us-east-1c"}


def test_a_local_zone_group_gets_a_node_only_subnet_there(large):
    """P6e-GB200 blocks are in the Dallas Local Zone (openpod_core/local_zones.py); EKS takes no Local Zone
    subnet for the control plane, so only the group uses it, and its traffic leaves through the NAT gateway."""
    res = large.template["Resources"]
    [subnet] = large.nodegroup("gb200")["Properties"]["Subnets"]
    props = res[subnet["Ref"]]["Properties"]
    assert props["AvailabilityZone"] == "us-east-1-dfw-2a" and props["CidrBlock"] == "10.64.248.0/21"
    cluster = next(iter(large.resources("AWS::EKS::Cluster").values()))
    assert subnet not in cluster["Properties"]["ResourcesVpcConfig"]["SubnetIds"]
    associations = large.resources("AWS::EC2::SubnetRouteTableAssociation").values()
    [table] = [a["Properties"]["RouteTableId"] for a in associations if a["Properties"]["SubnetId"] == subnet]
    routes = [r["Properties"] for r in large.resources("AWS::EC2::Route").values()
              if r["Properties"]["RouteTableId"] == table]
    assert any(r["DestinationCidrBlock"] == "0.0.0.0/0" and "NatGatewayId" in r for r in routes), routes
