"""Issue 40 item 1: openpod as a package in a platform team's own repository.

Fast: what `openpod init DIR` writes (and refuses), and that the wheel carries every file the packages read at
run time. Slow (`-m slow`): the whole path offline - build the wheel, install it into a fresh venv outside the
checkout, `openpod init`, synthesize with the generated app, run the generated tests, and see them fail on an
unreviewed spec change.
"""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from infra.cli import init as init_cli
from infra.cli.main import main
from openpod_core.facts.register import value
from tests.conftest import EXAMPLES, ROOT

SCAFFOLD = ROOT / "infra" / "cli" / "scaffold"
PACKAGES = ("openpod_core", "infra", "platform_constructs", "node_agent", "training", "observability")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_init_writes_a_team_repository(tmp_path):
    dest = tmp_path / "platform"
    result = run("init", str(dest))
    assert result.exit_code == 0, result.output
    written = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert written == sorted(init_cli.FILES.values())
    version = init_cli.openpod_version()
    assert f"openpod[cdk]=={version}\n" in (dest / "requirements.txt").read_text()
    assert "@OPENPOD_VERSION@" not in "".join(p.read_text() for p in dest.rglob("*") if p.is_file())
    for py in ("app.py", "tests/test_platform.py"):
        py_compile.compile(str(dest / py), cfile=str(tmp_path / "x.pyc"), doraise=True)
    assert (dest / "openpod.yaml").read_text() == (EXAMPLES / "default.yaml").read_text()
    cdk = json.loads((dest / "cdk.json").read_text())
    assert cdk["context"] == json.loads((ROOT / "cdk.json").read_text())["context"]
    assert ".venv/bin/python app.py" in cdk["app"]
    readme = (dest / "README.md").read_text()
    assert "## Upgrading openpod" in readme and "--base-template tests/snapshots --template cdk.out" in readme
    assert not list(tmp_path.glob(".platform.*")), "the staging directory is left behind"


def test_the_scaffold_follows_the_project():
    """The scaffold's copies of project files stay the same: the example spec, cdk.json's feature flags, the CDK CLI
    pin (when one changes: cp examples/default.yaml infra/cli/scaffold/openpod.yaml, and so on)."""
    assert (SCAFFOLD / "openpod.yaml").read_text() == (EXAMPLES / "default.yaml").read_text()
    assert (json.loads((SCAFFOLD / "cdk.json").read_text())["context"]
            == json.loads((ROOT / "cdk.json").read_text())["context"])
    assert (json.loads((SCAFFOLD / "package.json").read_text())["devDependencies"]["aws-cdk"]
            == json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"])


def test_the_workflow_is_synth_only_pinned_and_valid(tmp_path):
    path = SCAFFOLD / "workflow.yaml"
    wf = yaml.safe_load(path.read_text())
    installs = [s["run"] for job in wf["jobs"].values() for s in job["steps"]
                if s.get("name", "").startswith("Install")]
    assert len(installs) == 2 and all("pip install -r requirements.txt" in r and "make" not in r for r in installs)
    for job in wf["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                action, _, ref = step["uses"].partition("@")
                assert ref == value(f"github-action.{action}"), step["uses"]
    assert wf["jobs"]["deploy"]["environment"] == "production"
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                        str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_python_dash_m_runs_every_command(tmp_path):
    """`python -m infra.cli.main` ran the group before the commands added below its __main__ block were added
    (status, init, pair-check: "No such command")."""
    for cmd in ("init", "status", "pair-check"):
        r = subprocess.run([sys.executable, "-m", "infra.cli.main", cmd, "--help"], capture_output=True, text=True,
                           cwd=ROOT, timeout=60)
        assert r.returncode == 0, (cmd, r.stderr)


def test_init_uses_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        result = run("init", str(tmp_path / "p"))
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "p" / "app.py").stat().st_mode & 0o777 == 0o640


def test_init_into_an_empty_directory(tmp_path):
    (tmp_path / "p").mkdir()
    assert run("init", str(tmp_path / "p")).exit_code == 0
    assert (tmp_path / "p" / "openpod.yaml").is_file()


@pytest.mark.parametrize("case", ["non-empty", "file", "no-parent", "empty-arg"])
def test_init_refuses_in_one_line_and_writes_nothing(tmp_path, case):
    dest = {"non-empty": tmp_path / "repo", "file": tmp_path / "f", "no-parent": tmp_path / "a" / "b",
            "empty-arg": ""}[case]
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "mine.txt").write_text("x")
    (tmp_path / "f").write_text("x")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = run("init", str(dest))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def _tracked() -> list[str]:
    return subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
                          capture_output=True, text=True, check=True).stdout.split()


