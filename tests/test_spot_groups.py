"""Spot instance groups (issue 39): capacity.type spot with instance-type diversity, its rules and the node group
it becomes. Each test fails on the code before (no spot capacity type)."""

from __future__ import annotations

import copy

import pytest

from infra.spec.loading import parse_spec
from infra.spec.warnings import warnings_for
from tests.conftest import example_data, spec_problems as problems


def _with_spot(alternatives=None, group="p5", instance_type="g5.12xlarge") -> dict:
    data = copy.deepcopy(example_data())
    g = next(g for g in data["instance_groups"] if g["name"] == group)
    if group == "p5":
        g["instance_type"] = instance_type
    g["capacity"] = {"type": "spot", **({"spot_instance_types": alternatives} if alternatives is not None else {})}
    return data


def test_a_spot_group_with_interchangeable_types_is_valid():
    spec = parse_spec(_with_spot(["g5.24xlarge"]))
    g = spec.group("p5")
    assert g.capacity.type.value == "spot" and g.instance_types == ["g5.12xlarge", "g5.24xlarge"]
    assert not g.uses_reservation and g.wants_placement_group


def test_spot_alternatives_need_the_same_efa_interface_layout():
    found = problems(_with_spot(["p5en.48xlarge"], instance_type="p5e.48xlarge"))
    assert any("EFA interface layout" in p for p in found), found


def test_spot_alternatives_must_offer_the_same_resources():
    found = problems(_with_spot(["g6e.12xlarge"]))
    assert any(p.startswith("instance_groups[") and "spot_instance_types[0]" in p and "accelerator model" in p
               for p in found), found


def test_spot_alternatives_only_for_spot():
    data = copy.deepcopy(example_data())
    g = next(g for g in data["instance_groups"] if g["name"] == "p5")
    g["capacity"] = {"type": "on-demand", "spot_instance_types": ["p5e.48xlarge"]}
    assert any("only with capacity.type spot" in p for p in problems(data))


def test_ultraserver_types_are_never_spot():
    found = problems(_with_spot(group="gb200"))
    assert any("capacity.type" in p and "Capacity Blocks" in p for p in found), found


def test_a_spot_group_of_one_type_is_warned_about():
    spec = parse_spec(_with_spot([]))
    assert any("spot_instance_types" in w and "several types" in w for w in warnings_for(spec))
