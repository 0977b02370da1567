"""Issue 29: every `openpod` command in README.md, ARCHITECTURE.md and docs/*.md is run against the example specs,
so doc drift fails CI; every `python -m training` and `python -m node_agent` command there is parsed.

Each documented command is parsed by the real click command (an option renamed or removed fails); the ones that
need no AWS account or cluster are run: `validate`, `queues`, `manifests`, `facts`, `rules`, `dashboards`,
`pair-check render`, and `submit` with `--dry-run` added (the README's submit example failed on the example spec).
A spec path that is not in the repository (clusters/prod.yaml) stands for examples/default.yaml; a command without
--spec runs where ./openpod.yaml is the example, as documented. Where a console block shows the command's first
output line, the run must print it.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from infra.cli.main import main
from tests.conftest import EXAMPLES, ROOT

DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
def _training():
    from training.cli import main as cli

    return cli


def _node_agent():
    from node_agent.__main__ import main as cli

    return cli


# the click command behind each documented command line; only `openpod` commands are run, the others parsed
CLIS = {"openpod ": lambda: main, "python -m training ": _training, "python -m node_agent ": _node_agent}
RUN = {"validate", "queues", "manifests", "facts", "rules", "dashboards", "pair-check render", "submit"}
FENCE = re.compile(r"^```(bash|console|sh|shell)\n(.*?)^```", re.S | re.M)


def documented() -> list[tuple[str, str, list[str], str | None]]:
    """(where, command line, argv after `openpod`, the first output line shown or None)."""
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in FENCE.finditer(text):
            first_line = text[: m.start()].count("\n") + 2
            lines = m.group(2).splitlines()
            i = 0
            while i < len(lines):
                start = i
                line = lines[i]
                while line.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line.rstrip()[:-1] + " " + lines[i].strip()
                i += 1
                cmd = line.strip()
                console = cmd.startswith("$ ")
                cmd = cmd[2:] if console else cmd
                for prefix in (*CLIS, "python -m infra "):
                    if cmd.startswith(prefix):
                        break
                else:
                    continue
                tool = "openpod" if prefix in ("openpod ", "python -m infra ") else prefix.strip()
                shown = lines[i].strip() if console and i < len(lines) else None
                if shown is not None and (shown.startswith("$") or shown.startswith("...") or not shown):
                    shown = None
                argv = shlex.split(re.sub(r"<[^>]*>", "placeholder", cmd[len(prefix):]), comments=True)
                out.append((f"{path.relative_to(ROOT)}:{first_line + start}", cmd, [tool, *argv], shown))
    return out


COMMANDS = documented()


def _leaf(argv: list[str]) -> tuple[str, click.Command, list[str]]:
    """The documented sub-command, its click command and its own arguments (argv[0]: which CLI)."""
    names, cmd, rest = [], CLIS[argv[0] + " "](), list(argv[1:])
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        names.append(rest[0])
        cmd = cmd.commands.get(rest[0])
        assert cmd is not None, f"no command {' '.join(names)}"
        rest = rest[1:]
    return " ".join(names), cmd, rest


def _localize(argv: list[str], tmp: Path) -> list[str]:
    out = []
    for i, a in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if prev == "--spec" and not (ROOT / a).exists():
            a = str(EXAMPLES / "default.yaml")
        elif prev == "--out":
            a = str(tmp / "out" / a.strip("/"))
        elif a.startswith("examples/"):
            a = str(ROOT / a)
        out.append(a)
    return out


def test_the_docs_hold_commands():
    assert len(COMMANDS) >= 30, len(COMMANDS)
    assert {"validate", "submit", "manifests", "queues", "run", "diagnose"} <= {_leaf(a)[0] for _, _, a, _ in COMMANDS}


@pytest.mark.parametrize("where, cmd, argv, shown", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_documented_command(where, cmd, argv, shown, tmp_path, monkeypatch):
    name, command, rest = _leaf(argv)
    if "..." in rest:   # an elided command ("openpod plan ... --json"): the options it names must exist
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        unknown = [a for a in rest if a.startswith("-") and a not in known]
        assert not unknown, f"{where}: `{cmd}`: no such option {unknown}"
        return
    try:
        command.make_context(name, _localize(rest, tmp_path), resilient_parsing=False)
    except click.ClickException as e:
        pytest.fail(f"{where}: `{cmd}`: {e.format_message()}")
    if argv[0] != "openpod" or name not in RUN or (name == "queues" and "--live" in rest):
        return
    monkeypatch.chdir(tmp_path)
    shutil.copy(EXAMPLES / "default.yaml", tmp_path / "openpod.yaml")
    args = _localize(argv[1:], tmp_path)
    if name == "submit" and "--dry-run" not in args:
        args.insert(args.index("--") if "--" in args else len(args), "--dry-run")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, f"{where}: `{cmd}` exited {r.exit_code}:\n{r.output[-2000:]}"
    if shown is not None:
        printed = r.stdout.replace(str(tmp_path / "out") + "/", "")
        assert shown.split()[:3] == printed.split()[:3] or shown in printed, \
            f"{where}: `{cmd}` shows {shown!r}, prints {printed.splitlines()[:1]}"
