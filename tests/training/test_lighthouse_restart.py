"""Replica groups ride out a Lighthouse that is killed and started again under the same address.

What ``openpod submit --fault-tolerance replica`` sets up on EKS when the Lighthouse's pod is lost
(docs/governance.md, "When the Lighthouse is lost"): the trainers carry ``TORCHFT_QUORUM_RETRIES``
(infra.governance.jobset.quorum_retries), and the Lighthouse comes back under the same DNS name. Here: two
replica groups (one launcher and one worker each) and the ``torchft_lighthouse`` binary on loopback; while
both groups are inside step 12 the Lighthouse is SIGKILLed, so step 13's quorum is asked while it is gone; it
is started again on the same port a few seconds later. Both groups keep their processes, train to the end,
and end bit-identical to the uninterrupted 2-worker DDP run (the session ``baseline``).

The limit (second test): a new Lighthouse numbers its quorums from 1 again. Once a group was lost and healed,
the groups are at quorum 2 or later; the new Lighthouse's quorum 1 makes them re-form their process group
under the store prefix ``torchft/1/`` their first quorum used (torchft/manager.py:692-704 of the 0.2.0
wheel). Its keys are stale: when gloo reads one before the peer rewrote it, it dials the dead worker's address,
steps stop committing and each group's hang watchdog restarts its workers, which restore from node memory
(a race: seen in two of three runs). Either way the run ends bit-identical.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from infra.governance.jobset import QUORUM_RETRIES_ENV, quorum_retries
from tests.training.conftest import PY, cli_env, free_port, kill_group, spawn, wait_for
from tests.training.test_replica_ft import HOLD, beat, replica_args, results, worker_pid

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("training-cli")]

LIGHTHOUSE = Path(PY).parent / "torchft_lighthouse"
OUTAGE_S = 3.0


SECOND_HOLD = 16


def start_lighthouse(port: int, log: Path) -> subprocess.Popen:
    import socket

    p = subprocess.Popen([str(LIGHTHOUSE), "--bind", f"[::]:{port}", "--min_replicas", "2",
                          "--heartbeat_timeout_ms", "2000"], stdout=open(log, "a"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            if time.monotonic() > deadline or p.poll() is not None:
                raise AssertionError(f"lighthouse did not start: {log.read_text()}")
            time.sleep(0.05)


def test_both_groups_keep_their_processes_across_a_lighthouse_restart_and_end_bit_identical(tmp_path, baseline):
    port, log, go = free_port(), tmp_path / "lighthouse.log", tmp_path / "go"
    url = f"http://127.0.0.1:{port}"
    lighthouses = [start_lighthouse(port, log)]
    env = {QUORUM_RETRIES_ENV: str(quorum_retries())}  # what submit puts on every trainer
    procs = [spawn(replica_args(tmp_path, 0, url), env=cli_env(**env), log=tmp_path / "r0.err"),
             spawn(replica_args(tmp_path, 1, url), env=cli_env(OPENPOD_HOOK_WAIT=f"{HOLD}@1@{go}", **env),
                   log=tmp_path / "r1.err")]
    try:
        wait_for(lambda: (beat(tmp_path, 1) or {}).get("step") == HOLD, f"replica 1 at step {HOLD}", timeout=120)
        time.sleep(0.5)  # step 12's quorum is done; replica 0 waits in its all-reduce
        pids = worker_pid(tmp_path, 0), worker_pid(tmp_path, 1)
        lighthouses[0].send_signal(signal.SIGKILL)
        lighthouses[0].wait()
        killed_at = time.monotonic()
        go.touch()  # step 12 completes; step 13's quorum is asked of the dead Lighthouse
        time.sleep(OUTAGE_S)
        lighthouses.append(start_lighthouse(port, log))
        wait_for(lambda: all((beat(tmp_path, r) or {}).get("step", 0) > HOLD + 1 for r in (0, 1)),
                 "both groups past step 13", timeout=120)
        resumed_after = time.monotonic() - killed_at
        outs = results(procs, tmp_path)
    finally:
        for p in procs:
            kill_group(p) if p.poll() is None else None
        for p in lighthouses:
            p.kill()
            p.wait()

    for r, out in enumerate(outs):
        assert out["fault_tolerance"]["pid"] == pids[r] and out["goodput"]["incarnations"] == 1, out
        assert out["step"] == 20
        assert out["state_sha256"] == baseline["state_sha256"]
    print(f"both groups past step {HOLD + 1} {resumed_after:.1f}s after the Lighthouse was killed "
          f"({OUTAGE_S:.0f}s outage)")


def test_after_a_group_healed_a_lighthouse_restart_costs_a_worker_restart_but_the_run_ends_bit_identical(
        tmp_path, baseline):
    port, log, go, go2 = free_port(), tmp_path / "lighthouse.log", tmp_path / "go", tmp_path / "go2"
    url = f"http://127.0.0.1:{port}"
    lighthouses = [start_lighthouse(port, log)]
    env = {QUORUM_RETRIES_ENV: str(quorum_retries())}
    extra = ["--hang-floor", "20"]  # the watchdog that ends the stuck steps (300 s by default)
    procs = [spawn(replica_args(tmp_path, 0, url, extra), env=cli_env(**env), log=tmp_path / "r0.err"),
             spawn(replica_args(tmp_path, 1, url, extra),
                   env=cli_env(OPENPOD_HOOK_WAIT=f"{HOLD}@1@{go},{SECOND_HOLD}@1@{go2}", **env),
                   log=tmp_path / "r1.err")]
    try:
        wait_for(lambda: (beat(tmp_path, 1) or {}).get("step") == HOLD, f"replica 1 at step {HOLD}", timeout=120)
        time.sleep(0.5)
        os.kill(worker_pid(tmp_path, 1), signal.SIGKILL)  # group 1 lost: it heals, the quorum id moves on
        go.touch()
        wait_for(lambda: (beat(tmp_path, 1) or {}).get("step", 0) == SECOND_HOLD, f"replica 1 at step {SECOND_HOLD}",
                 timeout=180)
        time.sleep(0.5)
        pids = worker_pid(tmp_path, 0), worker_pid(tmp_path, 1)
        lighthouses[0].send_signal(signal.SIGKILL)
        lighthouses[0].wait()
        killed_at = time.monotonic()
        go2.touch()
        time.sleep(OUTAGE_S)
        lighthouses.append(start_lighthouse(port, log))
        wait_for(lambda: all((beat(tmp_path, r) or {}).get("step", 0) > SECOND_HOLD + 1 for r in (0, 1)),
                 f"both groups past step {SECOND_HOLD + 1}", timeout=200)
        resumed_after = time.monotonic() - killed_at
        outs = results(procs, tmp_path)
    finally:
        for p in procs:
            kill_group(p) if p.poll() is None else None
        for p in lighthouses:
            p.kill()
            p.wait()

    log0 = (tmp_path / "r0.err").read_text()
    assert log0.count("reconfiguring for quorum_id=1 ") >= 2  # the first quorum's id, used again
    # Whether the re-formed process group read a stale key (then the watchdog restarted the workers) is a race
    for out in outs:
        assert out["step"] == 20 and out["state_sha256"] == baseline["state_sha256"]
    kept = [out["fault_tolerance"]["pid"] == pids[r] for r, out in enumerate(outs)]
    print(f"both groups past step {SECOND_HOLD + 1} {resumed_after:.1f}s after the Lighthouse was killed "
          f"(--hang-floor 20); processes kept: {kept}")
