"""SIGTERM (a pod eviction: node upgrade, drain, Kueue preemption) makes the job checkpoint first.

The kubelet sends SIGTERM to the container's PID 1 - the launcher - only. The launcher
forwards it to torchrun, which forwards it to the workers; the workers agree on the
step to stop at (inside the step's own gradient all-reduce), write that step to the
durable tier whatever the cadence, and the launcher exits 143 with the result. A rerun
resumes from exactly that step and ends bit-identical to an uninterrupted run.
"""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.training.conftest import cli_env, failure_text, kill_group, last_json, run_cli, spawn, train_args, wait_for
from training.ft.heartbeat import read_beats

pytestmark = [pytest.mark.slow]

HOLD_AT = 12  # rank 0 holds before this step until the test lets it go


def _beats(tmp: Path) -> dict[int, int]:
    """rank -> the step its heartbeat last reported (every node's heartbeat directory)."""
    ft = tmp / "shm" / ".beats"  # the heartbeats are node-local
    return {b.rank: b.step for d in (ft.iterdir() if ft.is_dir() else ()) for b in read_beats(d)}


def test_sigterm_to_the_launcher_checkpoints_the_current_step_durably_and_a_rerun_resumes_exactly(
        tmp_path, baseline):
    go = tmp_path / "go"
    args = train_args(tmp_path, extra=["--stop-timeout", "60", "--fsx-every", "3"])  # step 13 is off every cadence
    env = cli_env(OPENPOD_HOOK_WAIT=f"{HOLD_AT}@2@{go}")
    p = spawn(args, env=env, log=tmp_path / "first.log")
    try:
        wait_for(lambda: _beats(tmp_path).get(0) == HOLD_AT, f"rank 0 to reach step {HOLD_AT}")
        os.kill(p.pid, signal.SIGTERM)          # what the kubelet does on eviction: PID 1 only
        time.sleep(1.0)                          # the signal reaches every worker while rank 0 is held
        go.write_text("")
        out, _ = p.communicate(timeout=120)
    finally:
        kill_group(p) if p.poll() is None else None
    log = (tmp_path / "first.log").read_text()
    assert p.returncode == 143, f"exit {p.returncode}\n{log[-3000:]}"
    result = json.loads(out.strip().splitlines()[-1])
    # Agreed inside step 12's all-reduce: step 12 completes, and its result (step 13's start) is saved.
    assert result["preempted"] == {"step": HOLD_AT + 1, "durable": "fsx"}, result
    assert result["step"] == HOLD_AT + 1
    assert (tmp_path / "ck" / "step_000000013").is_dir(), sorted(os.listdir(tmp_path / "ck"))  # off-cadence (every 5)
    assert "stopped by SIGTERM at step 13" in log and "rerun" in log
    # the workers exit once stopped: torchrun never has to kill them at the end of --stop-timeout (a forked worker
    # stopped by SIGTERM used to wait for the shutting-down agent to read its return value, and was killed 60 s on)
    assert "forcefully exiting" not in log, log[-3000:]

    # The node is gone: its memory tier goes with it. The rerun must find step 13 in FSx.
    import shutil

    shutil.rmtree(tmp_path / "shm")
    r = run_cli(args)
    assert r.returncode == 0, failure_text(r)
    again = last_json(r.stdout)
    assert again["restored_step"] == HOLD_AT + 1 and again["restored_from"].startswith("fsx")
    assert again["state_sha256"] == baseline["state_sha256"]


def test_a_run_without_sigterm_reports_no_preemption(baseline_run):
    """The shared baseline run: nobody signalled it."""
    out = baseline_run.result
    assert out["preempted"] is None and out["step"] == 20
    assert "SIGTERM" not in baseline_run.stderr
