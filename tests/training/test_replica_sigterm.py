"""SIGTERM under --fault-tolerance replica (a pod evicted for a drain or node upgrade; Kueue preemption).

Two replica groups and torchft's Lighthouse, as in test_replica_ft.py. Only replica 0's launcher gets
SIGTERM (the kubelet evicts one pod), while its worker holds before step 12. Its stop flag rides in
step 12's gradient all-reduce across the groups, so both groups stop after step 12, write step 13 to
their own durable tier (FSx, off the every-5 cadence) and exit 143 ("stopped, not finished"). A rerun of
both groups resumes at step 13 from FSx and ends bit-identical to the uninterrupted 2-worker DDP run.
"""

import os
import shutil
import signal
import time

import pytest

from tests.training.conftest import cli_env, kill_group, last_json, spawn
from tests.training.test_replica_ft import beat, lighthouse, replica_args, wait_for

pytestmark = [pytest.mark.slow]

HOLD = 12


def test_sigterm_to_one_group_stops_every_group_after_the_same_step_durably_and_a_rerun_resumes_exactly(
        tmp_path, baseline):
    go = tmp_path / "go"
    extra = ["--stop-timeout", "60"]
    with lighthouse(2, tmp_path / "lighthouse.log") as url:
        procs = [spawn(replica_args(tmp_path, 0, url, extra), log=tmp_path / "r0.err",
                       env=cli_env(OPENPOD_HOOK_WAIT=f"{HOLD}@1@{go}")),
                 spawn(replica_args(tmp_path, 1, url, extra), log=tmp_path / "r1.err", env=cli_env())]
        try:
            wait_for(lambda: (beat(tmp_path, 0) or {}).get("step") == HOLD, f"replica 0 at step {HOLD}")
            os.kill(procs[0].pid, signal.SIGTERM)  # PID 1 of one pod only, as the kubelet does
            time.sleep(1.0)                          # forwarded to its worker while it is held
            go.touch()
            outs = []
            for i, p in enumerate(procs):
                out, _ = p.communicate(timeout=120)
                log = (tmp_path / f"r{i}.err").read_text()
                assert p.returncode == 143, f"replica {i} exit {p.returncode}\n{log[-3000:]}"
                outs.append(last_json(out))
        finally:
            for p in procs:
                kill_group(p) if p.poll() is None else None

    for i, r in enumerate(outs):
        assert r["preempted"] == {"step": HOLD + 1, "durable": "fsx"}, (i, r)
        assert (tmp_path / "ck" / f"replica-{i}" / f"step_{HOLD + 1:09d}").is_dir()
    assert outs[0]["state_sha256"] == outs[1]["state_sha256"]

    # The nodes are gone with their memory tiers: the rerun must find step 13 in each group's FSx directory.
    shutil.rmtree(tmp_path / "shm")
    with lighthouse(2, tmp_path / "lighthouse2.log") as url:
        procs = [spawn(replica_args(tmp_path, i, url, extra), log=tmp_path / f"again{i}.err", env=cli_env())
                 for i in (0, 1)]
        try:
            again = []
            for i, p in enumerate(procs):
                out, _ = p.communicate(timeout=180)
                assert p.returncode == 0, (tmp_path / f"again{i}.err").read_text()[-3000:]
                again.append(last_json(out))
        finally:
            for p in procs:
                kill_group(p) if p.poll() is None else None
    for r in again:
        assert r["restored_step"] == HOLD + 1 and r["restored_from"].startswith("fsx"), r
        assert r["step"] == 20 and r["preempted"] is None
        assert r["state_sha256"] == baseline["state_sha256"]
