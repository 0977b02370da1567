"""Must show 4 (bad input: one clear line, exit 2, no traceback) and the manifests/queues commands."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from infra.cli.main import main
from infra.governance import render
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES, ROOT

SPEC = str(EXAMPLES / "default.yaml")
BASE = ["submit", "--spec", SPEC, "--image", "i", "--name", "job", "--dry-run"]


def one_error(args: list[str]) -> str:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("args, expected", [
    (["--team", "nobody", "--group", "p5", "--nodes", "1"],
     "error: --team 'nobody' is not a team of this spec; teams are: research, product"),
    (["--team", "research", "--group", "p5", "--nodes", "1", "--priority", "urgent"],
     "error: --priority 'urgent' is not a priority of this spec; priorities are: inference, experimentation, "
     "training, fine-tuning"),
    (["--team", "research", "--group", "p5", "--nodes", "4"],
     "error: --nodes 4 is more than team research could ever get on group p5: at most 3 (nominal 2 + borrowable 1 "
     "within the cohort)"),
    (["--team", "research", "--group", "trn2", "--nodes", "1", "--accelerators-per-node", "17"],
     "error: --accelerators-per-node 17 not allowed: trn2.48xlarge has 16 Trainium2; use 1 to 16"),
    (["--team", "research", "--group", "gpu", "--nodes", "1"],
     "error: --group 'gpu' has no team quota in this spec; groups with queues are: p5, trn2, gb200"),
    (["--team", "research", "--group", "p5", "--nodes", "1", "--require-topology", "ultraserver"],
     "error: --require-topology 'ultraserver' not available on group p5 (p5.48xlarge); levels are: layer-1, "
     "layer-2, layer-3, host"),
    (["--team", "research", "--group", "gb200", "--nodes", "18", "--require-topology", "host"],
     "error: --nodes 18 cannot fit one host; --require-topology host needs --nodes 1"),
    (["--team", "research", "--group", "p5", "--nodes", "1", "--shm", "2000"],
     "error: --shm 2000 not allowed; /dev/shm counts against the pod's 1884 GiB of memory: use 1 to 1883 GiB"),
    (["--team", "research", "--group", "p5", "--nodes", "1", "--env", "NOEQUALS"],
     "error: --env 'NOEQUALS' not allowed; use KEY=VALUE"),
])
def test_bad_submit_input_one_line_exit_2(args, expected):
    assert one_error(BASE + args + ["--", "train.py"]) == expected


def test_missing_script_is_a_clear_error():
    line = one_error(BASE + ["--team", "research", "--group", "p5", "--nodes", "1"])
    assert "no training script" in line and "after --" in line


def test_gb200_more_than_one_ultraserver_when_required(tmp_path):
    spec = tmp_path / "big.yaml"
    data = yaml.safe_load((EXAMPLES / "large.yaml").read_text())
    spec.write_text(yaml.safe_dump(data))
    line = one_error(["submit", "--spec", str(spec), "--image", "i", "--name", "j", "--team", "pretraining",
                      "--group", "gb200", "--nodes", "36", "--require-topology", "ultraserver", "--", "t.py"])
    assert line == "error: --nodes 36 cannot fit one UltraServer: u-p6e-gb200x72 has 18 instances"


def test_bad_input_via_subprocess_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "infra", *BASE, "--team", "nobody", "--group", "p5", "--nodes", "1",
                           "--", "t.py"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --team 'nobody'") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ manifests


def test_manifests_writes_every_object_deterministically(tmp_path):
    out1, out2 = tmp_path / "a", tmp_path / "b"
    for out in (out1, out2):
        result = CliRunner().invoke(main, ["manifests", "--spec", SPEC, "--out", str(out)])
        assert result.exit_code == 0, result.output
    files1 = sorted(p.name for p in out1.iterdir())
    assert files1 == sorted(p.name for p in out2.iterdir())
    assert all((out1 / f).read_bytes() == (out2 / f).read_bytes() for f in files1)
    assert files1 == sorted(render(load_spec(SPEC)))
    docs = [yaml.safe_load((out1 / f).read_text()) for f in files1]
    assert [d["kind"] for d in docs][:2] == ["Namespace", "Namespace"]  # apply order: namespaces first
    assert not [p for p in out1.iterdir() if p.name.startswith(".")]  # no temp files left


def test_manifests_removes_what_it_generated_before_but_keeps_other_files(tmp_path):
    out = tmp_path / "gitops"
    out.mkdir()
    (out / "kustomization.yaml").write_text("resources: []\n")
    assert CliRunner().invoke(main, ["manifests", "--spec", str(EXAMPLES / "large.yaml"), "--out", str(out)]).exit_code == 0
    before = {p.name for p in out.iterdir()}
    assert any("pretraining" in n for n in before)
    assert CliRunner().invoke(main, ["manifests", "--spec", SPEC, "--out", str(out)]).exit_code == 0
    after = {p.name for p in out.iterdir()}
    assert after == set(render(load_spec(SPEC))) | {"kustomization.yaml"}


def test_manifests_bad_spec_writes_nothing(tmp_path):
    spec = tmp_path / "bad.yaml"
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["teams"][0]["quotas"]["p5"]["nodes"] = 99
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["manifests", "--spec", str(spec), "--out", str(out)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "teams[0] (research).quotas.p5.nodes: 99 exceeds what group p5 can supply" in result.stderr
    assert not out.exists()


def test_manifests_unwritable_out_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = one_error(["manifests", "--spec", SPEC, "--out", str(blocker / "sub")])
    assert line.startswith(f"error: --out {blocker / 'sub'}: cannot write")


# --------------------------------------------------------------------- queues


def test_queues_table():
    result = CliRunner().invoke(main, ["queues", "--spec", SPEC])
    assert result.exit_code == 0
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0] == ["TEAM", "GROUP", "TYPE", "NOMINAL", "ACCELERATORS", "LEND", "LIMIT", "BORROW", "LIMIT", "MAX",
                       "NODES"]
    by = {(r[0], r[1]): r for r in rows[1:7]}
    assert by[("research", "p5")] == ["research", "p5", "p5.48xlarge", "2", "16", "H100", "2", "none", "3"]
    assert by[("product", "p5")] == ["product", "p5", "p5.48xlarge", "1", "8", "H100", "all", "none", "3"]
    assert by[("product", "gb200")][-1] == "18"
    assert "priorities: inference 100, experimentation 80, training 70, fine-tuning 50" in result.stdout
