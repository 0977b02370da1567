"""``make bench``'s runner and the recovery benchmark (issue 29: --help ran every benchmark; a TypeError)."""

from __future__ import annotations

import subprocess

import pytest


def test_help_and_list_run_nothing(monkeypatch, capsys):
    import benchmarks.__main__ as runner

    def no_run(*a, **k):
        raise AssertionError(f"ran a benchmark: {a}")

    monkeypatch.setattr(subprocess, "run", no_run)
    with pytest.raises(SystemExit) as e:
        runner.main(["--help"])
    assert e.value.code == 0 and "NAME" in capsys.readouterr().out
    assert runner.main(["--list"]) == 0
    assert "training_recovery" in capsys.readouterr().out.split()
    with pytest.raises(SystemExit) as e:
        runner.main(["nope"])
    assert e.value.code == 2 and "unknown benchmark nope" in capsys.readouterr().err


@pytest.mark.slow
def test_the_recovery_benchmark_runs_on_the_tiny_model(capsys):
    from benchmarks import training_recovery

    training_recovery.main(["--quick", "--model", "tiny"])
    out = capsys.readouterr().out
    assert "restore time ratios" in out
