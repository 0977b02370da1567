"""``make bench``'s runner, the recovery benchmark (issue 29: --help ran every benchmark; a TypeError) and the
checkpoint benchmark against DCP (issue 22: a like-for-like column, the staging buffer's size)."""

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


@pytest.mark.slow
def test_the_dcp_comparison_has_a_like_for_like_column_and_one_staging_buffer(tmp_path, capsys):
    """Besides openpod with a memory tier in front (a snapshot in /dev/shm that DCP does not keep), openpod with
    the nvme tier alone - the one tier DCP writes - is measured in the same run and compared with DCP."""
    from benchmarks import checkpoint_vs_dcp

    res = checkpoint_vs_dcp.main(["--quick", "--model", "tiny", "--reps", "1", "--device", "cpu",
                                  "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "openpod nvme" in out and "openpod memory+nvme" in out and "nvme/DCP" in out
    for row in ("blocking", "durable", "memory", "lost"):
        assert set(res[row]) == {"dcp", "titan", "openpod_nvme", "openpod"}, row
    assert all(v > 0 for v in res["durable"].values())
    assert set(res["ratios"]) == {"nvme/DCP", "mem+nvme/DCP", "nvme/titan"}
    assert res["ratios"]["nvme/DCP"]["durable"] == res["durable"]["openpod_nvme"] / res["durable"]["dcp"]
    # the staging buffer openpod keeps between saves: one flat buffer, within 5 % of the state's bytes
    assert all(1.0 <= r <= 1.05 for r in res["staged"].values()), res["staged"]
    assert "staging buffer / state: openpod nvme" in out