def build_wheel(out: Path) -> Path:
    """The wheel of a clean copy of the checkout (what git tracks or would: a fresh clone with this work), so no
    stale build/ or *.egg-info of an earlier build adds files the project's configuration would leave out."""
    src = out / "src"
    for rel in _tracked():
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes((ROOT / rel).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(src)], check=True, capture_output=True, timeout=300, cwd=out)
    return next(out.glob("openpod-*.whl"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """One wheel for this module's tests (building it copies the checkout and runs pip: seconds); they share the
    xdist group ``wheel`` so that under xdist it is built once, not once per worker."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.mark.xdist_group("wheel")
def test_the_wheel_carries_every_file_the_packages_hold(wheel):
    """Every tracked file of the six packages is in the wheel (data tables, Dockerfiles, the scaffold), but tests'
    and caches; and the scaffold, which `openpod init` reads through importlib.resources."""
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = [f for f in _tracked() if f.split("/")[0] in PACKAGES]
    assert len(tracked) > 150
    missing = sorted(f for f in tracked if f not in names)
    assert missing == [], missing
    assert {f"infra/cli/scaffold/{f}" for f in init_cli.FILES} <= names
    assert {"training/Dockerfile", "training/constraints.txt", "node_agent/Dockerfile"} <= names


def _fresh_venv(where: Path, wheel: Path) -> Path:
    """A venv outside the checkout with the wheel installed offline (--no-deps --no-index); the dependencies come
    from this test environment's site-packages through a .pth (a plain path line: no .pth inside it runs, so the
    checkout's own editable install stays out). The venv gets no pip of its own (ensurepip: ~5 s of CPU): this
    environment's pip installs into it (``pip --python``)."""
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(where)], check=True,
                   timeout=120)
    purelib = Path(subprocess.run([str(where / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "zz-shared-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(where / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=300)
    return where / "bin"


def _jsii_package_cache() -> str:
    """The jsii runtime's package cache this environment uses (JSII_RUNTIME_PACKAGE_CACHE_ROOT, else
    $HOME/.cache/aws/jsii/package-cache: aws/jsii@v1.142.0:packages/@jsii/kernel/src/tar-cache/default-cache-root.ts),
    so a test that runs synthesis with another HOME does not unpack aws-cdk-lib (180 MB) again."""
    return os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT") or str(
        Path.home() / ".cache" / "aws" / "jsii" / "package-cache")


@pytest.mark.slow
@pytest.mark.xdist_group("wheel")
def test_wheel_to_init_to_synth_to_the_generated_tests(tmp_path, wheel):
    """About 60 s: one synth and four runs of the generated test (each one synth)."""
    bin_ = _fresh_venv(tmp_path / "venv", wheel)
    env = {"PATH": f"{bin_}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
           "JSII_RUNTIME_PACKAGE_CACHE_ROOT": _jsii_package_cache()}

    def sh(*cmd, cwd, ok=True):
        r = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        if ok:
            assert r.returncode == 0, f"{cmd}: {r.stdout[-2000:]}{r.stderr[-3000:]}"
        return r

    where = sh(str(bin_ / "python"), "-c", "import infra; print(infra.__file__)", cwd=tmp_path).stdout
    assert where.startswith(str(tmp_path / "venv")), where        # the installed package, not the checkout
    sh(str(bin_ / "openpod"), "init", "team", cwd=tmp_path)
    team = tmp_path / "team"
    (team / "training").mkdir()            # a module of the team's own named like one of openpod's: said, not run
    (team / "training" / "__init__.py").write_text("")
    r = sh(str(bin_ / "python"), "app.py", cwd=team, ok=False)
    assert r.returncode == 2 and r.stderr.startswith("error: module 'training' is "), r.stderr
    assert "shadows openpod's; rename it" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (team / "training" / "__init__.py").unlink()
    (team / "training").rmdir()
    r = sh(str(bin_ / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=team, ok=False)
    assert r.returncode == 1 and "no reviewed snapshot" in r.stdout          # nothing reviewed yet
    env["UPDATE_SNAPSHOTS"] = "1"
    sh(str(bin_ / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=team)
    del env["UPDATE_SNAPSHOTS"]
    sh(str(bin_ / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=team)     # deterministic
    spec = team / "openpod.yaml"
    spec.write_text(spec.read_text().replace("max_size: 4", "max_size: 5", 1))             # an unreviewed change
    r = sh(str(bin_ / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=team, ok=False)
    assert r.returncode == 1 and "the template differs from openpod-dev.template.json" in r.stdout
    sh(str(bin_ / "python"), "app.py", cwd=team)
    assert (team / "cdk.out" / "openpod-dev.template.json").is_file()
    assert (team / ".openpod" / "image" / "training" / "Dockerfile").is_file()
    plan = sh(str(bin_ / "openpod"), "plan", "--spec", "openpod.yaml", "--base-template", "tests/snapshots",
              "--template", "cdk.out", cwd=team)
    assert "in place: ScalingConfig" in plan.stdout
