"""training/agent.py: torchrun forking each rank from an agent that has imported torch (CPU builds), or exec'ing it
(which start: tests/training/test_worker_start.py).

The runs themselves are compared elsewhere: the shared reference runs (tests/training/conftest.py) exec their
workers and every resume test forks its own, so each exact-resume assertion also says that both starts train bit
for bit alike (test_resume checks which start each side used).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.training.conftest import PY, ROOT, cli_env
from training import agent, cli


def test_the_launcher_refuses_an_unknown_worker_start_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENPOD_WORKER_START", "spawn")
    r = CliRunner().invoke(cli.main, ["run", "--steps", "1", "--checkpoint-dir", str(tmp_path / "ck")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == cli.EXIT_USAGE and len(lines) == 1, r.output
    assert lines[0].startswith("error: OPENPOD_WORKER_START='spawn': one of auto, fork, exec")
    assert not (tmp_path / "ck").exists()


FORKED_RANK = """
import json, os, signal, sys
from training import agent
import training.worker

TORCHRUNS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)  # torchrun's --signals-to-handle
FRESH = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler, signal.SIGHUP: signal.SIG_DFL,
         signal.SIGQUIT: signal.SIG_DFL}

def torchruns_handler(signum, frame):  # what torchrun's agent installs for the signals it handles
    raise RuntimeError(f"signal {signum}")

for s in TORCHRUNS:
    signal.signal(s, torchruns_handler)
out = sys.argv[1]

def report(argv):
    with open(out, "w") as f:
        json.dump({"session_leader": os.getsid(0) == os.getpid(), "argv": sys.argv, "got": argv,
                   "start": os.environ["OPENPOD_WORKER_START"],
                   "fresh": {signal.Signals(s).name: signal.getsignal(s) == d
                             for s, d in FRESH.items()}}, f)
    return 7

training.worker.main = report
pid = os.fork()
if pid == 0:
    try:
        agent.run_rank("--config", "c.json", "--result-dir", "r")
    except SystemExit as e:
        os._exit(e.code)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_rank_is_set_up_as_an_execd_worker_would_be(tmp_path):
    """Its own session (torchrun starts exec'd workers with start_new_session), a fresh interpreter's signal
    dispositions instead of the agent's torchrun handlers, the worker's own arguments; its exit status is the
    worker's return value."""
    r = subprocess.run([PY, "-c", FORKED_RANK, str(tmp_path / "out.json")], cwd=ROOT, env=cli_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "7"
    seen = json.loads((tmp_path / "out.json").read_text())
    assert seen["session_leader"] and seen["start"] == "fork"
    assert seen["fresh"] == {"SIGTERM": True, "SIGINT": True, "SIGHUP": True, "SIGQUIT": True}
    assert seen["argv"] == ["training.worker", "--config", "c.json", "--result-dir", "r"]
    assert seen["got"] == ["--config", "c.json", "--result-dir", "r"]


def test_the_agent_is_torchrun_for_anything_but_the_worker_module():
    """`python -m training.agent` with another script is torchrun itself (its usage, its checks)."""
    r = subprocess.run([sys.executable, "-m", "training.agent", "--help"], cwd=ROOT, env=cli_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--nproc-per-node" in r.stdout, r.stderr[-2000:]
