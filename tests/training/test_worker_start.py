"""training/worker_start.py: which way a rank's worker starts (OPENPOD_WORKER_START), and a worker forked by the
``--restart in-process`` launcher set up as an exec'd one would be. The runs themselves: every in-process test
forks its workers on CI's CPU torch; test_inprocess_generations' SIGTERM-between-generations test execs them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.training.conftest import PY, ROOT, cli_env
from training import worker_start


@pytest.mark.parametrize("requested,cuda,start", [("auto", False, "fork"), ("auto", True, "exec"),
                                                  ("fork", False, "fork"), ("exec", False, "exec"),
                                                  ("exec", True, "exec")])
def test_the_start_method_follows_the_torch_build(requested, cuda, start):
    assert worker_start.start_method(requested, cuda) == start


def test_fork_on_a_cuda_build_and_unknown_values_are_refused_naming_the_variable():
    with pytest.raises(ValueError, match="OPENPOD_WORKER_START=fork: this torch is a CUDA build"):
        worker_start.start_method("fork", True)
    with pytest.raises(ValueError, match=r"OPENPOD_WORKER_START='spawn': one of auto, fork, exec"):
        worker_start.start_method("spawn", False)


def test_every_preloaded_module_imports_without_touching_cuda():
    """The agent and the in-process launcher import these before they fork: a wrong name would stop every job at
    start, and a module that initialized CUDA at import would leave the forked workers without it."""
    code = ("import json, torch; from training import worker_start; worker_start.preload(); "
            "print(json.dumps(torch.cuda.is_initialized()))")
    r = subprocess.run([PY, "-c", code], cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) is False


FORKED = """
import json, os, signal, socket, sys, time
import training.worker
from training.worker_start import ForkedWorker

out = sys.argv[1]
listener = socket.create_server(("127.0.0.1", 0))  # as the store the launcher hosts
signal.signal(signal.SIGTERM, lambda *a: None)      # the launcher's forwarding handler
signal.signal(signal.SIGINT, lambda *a: None)
signal.signal(signal.SIGUSR2, lambda *a: None)
signal.signal(signal.SIGHUP, signal.SIG_IGN)        # ignored: exec keeps it ignored

def report(argv):
    try:
        os.fstat(listener.fileno())
        holds = True
    except OSError:
        holds = False
    with open(f"{out}-{argv[-1]}", "w") as f:
        json.dump({"argv": sys.argv, "got": argv, "start": os.environ["OPENPOD_WORKER_START"],
                   "env": os.environ.get("X"), "inherited": os.environ.get("ONLY_PARENT"),
                   "holds_listener": holds, "same_group": os.getpgid(0) == PARENT_GROUP,
                   "dispositions": {signal.Signals(s).name: str(signal.getsignal(s))
                                    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2, signal.SIGHUP)}}, f)
    print("to stdout")
    if argv[-1] == "crash":
        raise RuntimeError("boom")
    if argv[-1] == "hang":
        time.sleep(600)
    return 7

PARENT_GROUP = os.getpgid(0)
os.environ["ONLY_PARENT"] = "1"
training.worker.run = report
cmd = [sys.executable, "-m", "training.worker", "--config", "c.json"]
w = ForkedWorker(cmd, {"X": "y", "PATH": os.environ["PATH"]})
print(json.dumps({"rc": w.wait(timeout=60)}))
crash = ForkedWorker([*cmd, "crash"], {})
hang = ForkedWorker([*cmd, "hang"], {})
time.sleep(0.2)
running = hang.poll()
hang.kill()
print(json.dumps({"crash": crash.wait(timeout=60), "running": running, "killed": hang.wait(timeout=60)}))
"""


def test_a_worker_forked_by_the_launcher_is_set_up_as_an_execd_one_would_be(tmp_path):
    """The launcher's ``subprocess.Popen(cmd, env=e, stdout=sys.stderr)`` as a fork: the worker's own arguments and
    only its environment, OPENPOD_WORKER_START=fork, stdout on stderr, the launcher's process group (the launcher's
    own are not new sessions), a fresh interpreter's signal dispositions (caught ones back to default, ignored ones
    kept), none of the launcher's sockets (the 2-node in-process test broke without that: the worker's transport
    abort shut down the launcher's connection to its own store); Popen's exit statuses (-9 when killed, 1 and a
    traceback on an exception)."""
    r = subprocess.run([PY, "-c", FORKED, str(tmp_path / "out.json")], cwd=ROOT, env=cli_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    first, second = (json.loads(line) for line in r.stdout.strip().splitlines())
    assert first == {"rc": 7}
    assert second == {"crash": 1, "running": None, "killed": -9}
    assert "to stdout" in r.stderr and "RuntimeError: boom" in r.stderr
    seen = json.loads((tmp_path / "out.json-c.json").read_text())
    assert seen["argv"] == ["training.worker", "--config", "c.json"]
    assert seen["got"] == ["--config", "c.json"]
    assert seen["start"] == "fork" and seen["env"] == "y" and seen["inherited"] is None
    assert not seen["holds_listener"] and seen["same_group"]
    assert seen["dispositions"] == {"SIGTERM": str(signal.SIG_DFL), "SIGINT": str(signal.default_int_handler),
                                    "SIGUSR2": str(signal.SIG_DFL), "SIGHUP": str(signal.SIG_IGN)}
