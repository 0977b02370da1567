"""Where each accelerated type is sold (openpod_core/instance_regions.py), the Capacity Block size limit and the
FSx Lustre version, each against its source: moto's recorded EC2 offerings and the EC2 / FSx references."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import moto
import pytest
import yaml

from infra.spec.loading import load_spec, parse_spec
from openpod_core import instance_regions, instance_types
from openpod_core.facts.register import fact
from tests.conftest import EXAMPLES, ROOT, spec_problems as problems

# moto 5.2.5's recording of DescribeInstanceTypeOfferings, one file per Region (fact ec2.instance-type-offerings.moto)
OFFERINGS = Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings" / "region"


def _recorded() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in OFFERINGS.glob("*.json.gz"):
        for o in json.loads(gzip.decompress(f.read_bytes())):
            out.setdefault(o["InstanceType"], set()).add(o["Location"])
    return out


def test_the_table_is_motos_recorded_offerings():
    recorded = _recorded()
    files = OFFERINGS.glob("*.json.gz")
    assert instance_regions.RECORDED_REGIONS == {f.name.removesuffix(".json.gz") for f in files}
    for name, regions in instance_regions.OFFERED_IN.items():
        assert regions == recorded[name], name
    # every accelerated type of the register is in the table, except the UltraServer types (sold as blocks)
    accelerated = {t.name for t in instance_types.INSTANCE_TYPES.values() if t.is_accelerated and not t.ultraserver}
    assert accelerated == set(instance_regions.OFFERED_IN)


def test_trn2_is_not_sold_in_us_east_1():
    assert "us-east-1" not in instance_regions.OFFERED_IN["trn2.48xlarge"]   # fact ec2.trn2.capacity-block-regions
    assert "us-east-2" in instance_regions.OFFERED_IN["trn2.48xlarge"]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_group_runs_in_a_region_that_offers_its_type(path):
    """large.yaml ran trn2.48xlarge in us-east-1 (its Dallas Local Zone is where GB200 blocks are sold)."""
    data = yaml.safe_load(path.read_text())
    for g in data["instance_groups"]:
        assert instance_regions.offered_in(g["instance_type"], data["region"]) is not False, (
            f"{path.name}: {g['name']} runs {g['instance_type']} in {data['region']}")


def test_validation_names_the_group_and_the_regions_that_offer_its_type():
    data = yaml.safe_load((EXAMPLES / "large.yaml").read_text())
    i = next(i for i, g in enumerate(data["instance_groups"]) if g["name"] == "trn1")
    data["instance_groups"][i]["instance_type"] = "trn2.48xlarge"
    assert problems(data) == [
        f"instance_groups[{i}] (trn1).instance_type: trn2.48xlarge is not offered in region us-east-1; it is in "
        "ap-south-2, us-east-2 (openpod_core/instance_regions.py)"]


def test_a_region_or_type_the_table_does_not_know_is_not_judged():
    assert instance_regions.offered_in("trn2.48xlarge", "mx-central-1") is None      # Region not recorded
    assert instance_regions.offered_in("p6e-gb200.36xlarge", "us-east-1") is None    # Local Zone blocks only
    assert instance_regions.offered_in("m7i.4xlarge", "us-east-1") is None           # CPU types: not held


def _default_with_block_group(max_size: int, instance_type: str = "p5.48xlarge") -> dict:
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data = copy.deepcopy(data)
    data["instance_groups"].append({"name": "block", "instance_type": instance_type,
                                    "availability_zone": "us-east-2a",
                                    "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"},
                                    "min_size": 0, "desired_size": 0, "max_size": max_size})
    return data


def test_a_capacity_block_group_holds_at_most_64_instances():
    assert fact("ec2.capacity-blocks.max-instances").value == "64"
    parse_spec(_default_with_block_group(64))
    i = len(yaml.safe_load((EXAMPLES / "default.yaml").read_text())["instance_groups"])
    assert problems(_default_with_block_group(65)) == [
        f"instance_groups[{i}] (block).max_size: 65 exceeds 64: a Capacity Block holds at most 64 instances and "
        "a group launches into one block"]


def test_ultraserver_blocks_are_not_held_to_the_instance_limit():
    """large.yaml's gb200 group: four u-p6e-gb200x72 (72 instances) in one block (see the unverified list)."""
    spec = load_spec(EXAMPLES / "large.yaml")
    assert spec.group("gb200").max_size == 72


def test_the_lustre_version_is_the_registers():
    """PERSISTENT_2 with a metadata configuration needs 2.15 (fact fsx.lustre.file-system-type-version); the
    synthesized templates (the reviewed CDK snapshots) carry it."""
    version = fact("fsx.lustre.file-system-type-version").value
    assert version == "2.15"
    snapshots = sorted((ROOT / "tests" / "cdk" / "__snapshots__" / "test_snapshots").glob("*.json"))
    found = 0
    for snap in snapshots:
        resources = [r for r in json.loads(snap.read_text()).get("Resources", {}).values()
                     if r.get("Type") == "AWS::FSx::FileSystem"]
        for r in resources:
            assert r["Properties"]["FileSystemTypeVersion"] == version, snap.name
            assert "MetadataConfiguration" in r["Properties"]["LustreConfiguration"], snap.name
            found += 1
    assert found >= 2   # default and large
    assert f'file_system_type_version="{version}"' in (ROOT / "platform_constructs" / "lustre.py").read_text()


def test_g_family_inference_groups_validate_where_they_are_sold():
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["instance_groups"] += [
        {"name": "inference", "instance_type": "g6e.48xlarge", "min_size": 0, "desired_size": 2, "max_size": 4},
        {"name": "eval", "instance_type": "g5.12xlarge", "min_size": 0, "desired_size": 0, "max_size": 2}]
    spec = parse_spec(data)
    assert spec.group("inference").type.accelerator_count == 8 and spec.group("eval").type.efa_count == 1
    data["region"], data["availability_zones"] = "eu-west-1", ["eu-west-1a", "eu-west-1b"]
    for g in data["instance_groups"]:
        g.pop("availability_zone", None)
    where = ", ".join(sorted(instance_regions.OFFERED_IN["g6e.48xlarge"]))
    lines = [p for p in problems(data) if "(inference).instance_type" in p]
    assert lines == [f"instance_groups[{len(data['instance_groups']) - 2}] (inference).instance_type: g6e.48xlarge "
                     f"is not offered in region eu-west-1; it is in {where} (openpod_core/instance_regions.py)"]
