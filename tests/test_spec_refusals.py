"""Specs that validation once passed and synthesis or AWS then refused: each is refused in one line naming the
field (issue 39). Every test here fails on the code before it (which said ok)."""

from __future__ import annotations

import copy

import pytest
import yaml

from infra.spec.loading import load_spec, parse_spec
from openpod_core import instance_types
from tests.conftest import example_data, spec_problems as problems


def _default() -> dict:
    return copy.deepcopy(example_data())


def _one(data: dict, field: str) -> str:
    found = problems(data)
    hits = [p for p in found if p.startswith(field)]
    assert hits, found
    assert all("\n" not in p for p in found)
    return hits[0]


def test_a_team_quota_on_the_only_cpu_group_leaves_no_system_group():
    data = _default()
    cpu = [g["name"] for g in data["instance_groups"] if not instance_types.get(g["instance_type"]).is_accelerated]
    assert len(cpu) == 1, cpu
    data["teams"][0].setdefault("quotas", {})[cpu[0]] = {"nodes": 1}
    assert "leave no system group" in _one(data, "teams")


def test_an_unknown_region_is_refused():
    data = _default()
    data["region"] = "us-north-1"
    data["availability_zones"] = ["us-north-1a", "us-north-1b"]
    data["storage"] = {**data.get("storage", {}), "fsx": {**data.get("storage", {}).get("fsx", {}),
                                                          "availability_zone": None}}
    assert "not an AWS Region" in _one(data, "region")


def test_az_letters_the_region_does_not_have():
    data = example_data("large.yaml")   # us-east-1: zones a-f
    data["availability_zones"] = [*data["availability_zones"][:1], "us-east-1g"]
    msg = _one(data, "availability_zones[1]")
    assert "no zone 'g'" in msg and "us-east-1f" in msg


@pytest.mark.parametrize("cidr", ["169.254.0.0/16", "127.0.0.0/16", "224.0.0.0/16", "0.0.0.0/16",
                                  "172.17.0.0/16", "172.17.128.0/20"])
def test_vpc_cidrs_in_special_purpose_ranges_or_the_docker_bridge(cidr):
    data = _default()
    data["network"]["vpc_cidr"] = cidr
    assert "overlaps" in _one(data, "network.vpc_cidr")


def test_an_ordinary_vpc_cidr_still_passes():
    data = _default()
    data["network"]["vpc_cidr"] = "172.18.0.0/16"
    parse_spec(data)


@pytest.mark.parametrize("field", ["eks.log_retention_days", "network.flow_logs_retention_days"])
@pytest.mark.parametrize("days", [99999, 2, 100])
def test_log_retention_not_cloudwatchs_is_refused_not_rounded(field, days):
    data = _default()
    section, key = field.split(".")
    data.setdefault(section, {})[key] = days
    assert "3653" in _one(data, field)


@pytest.mark.parametrize("version", ["latest", "~0.19", ">=1.0.0", "0.19", ""])
def test_chart_versions_must_be_exact(version):
    data = _default()
    data["eks"].setdefault("charts", {})["kueue"] = version
    assert "exact chart version" in _one(data, "eks.charts")


def test_an_empty_priority_list_is_refused():
    data = _default()
    data["priorities"] = []
    _one(data, "priorities")


def test_a_yaml_set_where_a_list_is_meant_is_refused(tmp_path):
    text = (tmp_path / "s.yaml")
    data = _default()
    body = yaml.safe_dump(data, sort_keys=False)
    body = body.replace("availability_zones:\n- us-east-2a\n- us-east-2b\n",
                        "availability_zones: !!set {us-east-2a, us-east-2b}\n")
    assert "!!set" in body
    text.write_text(body)
    from infra.spec.base import SpecError
    with pytest.raises(SpecError) as e:
        load_spec(text)
    assert "YAML set" in str(e.value) and len(str(e.value).splitlines()) == 1
