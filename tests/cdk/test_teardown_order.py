"""Teardown and redeploy on the synthesized examples (issue 39).

- No retained resource has a fixed physical name, so a new deploy of the same spec name after a teardown does not
  collide with what the old stack kept (the control-plane log group was a retained ``/aws/eks/<name>/cluster``).
- The order CloudFormation deletes in (each resource after everything that references or DependsOn it): the retained
  FSx file system stands on the Lustre security group, its subnet and the VPC, so a plain delete fails there; the
  teardown plan deletes it first and then nothing retained blocks a deletion.
"""

from __future__ import annotations

import pytest

from infra.deploy import teardown as td

pytestmark = pytest.mark.slow


def _fixed_names(template: dict) -> list[str]:
    """Retained resources with a name property that refers to nothing the stack creates (so it repeats on a
    redeploy of the same spec)."""
    out = []
    resources = template["Resources"]
    for lid in td.retained(template) + [k for k, r in resources.items() if r.get("UpdateReplacePolicy") == "Retain"]:
        for prop, value in resources[lid].get("Properties", {}).items():
            if not prop.endswith("Name") or prop in ("KeyName",):
                continue
            if not (td.references(value) & set(resources)):
                out.append(f"{lid} ({resources[lid]['Type']}).{prop} = {value}")
    return sorted(set(out))


@pytest.mark.parametrize("example", ["default", "large"])
def test_no_retained_resource_has_a_fixed_name(synthesized, example):
    template = synthesized[example].template
    assert td.retained(template)
    assert _fixed_names(template) == []
    assert not [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::Logs::LogGroup"
                and str(r.get("Properties", {}).get("LogGroupName", "")).startswith("/aws/eks/")]


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_retained_file_system_blocks_the_network_and_teardown_deletes_it_first(synthesized, example):
    template = synthesized[example].template
    resources = template["Resources"]
    order = td.deletion_order(template)
    deps = td.dependencies(template)
    for lid, on in deps.items():
        assert all(order.index(lid) < order.index(d) for d in on)

    bound = td.network_bound_retained(template)
    assert {resources[lid]["Type"] for lid in bound} == {"AWS::FSx::FileSystem"}
    (fs,) = bound
    blocked = td.blocked_deletions(template)
    types = {resources[lid]["Type"] for lid in blocked}
    assert types == {"AWS::EC2::SecurityGroup", "AWS::EC2::Subnet", "AWS::EC2::VPC"}
    assert all(fs in standing for standing in blocked.values())

    steps = td.plan(template, {lid: f"phys-{lid}" for lid in resources}, "stack")
    assert [s.action for s in steps] == ["delete-file-system", "delete-stack"] and steps[0].logical_id == fs
    assert td.blocked_deletions(template, gone_first=[fs]) == {}
