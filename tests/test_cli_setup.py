"""Issue 29: setup that fits the job. `make synth` installs only what synthesis needs, cdk.json runs the project's
interpreter with a clear message when it is missing, and app.py never synthesizes the example by default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from tests.conftest import ROOT


def _make_dry_run(target: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=env, check=True).stdout


def test_make_synth_installs_the_cdk_extras_only_and_no_system_packages():
    synth = _make_dry_run("synth")
    assert "'.[cdk]'" in synth and "[dev]" not in synth and "apt-get" not in synth, synth
    assert "-c spec=examples/default.yaml" in synth        # the example is named, not a silent default
    test = _make_dry_run("test")
    assert "'.[dev]'" in test and "pytest" in test
    # never a sudo that would ask for a password: root, `sudo -n`, or a message saying what to install
    run = "\n".join(ln for ln in test.splitlines() if "echo" not in ln)
    assert not re.search(r"(?<!\w)sudo (?!-n)", run), run


def test_cdk_json_runs_the_project_interpreter_or_says_what_to_do(tmp_path):
    app = json.loads((ROOT / "cdk.json").read_text())["app"]
    assert ".venv/bin/python app.py" in app
    proc = subprocess.run(app, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and "run `make synth`" in proc.stderr and "Traceback" not in proc.stderr


def test_app_without_a_spec_stops(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDK_CONTEXT_JSON": "{}", "CDK_OUTDIR": str(tmp_path / "out")}
    proc = subprocess.run([sys.executable, str(ROOT / "app.py")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "no spec: pass -c spec=PATH" in proc.stderr and not list((tmp_path / "out").glob("*.template.json"))


def test_the_readme_starts_with_two_commands():
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    commands = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.split("#")[0].strip()]
    assert commands == ["make synth", "make test"]


def test_setup_says_what_it_installs_before_each_install():
    """Issue 40: `make setup` ran 11 minutes in silence (pip --quiet). Each install step now says what it installs
    first. Failed on the old code: no such line."""
    for target in ("setup", "setup-synth"):
        lines = _make_dry_run(target).splitlines()
        installs = [i for i, ln in enumerate(lines) if re.search(r"pip install|npm install|apt-get install", ln)
                    and "echo" not in ln]
        assert installs, target
        for i in installs:
            assert any('echo "setup: ' in ln for ln in lines[max(0, i - 4):i]), (target, lines[i])
