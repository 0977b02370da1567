"""Synthesize each example once per test session (synth takes seconds) and share the results."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

EXAMPLE_NAMES = ("default", "large")


@dataclass
class Synth:
    name: str
    outdir: Path
    template: dict
    validation: dict | None
    stack: object

    def resources(self, type_: str) -> dict[str, dict]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}

    def nodegroup(self, group: str) -> dict:
        for r in self.resources("AWS::EKS::Nodegroup").values():
            if r["Properties"].get("Labels", {}).get("openpod.io/instance-group") == group:
                return r
        raise KeyError(group)

    def launch_template(self, group: str) -> dict:
        lt = self.nodegroup(group)["Properties"]["LaunchTemplate"]["Id"]["Ref"]
        return self.template["Resources"][lt]["Properties"]["LaunchTemplateData"]


def _synth(name: str, outdir: Path) -> Synth:
    from infra.spec.loading import load_spec
    from infra.app.stacks import build_app

    spec = load_spec(EXAMPLES / f"{name}.yaml")
    app, stack = build_app(spec, outdir=str(outdir))
    app.synth()
    template = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    report = outdir / "validation-report.json"
    validation = json.loads(report.read_text()) if report.exists() else None
    return Synth(name, outdir, template, validation, stack)


_SYNTH_FIXTURES = {"synthesized", "default", "large"}
_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Every test here that takes a synthesized example runs in the ``cdk-synth`` xdist group, marked in its module
    or not: the examples are then synthesized on one worker, once per run, not once on each worker."""
    for item in items:
        if _SYNTH_FIXTURES & set(getattr(item, "fixturenames", ())) and item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.xdist_group("cdk-synth"))


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> dict[str, Synth]:
    return {n: _synth(n, tmp_path_factory.mktemp(f"cdk-{n}")) for n in EXAMPLE_NAMES}


@pytest.fixture(scope="session")
def default(synthesized) -> Synth:
    return synthesized["default"]


@pytest.fixture(scope="session")
def large(synthesized) -> Synth:
    return synthesized["large"]
