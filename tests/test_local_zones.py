"""Local Zone groups: a known zone of the region, only the types it is known to offer, never a cluster subnet."""

from __future__ import annotations

import pytest
import yaml

from infra.spec.base import SpecError
from infra.spec.loading import load_spec
from openpod_core.local_zones import LOCAL_ZONES
from tests.conftest import EXAMPLES



def _large_with_gb200_in(zone: str):
    data = yaml.safe_load((EXAMPLES / "large.yaml").read_text())
    next(g for g in data["instance_groups"] if g["name"] == "gb200")["availability_zone"] = zone
    return data


def test_a_group_may_launch_in_a_known_local_zone_of_the_region():
    spec = load_spec(EXAMPLES / "large.yaml")
    assert spec.local_zones == ["us-east-1-dfw-2a"]
    assert spec.group_az(next(g for g in spec.instance_groups if g.name == "gb200")) == "us-east-1-dfw-2a"
    assert "us-east-1-dfw-2a" not in spec.availability_zones     # never a cluster subnet


@pytest.mark.parametrize("zone,why", [
    ("us-east-1-xyz-9a", "nor a Local Zone of us-east-1 (known: us-east-1-dfw-2a"),
])
def test_an_unknown_local_zone_is_named_with_the_known_ones(tmp_path, zone, why):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_large_with_gb200_in(zone)))
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert any(str(p).startswith("instance_groups[2] (gb200).availability_zone:") and why in str(p)
               for p in e.value.problems), e.value.render()


def test_a_local_zone_only_takes_the_types_it_is_known_to_offer(tmp_path):
    data = yaml.safe_load((EXAMPLES / "large.yaml").read_text())
    next(g for g in data["instance_groups"] if g["name"] == "p5-dev")["availability_zone"] = "us-east-1-dfw-2a"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert any("Local Zone us-east-1-dfw-2a is known to offer p6e-gb200.36xlarge, not" in str(p)
               for p in e.value.problems), e.value.render()


def test_every_local_zone_row_has_a_source():
    for z in LOCAL_ZONES:
        assert z.name.startswith(z.parent_region + "-") and z.source.startswith("https://") and z.offers
