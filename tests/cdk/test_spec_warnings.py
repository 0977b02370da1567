"""The resource estimate behind `openpod validate`'s 500-resource warning, against the synthesized examples."""

from __future__ import annotations

from infra.spec.loading import load_spec
from infra.spec.warnings import estimated_resources
from tests.conftest import EXAMPLES


def test_the_estimate_is_the_default_examples_count_and_a_floor_for_the_large_one(default, large):
    assert estimated_resources(load_spec(EXAMPLES / "default.yaml")) == len(default.template["Resources"])
    assert estimated_resources(load_spec(EXAMPLES / "large.yaml")) <= len(large.template["Resources"])
