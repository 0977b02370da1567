"""Capacity-block groups at synth: not-yet-bought blocks are declared but not created; bought ones follow the EKS guide."""

from __future__ import annotations

from aws_cdk.assertions import Annotations, Match

from infra.governance import all_objects
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES


def test_default_example_synthesizes_without_the_unbought_gb200_group_and_says_so(default):
    names = {r["Properties"]["Labels"]["openpod.io/instance-group"] for r in default.resources("AWS::EKS::Nodegroup").values()}
    assert {"system", "p5", "trn2"} <= names and "gb200" not in names
    infos = Annotations.from_stack(default.stack).find_info(
        "*", Match.string_like_regexp("instance group gb200: capacity-block with no capacity.reservation_id"))
    assert len(infos) == 1


def test_the_unbought_group_stays_in_governance_so_queued_jobs_wait_for_it():
    objs = all_objects(load_spec(EXAMPLES / "default.yaml"))
    flavors = {o["metadata"]["name"] for o in objs if o["kind"] == "ResourceFlavor"}
    assert any("gb200" in f for f in flavors), flavors


def test_a_bought_block_puts_the_instance_type_in_the_launch_template_not_the_node_group(large):
    ng = large.nodegroup("gb200")["Properties"]
    lt = large.launch_template("gb200")
    assert ng["CapacityType"] == "CAPACITY_BLOCK"
    assert "InstanceTypes" not in ng
    assert lt["InstanceType"] == "p6e-gb200.36xlarge"
    assert lt["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert lt["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"]
    assert ng["ScalingConfig"]["MinSize"] == 0


def test_on_demand_groups_keep_the_instance_type_on_the_node_group(default):
    ng = default.nodegroup("p5")["Properties"]
    assert ng["InstanceTypes"] == ["p5.48xlarge"]
    assert "InstanceType" not in default.launch_template("p5")
