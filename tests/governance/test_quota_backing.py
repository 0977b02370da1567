"""Team quotas backed by running nodes (infra/spec/quota_backing.py): desired_size less hot spares, not max_size."""

from __future__ import annotations

import pytest
import yaml

from infra.spec import quota_backing
from infra.spec.base import SpecError
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES


def _large_with(tmp_path, desired: int):
    data = yaml.safe_load((EXAMPLES / "large.yaml").read_text())
    for g in data["instance_groups"]:
        if g["name"] == "trn1":
            g["desired_size"] = desired
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_quotas_over_the_running_nodes_fail_with_one_line_naming_team_and_resource(tmp_path):
    """large.yaml promised 60 trn1 nodes of quota over desired_size 32 (28 after spares)."""
    with pytest.raises(SpecError) as e:
        load_spec(_large_with(tmp_path, 32))
    lines = [p for p in e.value.problems if "not backed" in p.message]
    assert len(lines) == 1
    assert lines[0].path == "teams.inference.quotas.trn1.nodes"
    assert "team inference's quota of trn1 nodes" in lines[0].message and "= 28" in lines[0].message


def test_the_examples_quotas_are_backed():
    for name in ("default", "large"):
        assert quota_backing.unbacked_quotas(load_spec(EXAMPLES / f"{name}.yaml")) == []


def test_a_group_scaled_from_zero_is_a_warning_not_an_error():
    spec = load_spec(EXAMPLES / "large.yaml")
    warned = {p for p, _ in quota_backing.scale_from_zero_quotas(spec)}
    assert "teams.research.quotas.data-prep.nodes" in warned  # desired_size 0: the operator raises it


def test_validate_prints_the_scale_from_zero_warnings_and_still_succeeds():
    from click.testing import CliRunner

    from infra.cli.main import main

    r = CliRunner().invoke(main, ["validate", str(EXAMPLES / "large.yaml")])
    assert r.exit_code == 0, r.output
    assert "warning: teams.research.quotas.data-prep.nodes: team research's quota of data-prep nodes is not backed" \
        in r.output
