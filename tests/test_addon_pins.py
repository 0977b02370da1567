"""EKS add-on pins: each default is the EKS user guide's latest add-on version for the cluster's Kubernetes
version, and each is a row of the facts register (or listed there as unverified)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.spec.loading import parse_spec
from openpod_core.facts.register import FACTS
from openpod_core.facts.unverified import UNVERIFIED
from tests.conftest import example_data, on_kubernetes

# The "latest version of the Amazon EKS add-on type for each Kubernetes version" tables of the EKS user guide
# (managing-coredns, managing-kube-proxy, managing-vpc-cni), as read on 2026-11-23; sources in the facts register.
GUIDE = {
    "1.32": {"coredns": "v1.11.4-eksbuild.40", "kube-proxy": "v1.32.13-eksbuild.16", "vpc-cni": "v1.21.1-eksbuild.7"},
    "1.33": {"coredns": "v1.12.4-eksbuild.18", "kube-proxy": "v1.33.10-eksbuild.13", "vpc-cni": "v1.21.1-eksbuild.7"},
    "1.34": {"coredns": "v1.13.2-eksbuild.11", "kube-proxy": "v1.34.6-eksbuild.13", "vpc-cni": "v1.21.1-eksbuild.7"},
}


def addons_for(version: str) -> dict[str, str]:
    return parse_spec(on_kubernetes(example_data(), version), "v.yaml").eks.addon_versions


@pytest.mark.parametrize("version", sorted(GUIDE))
def test_default_pins_are_the_guides_latest_for_the_kubernetes_version(version):
    pins = addons_for(version)
    assert {name: pins[name] for name in GUIDE[version]} == GUIDE[version]


@pytest.mark.parametrize("version", sorted(GUIDE))
def test_every_default_pin_is_a_fact_or_listed_unverified(version):
    facts = {f.key: f.value for f in FACTS}
    unverified = " ".join(what for what, _ in UNVERIFIED)
    for name, pin in addons_for(version).items():
        key = next((k for k in (f"eks.addon.{name}.{version}", f"eks.addon.{name}") if k in facts), None)
        if key is None:
            assert name in unverified, f"{name} {pin}: neither a fact eks.addon.{name}[.{version}] nor unverified"
        else:
            assert facts[key] == pin, (key, facts[key], pin)


CHART_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "charts"


@pytest.mark.parametrize("chart", sorted(p.stem.rsplit("-", 1)[0] for p in CHART_FIXTURES.glob("*.yaml")))
def test_each_recorded_chart_values_file_was_read_at_the_pinned_chart_version(chart):
    """The device-plugin placement tests coalesce our values over these recorded chart defaults: they prove
    something only if the defaults were read at the version the platform installs."""
    from infra.spec.eks import DEFAULT_CHARTS

    pin = DEFAULT_CHARTS[chart]
    fixture = CHART_FIXTURES / f"{chart}-{pin}.yaml"
    assert fixture.exists(), f"no recorded values of {chart} {pin}"
    header = fixture.read_text().splitlines()[0]
    assert header.startswith("# source: ")
    read_at = set(re.findall(r"(?:@|chart(?: version)? )v?(\d+\.\d+\.\d+)\b", header))
    assert read_at == {pin.lstrip("v")}, f"{fixture.name}: values read at {read_at}, chart pinned at {pin}"
