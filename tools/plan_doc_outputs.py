"""Regenerate the `openpod plan` outputs that docs/gitops.md shows, from the code as it is.

    .venv/bin/python tools/plan_doc_outputs.py           # rewrite the blocks
    .venv/bin/python tools/plan_doc_outputs.py --check   # exit 1 if a block is stale (what it would write: stdout)

Each shown output sits between `<!-- plan-output:NAME -->` and `<!-- plan-output:end -->`; NAME is a scenario
below: the default example changed as the page's text says, planned against the synthesized default (or, for
the upgrade, the default at the previous Kubernetes version against the default). The block is the command a
reader types, then what `openpod plan` prints on stdout (the same plan, the head synthesized once per spec and
passed with --template), cut to the lines the page discusses where it shows an excerpt. Synthesizes five times:
minutes. tests/test_plan_doc_outputs.py checks that every plan output the page shows is such a block.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "gitops.md"
BLOCK = re.compile(r"(<!-- plan-output:([\w-]+) -->\n)(.*?)(<!-- plan-output:end -->)", re.S)


def _rename_trn2(s: dict) -> None:
    for g in s["instance_groups"]:
        if g["name"] == "trn2":
            g["name"] = "trainium"
    for t in s["teams"]:
        t["quotas"] = {("trainium" if k == "trn2" else k): v for k, v in t["quotas"].items()}


def _throughput_and_rename(s: dict) -> None:
    s["storage"]["fsx"]["throughput_per_tib"] = 500
    _rename_trn2(s)


def _move_fsx(s: dict) -> None:
    s["storage"]["fsx"]["availability_zone"] = "us-east-2b"


def _third_az(s: dict) -> None:
    s["availability_zones"] = [*s["availability_zones"], "us-east-2c"]


def _previous_version(s: dict) -> None:
    s["eks"]["version"] = "1.33"


# spec name -> how the default example is changed (None: unchanged)
SPECS: dict[str, Callable[[dict], None] | None] = {
    "default": None, "rename": _throughput_and_rename, "fsx-move": _move_fsx, "3az": _third_az,
    "previous": _previous_version,
}


@dataclass(frozen=True)
class Scenario:
    command: str              # what the page shows the reader typing
    head: str                 # SPECS key of the new side
    args: tuple[str, ...] = ()
    base: str = "default"     # SPECS key of the synthesized base
    lines: tuple[str, ...] = ()   # table excerpt: the lines these patterns match at their start, `...` between
    change: str | None = None     # -o json/yaml excerpt: this logical id's change alone
    exit_code: bool = False   # show `$ echo $?`
    quote: bool = False       # a `>` quote (the --markdown comment), not a console block


SCENARIOS: dict[str, Scenario] = {
    "throughput-rename": Scenario("openpod plan --spec dev.yaml --base-template cdk.out", "rename"),
    "fsx-move": Scenario("openpod plan --spec dev.yaml --base-template cdk.out", "fsx-move", exit_code=True),
    "fsx-move-markdown": Scenario("", "fsx-move", ("--markdown",), quote=True),
    "three-azs": Scenario("openpod plan --spec dev-3az.yaml --base-template cdk.out", "3az", exit_code=True, lines=(
        r"\d+ to replace, ", "will fail: openpod-dev/NetworkVpcnodesSubnet1SubnetE013D65E ",
        "will fail: openpod-dev/EksClusterB2BDED5B ", "blocked: openpod-dev/LustreFileSystem4AFDAE78 ")),
    "fsx-move-json": Scenario("openpod plan --spec dev.yaml --base-template cdk.out -o json", "fsx-move",
                              ("-o", "json"), change="LustreFileSystem4AFDAE78", exit_code=True),
    "three-azs-yaml": Scenario("openpod plan --spec dev-3az.yaml --base-template cdk.out -o yaml", "3az",
                               ("-o", "yaml"), change="EksClusterB2BDED5B"),
    "upgrade": Scenario('openpod plan --spec clusters/dev.yaml --base-template deployed/     # eks.version: "1.33" '
                        '-> "1.34"', "default", base="previous"),
}


def synthesize_all(work: Path, names: set[str]) -> dict[str, Path]:
    """Each spec of ``names`` written and synthesized once into work/NAME.out."""
    sys.path.insert(0, str(ROOT))
    from infra.deploy.plan import synthesize

    default = yaml.safe_load((ROOT / "examples" / "default.yaml").read_text())
    out = {}
    for name in sorted(names):
        spec = copy.deepcopy(default)
        if SPECS[name] is not None:
            SPECS[name](spec)
        path = work / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        print(f"synthesizing {name} ...", file=sys.stderr, flush=True)
        synthesize(ROOT, path, work / f"{name}.out")
        out[name] = work / f"{name}.out"
    return out


def run(s: Scenario, work: Path, outs: dict[str, Path]) -> tuple[str, int]:
    """The plan, its spec at the path the page shows (the upgrade steps name it)."""
    shown = s.command.split("--spec ")[1].split()[0] if s.command else "dev.yaml"
    cwd = work / "cwd"
    (cwd / shown).parent.mkdir(parents=True, exist_ok=True)
    (cwd / shown).write_text((work / f"{s.head}.yaml").read_text())
    cmd = [sys.executable, "-m", "infra", "plan", "--spec", shown, "--base-template", str(outs[s.base]),
           "--template", str(outs[s.head]), *s.args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode not in (0, 3, 4):
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p.stdout, p.returncode


def excerpt(s: Scenario, stdout: str) -> list[str]:
    if s.change:
        data = json.loads(stdout) if "json" in s.args else yaml.safe_load(stdout)
        [at] = [i for i, c in enumerate(data["changes"]) if c["logical_id"] == s.change]
        change = data["changes"][at]
        if "json" in s.args:   # the one change, `...` for the others before and after it
            text = json.dumps({**data, "changes": [change]}, indent=2, default=str).splitlines()
            start = text.index('  "changes": [') + 1
            before = ["    ...,"] if at > 0 else []
            body, after = text[start:-2], []
            if at < len(data["changes"]) - 1:
                body, after = [*body[:-1], body[-1] + ","], ["    ..."]
            return [*text[:start], *before, *body, *after, *text[-2:]]
        return ["...", *yaml.safe_dump([change], sort_keys=False).splitlines(), "..."]
    lines = stdout.rstrip("\n").splitlines()
    if not s.lines:
        return lines
    kept: list[str] = []
    for pattern in s.lines:
        [line] = [ln for ln in lines if re.match(pattern, ln)]
        kept += ["...", line]
    return kept


def render(name: str, s: Scenario, work: Path, outs: dict[str, Path]) -> str:
    stdout, code = run(s, work, outs)
    if s.quote:
        return "".join(f"> {ln}".rstrip() + "\n" for ln in stdout.rstrip("\n").splitlines())
    body = [f"$ {s.command}", *excerpt(s, stdout)]
    if s.exit_code:
        body += ["$ echo $?", str(code)]
    return "```console\n" + "\n".join(body) + "\n```\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a block is stale; write nothing")
    check = ap.parse_args().check
    text = DOC.read_text()
    names = [m.group(2) for m in BLOCK.finditer(text)]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"{DOC}: plan-output blocks with no scenario: {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="openpod-plan-docs-") as tmp:
        work = Path(tmp)
        used = [SCENARIOS[n] for n in names]
        outs = synthesize_all(work, {s.head for s in used} | {s.base for s in used})
        blocks = {n: render(n, SCENARIOS[n], work, outs) for n in dict.fromkeys(names)}
    new = BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)] + m.group(4), text)
    if check:
        if new != text:
            sys.stdout.write(new)
            print(f"{DOC.relative_to(ROOT)}: plan outputs are stale; run tools/plan_doc_outputs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    print(f"rewrote {len(blocks)} plan outputs in {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
