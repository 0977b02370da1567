"""Snapshots of the generated YAML: any change to what reaches the cluster shows up in review.

Update deliberately with `pytest tests/governance/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from infra.cli.main import main
from infra.governance import install, render
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES

SPECS = sorted(EXAMPLES.glob("*.yaml")) + [Path(__file__).with_name("talk_scenario.yaml")]


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_manifests_yaml(path, snapshot):
    files = render(load_spec(path))
    assert "\n".join(f"--- # {name}\n{text}" for name, text in files.items()) == snapshot


@pytest.mark.parametrize("args", [
    ("--name", "llama-p5", "--team", "research", "--group", "p5", "--nodes", "2", "--require-topology", "layer-1"),
    ("--name", "neuron", "--team", "product", "--group", "trn2", "--nodes", "3", "--prefer-topology", "layer-3"),
    ("--name", "moe", "--team", "research", "--group", "gb200", "--nodes", "18", "--require-topology", "ultraserver",
     "--priority", "experimentation"),
], ids=["p5", "trn2", "gb200"])
def test_submit_dry_run_yaml(args, snapshot):
    result = CliRunner().invoke(main, ["submit", "--spec", str(EXAMPLES / "default.yaml"), "--image",
                                       "registry.example/train:1", "--dry-run", *args, "--", "train.py"])
    assert result.exit_code == 0
    assert result.stdout == snapshot


def test_submit_openpod_runtime_dry_run_yaml(snapshot):
    result = CliRunner().invoke(main, ["submit", "--spec", str(EXAMPLES / "default.yaml"), "--image",
                                       "registry.example/train:1", "--dry-run", "--name", "llama-p5", "--team",
                                       "research", "--group", "p5", "--nodes", "2", "--runtime", "openpod",
                                       "--", "--model", "xl", "--steps", "1000", "--global-batch", "64"])
    assert result.exit_code == 0, result.output
    assert re.sub(r"OPENPOD_PEER_SECRET: [0-9a-f]{64}", "OPENPOD_PEER_SECRET: <random>", result.stdout) == snapshot


def test_kueue_helm_values(snapshot):
    values = install.kueue_values(load_spec(EXAMPLES / "default.yaml"))
    assert yaml.safe_dump(values, sort_keys=False) == snapshot
