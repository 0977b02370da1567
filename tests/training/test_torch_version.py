"""`python -m training run` on a torch it cannot drive says so in one line, before anything starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.training.test_data import launch_probe
from training import cli


@pytest.mark.parametrize("version", ["2.10.0+cu128", "2.9.1", "1.13.1", None])
def test_an_unsupported_torch_is_one_line_naming_the_torch_needed(tmp_path, monkeypatch, version):
    """Before: torchrun died with its usage text ("unrecognized arguments: --shutdown-timeout=50"). 2.11 is the
    oldest torch the runtime has run on (the GPU machine's)."""
    monkeypatch.setattr(cli, "installed_torch", lambda: version)
    r = CliRunner().invoke(cli.main, ["run", "--steps", "1", "--checkpoint-dir", str(tmp_path / "ck")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == cli.EXIT_USAGE and len(lines) == 1, r.output
    assert lines[0].startswith("error: torch") and "needs torch >= 2.11" in lines[0]
    assert (version or "not installed") in lines[0]
    assert not (tmp_path / "ck").exists()  # nothing created


@pytest.mark.parametrize("version", ["2.11.0+cu130", "2.12.1", "2.13.0", "2.13.0+cpu", "2.14.0.dev20261101",
                                     "3.0.0"])
def test_supported_torches_pass(version):
    assert cli.torch_problem(version) is None


def test_the_installed_torch_is_read_without_importing_it():
    assert cli.torch_problem(cli.installed_torch()) is None  # this venv's torch (the pin)


@pytest.mark.parametrize("version,stop,flag,warned", [
    ("2.13.0", 50, True, False), ("2.14.0.dev20261101", 50, True, False),
    ("2.11.0+cu130", 50, False, True), ("2.12.1", 31, False, True), ("2.11.0+cu130", 30, False, False)])
def test_the_shutdown_timeout_goes_to_torchrun_only_where_it_takes_it(tmp_path, version, stop, flag, warned):
    """Failed on the old code: 2.11 and 2.12 were refused outright (their torchrun rejects --shutdown-timeout), so the
    GPU machine's torch (2.11.0+cu130) could not run the GPU suite. Now the flag is left out there, and a grace
    shorter than asked is said in one warning line."""
    seen = launch_probe(tmp_path, "--stop-timeout", str(stop), torch=version)
    assert (f"--shutdown-timeout={stop}" in seen["cmd"]) == flag, seen["cmd"]
    assert not any(a.startswith("--shutdown-timeout") for a in seen["cmd"]) or flag
    warnings = [ln for ln in seen["stderr"].splitlines() if ln.startswith("warning: torch")]
    assert len(warnings) == int(warned), seen["stderr"]
    if warned:
        assert f"fixed 30 s, not --stop-timeout {stop}" in warnings[0] and version in warnings[0]
