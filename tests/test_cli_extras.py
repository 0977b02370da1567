"""Issue 40: every `openpod` command runs in the environment `make synth` makes (openpod[cdk]: no boto3, no
kubernetes, no torch) or says in one line which extra it needs - never a traceback.

The commands run in one subprocess where every installed module that the extras' dependency closure does not
bring is made unimportable (a meta-path finder that raises ModuleNotFoundError, as a missing package does); the
closure is read from the installed distributions' metadata, so it follows pyproject.toml.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import subprocess
import sys
import tomllib

import click
import pytest

from infra.cli.common import EXTRA_OF_MODULE
from infra.cli.main import main
from tests.conftest import EXAMPLES, ROOT


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.lower())


def _openpod_requires() -> list[str]:
    """openpod's requirements as this checkout's pyproject.toml declares them (the installed metadata may be
    another checkout's)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *(f"{r}; extra == '{extra}'" for extra, reqs in
                                       project["optional-dependencies"].items() for r in reqs)]


def closure(extras: set[str]) -> set[str]:
    """The distributions `pip install 'openpod[EXTRAS]'` installs (normalized names): openpod's requirements from
    pyproject.toml, theirs from the installed metadata."""
    from packaging.requirements import Requirement

    seen: set[tuple[str, frozenset]] = set()
    todo = [("openpod", frozenset(extras))]
    while todo:
        name, extra = todo.pop()
        if (_norm(name), extra) in seen:
            continue
        seen.add((_norm(name), extra))
        try:
            reqs = _openpod_requires() if _norm(name) == "openpod" else (md.requires(name) or [])
        except md.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker and not any(r.marker.evaluate({"extra": e}) for e in (extra or {""})):
                continue
            todo.append((r.name, frozenset(r.extras)))
    return {n for n, _ in seen}


# Runs in the subprocess: argv[1] = the allowed distributions, stdin = the command lines; prints one JSON result per
# command (exit code, stderr).
RUNNER = r"""
import contextlib, importlib.metadata as md, io, json, re, sys, traceback
allowed = set(sys.argv[1].split(","))
norm = lambda n: re.sub(r"[-_.]+", "-", n.lower())
blocked = {m for m, ds in md.packages_distributions().items()
           if not {norm(d) for d in ds} & allowed and m not in sys.stdlib_module_names}
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
from infra.cli.main import main
results = []
for argv in json.load(sys.stdin):
    err, out, code = io.StringIO(), io.StringIO(), None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            main.main(argv, prog_name="openpod")
        except SystemExit as e:
            code = e.code
        except BaseException:
            traceback.print_exc()
            code = "traceback"
    results.append({"argv": argv, "code": code, "stderr": err.getvalue()})
print(json.dumps(results))
"""

SPEC = str(EXAMPLES / "default.yaml")
# (command line, the extra it needs or None); every leaf command of `openpod` is here (test_every_command_is_listed)
COMMANDS = [
    (["validate", "--spec", SPEC], None),
    (["facts"], None),
    (["docs", "--out", "OUT/docs"], None),
    (["manifests", "--spec", SPEC, "--out", "OUT/m"], None),
    (["queues", "--spec", SPEC], None),
    (["submit", "--spec", SPEC, "--team", "research", "--group", "p5", "--nodes", "2", "--name", "x",
      "--image", "registry.example/train:1", "--dry-run", "--", "train.py"], None),
    (["submit", "--spec", SPEC, "--team", "research", "--group", "p5", "--nodes", "2", "--name", "x",
      "--image", "registry.example/train:1", "--runtime", "openpod", "--dry-run", "--", "--steps", "5"], None),
    (["submit", "--spec", SPEC, "--team", "research", "--group", "p5", "--nodes", "2", "--name", "x",
      "--image", "registry.example/train:1", "--", "train.py"], "k8s"),
    (["queues", "--spec", SPEC, "--live"], "k8s"),
    (["plan", "--spec", SPEC, "--base-template", "OUT", "--template", "OUT"], None),   # fails on input: no templates
    (["preflight", "--spec", SPEC], "aws"),
    (["capacity", "--spec", SPEC, "--group", "gb200"], "aws"),
    (["drain", "--spec", SPEC, "--group", "p5"], "k8s"),
    (["jobs", "list", "--team", "research"], "k8s"),
    (["jobs", "status", "x", "--team", "research"], "k8s"),
    (["jobs", "cancel", "x", "--team", "research"], "k8s"),
    (["jobs", "logs", "x", "--team", "research"], "k8s"),
    (["dashboards", "--out", "OUT/d"], "observability"),
    (["rules", "--spec", SPEC, "--out", "OUT/r"], None),
    (["pair-check", "render", "--spec", SPEC, "--group", "p5", "--nodes", "a,b", "--image", "img"], "k8s"),
    (["pair-check", "decide", "--spec", SPEC, "--group", "p5", "/dev/null"], None),   # fails on input: empty log
    (["schema"], None),
    (["status", "--spec", SPEC], "k8s"),
    (["init", "OUT/team"], None),
    (["teardown", "--spec", SPEC], "aws"),
]


def _leaves(group: click.Group, prefix=()) -> set[str]:
    out = set()
    for name, cmd in group.commands.items():
        out |= _leaves(cmd, (*prefix, name)) if isinstance(cmd, click.Group) else {" ".join((*prefix, name))}
    return out


def _leaf(argv: list[str]) -> str:
    return " ".join(argv[:2]) if argv[0] in ("jobs", "pair-check") else argv[0]


def test_every_command_is_listed():
    assert _leaves(main) == {_leaf(a) for a, _ in COMMANDS}


@pytest.mark.parametrize("extras", [{"cdk"}, set()], ids=["make-synth", "core-only"])
def test_each_command_runs_or_names_its_extra(extras, tmp_path):
    allowed = closure(extras)
    assert "aws-cdk-lib" in allowed if extras else "click" in allowed
    assert not {"boto3", "kubernetes", "torch", "grafana-foundation-sdk", "cryptography"} & allowed
    argvs = [[a.replace("OUT", str(tmp_path)) for a in argv] for argv, _ in COMMANDS]
    proc = subprocess.run([sys.executable, "-c", RUNNER, ",".join(sorted(allowed))], input=json.dumps(argvs),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r, (_, extra) in zip(json.loads(proc.stdout), COMMANDS):
        where = f"openpod {' '.join(r['argv'])}"
        assert "Traceback" not in r["stderr"] and r["code"] != "traceback", f"{where}:\n{r['stderr'][-3000:]}"
        lines = [ln for ln in r["stderr"].splitlines() if not ln.startswith(("warning:", "using spec"))]
        if extra is not None:
            assert r["code"] == 1 and len(lines) == 1, f"{where}: {r['code']} {lines}"
            assert f"openpod[{extra}]" in lines[0], f"{where}: {lines}"
        elif r["code"] not in (0, None):
            assert r["code"] in (1, 2) and len(lines) == 1 and lines[0].startswith("error: "), f"{where}: {lines}"
            assert "openpod[" not in lines[0], f"{where}: {lines}"


def test_each_extra_named_brings_its_module():
    """EXTRA_OF_MODULE against pyproject.toml: `pip install 'openpod[EXTRA]'` installs a distribution holding the
    module (read from the installed metadata: the test environment has every extra)."""
    providers = md.packages_distributions()
    for module, extra in EXTRA_OF_MODULE.items():
        assert {_norm(d) for d in providers.get(module, [])} & closure({extra}), (module, extra)
