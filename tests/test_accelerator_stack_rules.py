"""Spec rules of the per-family accelerator stack (facts register: eks.p6e-gb200, chart.nvidia-dra-driver-gpu)."""

from __future__ import annotations

from infra.spec.loading import parse_spec
from tests.conftest import example_data, spec_problems


def test_gb200_needs_kubernetes_1_33_or_later_with_one_line_naming_the_field():
    data = example_data()
    data["eks"]["version"] = "1.32"
    data["eks"]["addons"] = {}
    gb200 = next(i for i, g in enumerate(data["instance_groups"]) if g["name"] == "gb200")
    (line,) = spec_problems(data)
    assert line.startswith("eks.version: 1.32 is too old for instance_groups[%d] (gb200): p6e-gb200.36xlarge "
                           "needs Kubernetes >= 1.33" % gb200), line
    assert "1.33" in line and "1.34" in line   # what is allowed


def test_kubernetes_1_32_is_still_fine_without_gb200():
    data = example_data()
    data["eks"]["version"] = "1.32"
    data["instance_groups"] = [g for g in data["instance_groups"] if g["name"] != "gb200"]
    for t in data["teams"]:
        t["quotas"].pop("gb200", None)
    assert parse_spec(data).eks.version == "1.32"
