"""`python -m training run` on a torch it cannot drive says so in one line, before anything starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from training import cli


@pytest.mark.parametrize("version", ["2.11.0+cu130", "2.12.1", "1.13.1", None])
def test_an_unsupported_torch_is_one_line_naming_the_torch_needed(tmp_path, monkeypatch, version):
    """Before: torchrun died with its usage text ("unrecognized arguments: --shutdown-timeout=50")."""
    monkeypatch.setattr(cli, "installed_torch", lambda: version)
    r = CliRunner().invoke(cli.main, ["run", "--steps", "1", "--checkpoint-dir", str(tmp_path / "ck")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == cli.EXIT_USAGE and len(lines) == 1, r.output
    assert lines[0].startswith("error: torch") and "needs torch >= 2.13" in lines[0]
    assert (version or "not installed") in lines[0]
    assert not (tmp_path / "ck").exists()  # nothing created


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.14.0.dev20261101", "3.0.0"])
def test_supported_torches_pass(version):
    assert cli.torch_problem(version) is None


def test_the_installed_torch_is_read_without_importing_it():
    assert cli.torch_problem(cli.installed_torch()) is None  # this venv's torch (the pin)
