"""A spot instance group becomes an EKS node group with capacityType SPOT and every interchangeable type."""

from __future__ import annotations

import pytest

from infra.spec.groups import CapacityType
from openpod_core import instance_types as it
from platform_constructs.instance_group import InstanceGroup
from tests.cdk.test_constructs import probe_env

pytestmark = pytest.mark.xdist_group("cdk-synth")


def test_spot_group_is_a_spot_node_group_of_every_type():
    stack, net, cluster, role = probe_env()
    g = InstanceGroup(stack, "Spot", cluster=cluster, node_role=role, group_name="spot",
                      instance_type=it.get("g5.12xlarge"), subnets=net.private_subnets("us-east-2a"),
                      security_groups=["sg-1"], max_size=2, capacity_type=CapacityType.SPOT,
                      spot_instance_types=["g5.24xlarge"])
    cfn = g.nodegroup.node.default_child
    assert stack.resolve(cfn.capacity_type) == "SPOT"
    assert cfn.instance_types == ["g5.12xlarge", "g5.24xlarge"]
    data = stack.resolve(g.launch_template.launch_template_data)
    assert "capacityReservationSpecification" not in data and "instanceMarketOptions" not in data
    with pytest.raises(ValueError, match="spot_instance_types needs capacity_type spot"):
        InstanceGroup(stack, "NotSpot", cluster=cluster, node_role=role, group_name="ns",
                      instance_type=it.get("g5.12xlarge"), subnets=net.private_subnets("us-east-2a"),
                      security_groups=["sg-1"], max_size=2, spot_instance_types=["g5.24xlarge"])
