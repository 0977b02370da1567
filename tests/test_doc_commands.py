"""Issues 29 and 40: every `openpod` command in README.md, ARCHITECTURE.md and docs/*.md is checked the way a reader
pastes it, so doc drift fails CI; every `python -m training` and `python -m node_agent` command there is parsed.

Each documented command is parsed by the real click command (an option renamed or removed fails). It must paste
safely into bash: no `<placeholder>` (a redirect), variables (`"$IMAGE"`) defined by a `NAME=value` line before
it in the same page, and `--spec` wherever the command reads a spec (nothing here relies on a ./openpod.yaml). The
ones that need no AWS account, cluster or synthesis are run in a temporary directory: `validate`, `queues`,
`manifests`, `facts`, `rules`, `dashboards`, `docs`, `schema`, `pair-check render`, and `submit` with `--dry-run`
added. A spec path that is not in the repository (clusters/prod.yaml) stands for examples/default.yaml; a variable
set by a command substitution (`$(aws ...)`) stands for a sample value. Where a console block shows the command's
output, the run must print it (`...` stands for any lines). `openpod plan` outputs (docs/gitops.md) come from
`tools/plan_doc_outputs.py`, which synthesizes.
"""

from __future__ import annotations

import re
import shlex
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
RUN = {"validate", "queues", "manifests", "facts", "rules", "dashboards", "pair-check render", "submit", "docs",
       "schema"}
FENCE = re.compile(r"^```(bash|console|sh|shell)\n(.*?)^```", re.S | re.M)
ASSIGN = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")
VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
SUBSTITUTED = "sample-value"   # what a `NAME=$(command)` line stands for here


def _value(text: str) -> str:
    """The value of a `NAME=value  # comment` line as bash would assign it."""
    if text.startswith("$("):
        return SUBSTITUTED
    words = shlex.split(text, comments=True)
    return words[0] if words else ""


def _expand(cmd: str, env: dict[str, str]) -> tuple[str, list[str]]:
    """``cmd`` with $NAME / ${NAME} replaced from ``env``, and the names not defined."""
    missing = []

    def sub(m):
        name = m.group(1) or m.group(2)
        if name not in env:
            missing.append(name)
            return "undefined"
        return env[name]

    return VAR.sub(sub, cmd), missing


def _shell_words(cmd: str) -> tuple[list[str], list[str]]:
    """The words of the first command of a pipeline, and the shell operators other than `|` found in it."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    words, operators = [], []
    for token in lex:
        if token == "|":
            break
        if token and all(c in "();<>|&" for c in token):
            operators.append(token)
        else:
            words.append(token)
    return words, operators


def documented() -> list[tuple[str, str, list[str], list[str] | None, list[str]]]:
    """(where, command line, argv after `openpod`, the output lines shown or None, problems pasting it)."""
    out = []
    for path in DOCS:
        text = path.read_text()
        env: dict[str, str] = {}
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
                assign = ASSIGN.match(cmd)
                if assign:
                    env[assign.group(1)] = _value(assign.group(2))
                    continue
                for prefix in (*CLIS, "python -m infra "):
                    if cmd.startswith(prefix):
                        break
                else:
                    continue
                tool = "openpod" if prefix in ("openpod ", "python -m infra ") else prefix.strip()
                shown = None
                if console:
                    end = next((j for j in range(i, len(lines)) if lines[j].startswith("$")), len(lines))
                    shown = [ln.rstrip() for ln in lines[i:end]] or None
                expanded, missing = _expand(cmd[len(prefix):], env)
                argv, operators = _shell_words(expanded)
                problems = [f"${name} is not defined before this line (add a `{name}=...` line)" for name in missing]
                problems += [f"`{op}` is a shell operator here: a <placeholder> is a redirect when pasted; use a "
                             "variable (\"$IMAGE\") defined on a line before" for op in operators]
                out.append((f"{path.relative_to(ROOT)}:{first_line + start}", cmd, [tool, *argv], shown, problems))
    return out


def shows(shown: list[str], printed: list[str]) -> bool:
    """Whether ``printed`` is what ``shown`` shows, a `...` line standing for any lines (none included)."""
    if not shown:
        return not printed
    if shown[0] == "...":
        return any(shows(shown[1:], printed[k:]) for k in range(len(printed) + 1))
    return bool(printed) and printed[0] == shown[0] and shows(shown[1:], printed[1:])


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
    assert {"validate", "submit", "manifests", "queues", "run", "diagnose", "pair-check render"} <= \
        {_leaf(c[2])[0] for c in COMMANDS}


def test_pasting_is_checked():
    """The checks above catch what failed when pasted (issue 40)."""
    assert _shell_words("openpod submit --image <training image> -- t.py")[1] == ["<", ">"]
    assert _shell_words('openpod x --image "$IMAGE" | kubectl apply -f -') == (["openpod", "x", "--image", "$IMAGE"], [])
    assert _expand('--image "$IMAGE" ${B}', {"IMAGE": "i"}) == ('--image "i" undefined', ["B"])
    assert shows(["a", "...", "c"], ["a", "b", "b", "c"]) and not shows(["a", "c"], ["a", "b", "c"])
    assert shows(["a", "..."], ["a"]) and not shows(["a"], ["a", "b"])


@pytest.mark.parametrize("where, cmd, argv, shown, problems", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_documented_command(where, cmd, argv, shown, problems, tmp_path, monkeypatch):
    assert not problems, f"{where}: `{cmd}`: {'; '.join(problems)}"
    name, command, rest = _leaf(argv)
    if "..." in rest:   # an elided command ("openpod plan ... --json"): the options it names must exist
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        unknown = [a for a in rest if a.startswith("-") and a not in known]
        assert not unknown, f"{where}: `{cmd}`: no such option {unknown}"
        return
    monkeypatch.chdir(tmp_path)
    for word in rest:   # an input file a line before made (pair.log from `kubectl logs ... > pair.log`)
        if re.fullmatch(r"[\w.-]+\.(log|txt|json)", word):
            (tmp_path / word).touch()
    try:
        command.make_context(name, _localize(rest, tmp_path), resilient_parsing=False)
    except click.ClickException as e:
        pytest.fail(f"{where}: `{cmd}`: {e.format_message()}")
    if argv[0] == "openpod" and any("--spec" in p.opts for p in command.params):
        assert "--spec" in rest, f"{where}: `{cmd}` reads a spec: give --spec (pasted elsewhere it stops)"
    if argv[0] != "openpod" or name not in RUN or (name == "queues" and "--live" in rest):
        return
    args = _localize(argv[1:], tmp_path)
    if name == "submit" and "--dry-run" not in args:
        args.insert(args.index("--") if "--" in args else len(args), "--dry-run")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, f"{where}: `{cmd}` exited {r.exit_code}:\n{r.output[-2000:]}"
    if shown is not None:
        printed = [ln.rstrip() for ln in r.output.replace(str(tmp_path / "out") + "/", "").splitlines()]
        assert shows(shown, printed), f"{where}: `{cmd}` shows {shown}, prints {printed[:20]}"
