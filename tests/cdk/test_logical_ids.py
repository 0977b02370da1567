"""The logical ids of stateful resources are a contract with every deployed platform.

A changed logical id makes CloudFormation create a new resource and delete (or, with Retain, orphan) the
old one: a new empty file system, new buckets, new keys. ``stateful_logical_ids.json`` lists them per
example and is edited by hand, never by ``--snapshot-update``: a refactor that moves or renames a
construct holding data must keep the id (``override_logical_id``) or move the resource explicitly
(``cdk refactor``); docs/gitops.md, "Renaming safely", shows both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.deploy.plan import stateful_reason, stateful_types

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]

IDS = Path(__file__).with_name("stateful_logical_ids.json")


def stateful_ids(template: dict) -> dict[str, str]:
    types = stateful_types()
    return {lid: r["Type"] for lid, r in sorted(template["Resources"].items()) if stateful_reason(r, types)}


@pytest.mark.parametrize("example", ["default", "large"])
def test_stateful_logical_ids_are_stable(synthesized, example):
    expected = json.loads(IDS.read_text())[example]
    actual = stateful_ids(synthesized[example].template)
    gone = {k: v for k, v in expected.items() if k not in actual}
    new = {k: v for k, v in actual.items() if k not in expected}
    assert not gone, (f"stateful resources lost their logical id (a deploy would replace them): {gone}; "
                      f"new ids: {new}. Keep the old id with override_logical_id, see docs/gitops.md")
    assert not new, (f"new stateful resources {new}: add them to {IDS.name} by hand once their ids are final")


def test_the_rename_recipe_keeps_the_id():
    """The documented recipe: moving a construct changes its id; override_logical_id restores it."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    def bucket_id(scope_id: str, keep: str | None = None) -> str:
        stack = cdk.Stack(cdk.App(), "S")
        bucket = s3.Bucket(cdk.Stack.of(stack) if scope_id == "" else _scope(stack, scope_id), "Datasets")
        if keep:
            bucket.node.default_child.override_logical_id(keep)
        return stack.resolve(bucket.node.default_child.logical_id)

    old = bucket_id("Buckets")
    assert bucket_id("Storage") != old
    assert bucket_id("Storage", keep=old) == old


def _scope(stack, name):
    from constructs import Construct

    return Construct(stack, name)
