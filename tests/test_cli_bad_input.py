"""Issue 40: the CLI's remaining bad inputs are one line and write nothing; what it writes has the user's umask."""

from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner

import infra.cli.main as cli
from infra.cli.main import main
from tests.conftest import EXAMPLES

SPEC = str(EXAMPLES / "default.yaml")


def _one_line(args, code=2):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == code, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def test_manifests_out_empty_is_refused_and_writes_nothing(tmp_path, monkeypatch):
    """Failed on the old code: 43 files written into the current directory, then a crash."""
    monkeypatch.chdir(tmp_path)
    assert "--out '' is empty" in _one_line(["manifests", "--spec", SPEC, "--out", ""])
    assert list(tmp_path.iterdir()) == []


def test_manifests_into_a_directory_holding_a_non_utf8_yaml(tmp_path):
    """Failed on the old code: UnicodeDecodeError while looking for stale generated files. The user's file stays."""
    (tmp_path / "theirs.yaml").write_bytes(b"\xff\xfe\x00k\x00:")
    r = CliRunner().invoke(main, ["manifests", "--spec", SPEC, "--out", str(tmp_path)])
    assert r.exit_code == 0 and r.exception is None, r.output
    assert (tmp_path / "theirs.yaml").read_bytes() == b"\xff\xfe\x00k\x00:"


@pytest.mark.parametrize("command", [["docs"], ["manifests", "--spec", SPEC], ["rules", "--spec", SPEC],
                                     ["schema"]])
def test_out_to_a_path_that_cannot_be_a_directory(tmp_path, command):
    """Failed on the old code for docs: NotADirectoryError / FileExistsError tracebacks."""
    (tmp_path / "file").write_text("x")
    line = _one_line([*command, "--out", str(tmp_path / "file" / "sub" / ("s.json" if command == ["schema"] else ""))])
    assert "--out" in line and str(tmp_path / "file") in line, line


def test_docs_out_naming_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    assert "is not a directory" in _one_line(["docs", "--out", str(tmp_path / "file")])


def test_docs_without_out_never_writes_into_the_current_directory(tmp_path, monkeypatch):
    """Failed on the old code: `openpod docs` wrote ./docs wherever it ran. Now: the checkout's docs/, or --out."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(cli, "CHECKOUT", tmp_path / "site-packages")    # installed as a package: no checkout
    assert "--out DIR is required" in _one_line(["docs"])
    checkout = tmp_path / "checkout"
    (checkout / "docs").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(cli, "CHECKOUT", checkout)
    r = CliRunner().invoke(main, ["docs"])
    assert r.exit_code == 0, r.output
    assert list(cwd.iterdir()) == [] and (checkout / "docs" / "facts.md").is_file()


SUBMIT = ["submit", "--spec", SPEC, "--team", "research", "--group", "p5", "--nodes", "2", "--name", "x",
          "--dry-run"]


@pytest.mark.parametrize("args, says", [
    (["--image", ""], "--image '' is empty"),
    (["--image", "registry.example/train: 1"], "is not an image reference (whitespace)"),
    (["--image", "<training image>"], "is not an image reference"),
    (["--image", "img:"], "is not an image reference"),
    (["--image", "img", "--env", "MY VAR=1"], "--env 'MY VAR' is not an environment variable name"),
    (["--image", "img", "--env", "1X=1"], "--env '1X' is not an environment variable name"),
    (["--image", "img", "--priority", "inference"], "--priority 'inference' is not one team research may use"),
], ids=["empty-image", "image-space", "image-placeholder", "image-empty-tag", "env-space", "env-digit",
        "priority-not-allowed"])
def test_submit_refuses_what_the_cluster_would_refuse_later(args, says):
    """Failed on the old code: each printed a JobSet (exit 0) that the kubelet or admission refuses."""
    assert says in _one_line([*SUBMIT, *args, "--", "train.py"])


@pytest.mark.parametrize("image", ["nginx", "registry.example:5000/team/train:1.0-rc_1",
                                   "123456789012.dkr.ecr.us-east-1.amazonaws.com/train@sha256:" + "a" * 64])
def test_submit_takes_image_references(image):
    r = CliRunner().invoke(main, [*SUBMIT, "--image", image, "--env", "my.env-name=1", "--", "train.py"])
    assert r.exit_code == 0, r.output


def test_written_files_follow_the_umask(tmp_path):
    """Failed on the old code: mkstemp's 0600 on every file of manifests, docs, rules (a GitOps checkout or a
    Prometheus reading them as another user got nothing)."""
    old = os.umask(0o027)
    try:
        for args in (["manifests", "--spec", SPEC, "--out", str(tmp_path / "m")], ["docs", "--out", str(tmp_path / "d")],
                     ["rules", "--spec", SPEC, "--out", str(tmp_path / "r")],
                     ["schema", "--out", str(tmp_path / "s" / "openpod.schema.json")]):
            r = CliRunner().invoke(main, args)
            assert r.exit_code == 0, r.output
    finally:
        os.umask(old)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) > 10
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {oct(0o640)}
