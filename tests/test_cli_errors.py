"""Issue 29: unreachable services and garbage inputs are one line, not a traceback."""

from __future__ import annotations

from click.testing import CliRunner

from infra.cli.main import main
from tests.conftest import EXAMPLES
from tests.test_cli_fuzz import UNREACHABLE_KUBECONFIG

SPEC = str(EXAMPLES / "default.yaml")


def _one_line(args, code):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == code, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


def test_drain_against_an_unreachable_api_server(tmp_path):
    kc = tmp_path / "kubeconfig"
    kc.write_text(UNREACHABLE_KUBECONFIG)
    line = _one_line(["drain", "--spec", SPEC, "--group", "p5", "--kubeconfig", str(kc)], 1)
    assert "cannot reach the cluster API server" in line


def test_a_garbage_kubeconfig(tmp_path):
    for text in ("garbage: [\n\x01", "just a string\n"):
        kc = tmp_path / "kubeconfig"
        kc.write_text(text)
        for args in (["drain", "--spec", SPEC, "--group", "p5"], ["jobs", "list", "--team", "research"],
                     ["submit", "--spec", SPEC, "--team", "research", "--group", "p5", "--nodes", "1", "--name",
                      "j", "--image", "i"]):
            line = _one_line([*args, "--kubeconfig", str(kc), *(["--", "t.py"] if args[0] == "submit" else [])], 1)
            assert "is not a kubeconfig" in line, (text, args, line)


def test_a_garbage_base_template_for_plan(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "x.template.json").write_text("{garbage")
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "openpod-dev.template.json").write_text("[1, 2]")
    for d in ("g", "l"):
        line = _one_line(["plan", "--spec", SPEC, "--base-template", str(tmp_path / d), "--template",
                          str(tmp_path / d)], 1)
        assert "CloudFormation template" in line, line
