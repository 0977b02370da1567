"""Capacity rules: UltraServers come only as Capacity Blocks; a block group can be declared before it is bought.

Sources (facts register): ec2.ultraservers.capacity-blocks-only, eks.capacity-block-mng.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from infra.spec.loading import parse_spec
from tests.conftest import EXAMPLES, spec_problems as problems

DEFAULT = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
GROUPS = {g["name"]: i for i, g in enumerate(DEFAULT["instance_groups"])}


def with_group(name: str, **fields) -> dict:
    data = copy.deepcopy(DEFAULT)
    data["instance_groups"][GROUPS[name]].update(fields)
    return data


def test_an_ultraserver_type_on_demand_is_refused_with_one_line_naming_the_field():
    i = GROUPS["gb200"]
    (line,) = problems(with_group("gb200", capacity={"type": "on-demand"}))
    assert line.startswith(f"instance_groups[{i}] (gb200).capacity.type: p6e-gb200.36xlarge is sold only "
                           "through EC2 Capacity Blocks"), line
    assert "capacity-block" in line


@pytest.mark.parametrize("ctype", ["on-demand", "reservation"])
def test_trn2_ultraserver_is_capacity_block_only_too(ctype):
    data = with_group("trn2", instance_type="trn2u.48xlarge", capacity={"type": ctype, "reservation_id":
                                                                        "cr-0123456789abcdef0"}
                      if ctype == "reservation" else {"type": ctype})
    assert any(".capacity.type: trn2u.48xlarge is sold only through EC2 Capacity Blocks" in p
               for p in problems(data))


def test_a_capacity_block_group_without_a_block_id_is_valid_and_awaits_its_block():
    spec = parse_spec(with_group("p5", capacity={"type": "capacity-block"}))
    g = next(g for g in spec.instance_groups if g.name == "p5")
    assert g.awaits_capacity_block
    assert not next(g for g in spec.instance_groups if g.name == "system").awaits_capacity_block


def test_the_default_example_declares_gb200_as_a_capacity_block_not_yet_bought():
    spec = parse_spec(copy.deepcopy(DEFAULT))
    groups = {g.name: g for g in spec.instance_groups}
    assert {"p5", "trn2", "gb200"} <= set(groups)
    assert groups["gb200"].capacity.type.value == "capacity-block" and groups["gb200"].awaits_capacity_block


def test_a_capacity_block_group_keeps_min_size_zero():
    i = GROUPS["p5"]
    data = with_group("p5", capacity={"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"},
                      min_size=1, desired_size=1)
    (line,) = [p for p in problems(data) if "min_size" in p]  # desired 1 - 1 spare also backs none of the quota
    assert line.startswith(f"instance_groups[{i}] (p5).min_size: must be 0 for a capacity-block group"), line
