"""Replica groups ride out a Lighthouse that is killed and started again under the same address.

What ``openpod submit --fault-tolerance replica`` sets up on EKS when the Lighthouse's pod is lost
(docs/governance.md, "When the Lighthouse is lost"): the trainers carry ``TORCHFT_QUORUM_RETRIES``
(infra.governance.job_fault_tolerance.quorum_retries), and the Lighthouse comes back under the same DNS name. Here: two
replica groups (one launcher and one worker each) and the ``torchft_lighthouse`` binary on loopback; while
both groups are inside step 12 the Lighthouse is SIGKILLed, so step 13's quorum is asked while it is gone; it
is started again on the same port a few seconds later. Both groups keep their processes, train to the end,
and end bit-identical to the uninterrupted 2-worker DDP run (the session ``baseline``).

Second test: a restarted Lighthouse numbers its quorums from 1 again (src/lighthouse.rs:282, :313 at
meta-pytorch/torchft@7eb7087, the 0.2.0 sources). Once a group was lost and healed, the groups are at quorum 2
or later, and the new Lighthouse's quorum 1 would make them re-form their process group under the store prefix
``torchft/1/`` their first quorum used (torchft/manager.py:692-704 of the 0.2.0 wheel), whose keys are stale:
gloo could dial the dead worker's address, steps stopped committing and each group's hang watchdog restarted
its workers (seen in two of three runs, and one CI run that did not recover within 200 s). The runtime gives
the manager quorum ids made of the Lighthouse's id and the members (training.ft.replica.distinct_quorum_id),
so no prefix is used twice and both groups keep their processes.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from infra.governance.job_fault_tolerance import QUORUM_RETRIES_ENV, quorum_retries
from tests.training.conftest import PY, cli_env, free_port, kill_group, spawn, wait_for
from tests.training.test_replica_ft import HOLD, beat, replica_args, results, worker_pid

pytestmark = [pytest.mark.slow]

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


def lighthouse_outage(tmp: Path, lighthouses: list, port: int, log: Path, release: Path, past: int) -> float:
    """SIGKILL the running Lighthouse, release the group held at ``release``, start a new Lighthouse on the same
    port ``OUTAGE_S`` later; seconds from the kill until both groups began a step after ``past``."""
    lighthouses[-1].send_signal(signal.SIGKILL)
    lighthouses[-1].wait()
    killed_at = time.monotonic()
    release.touch()
    time.sleep(OUTAGE_S)
    lighthouses.append(start_lighthouse(port, log))
    wait_for(lambda: all((beat(tmp, r) or {}).get("step", 0) > past for r in (0, 1)), f"both groups past step {past}",
             timeout=120)
    return time.monotonic() - killed_at


def stop(procs: list, lighthouses: list) -> None:
    for p in procs:
        kill_group(p) if p.poll() is None else None
    for p in lighthouses:
        p.kill()
        p.wait()


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
        # step 12 completes; step 13's quorum is asked of the dead Lighthouse
        resumed_after = lighthouse_outage(tmp_path, lighthouses, port, log, go, HOLD + 1)
        outs = results(procs, tmp_path)
    finally:
        stop(procs, lighthouses)

    for r, out in enumerate(outs):
        assert out["fault_tolerance"]["pid"] == pids[r] and out["goodput"]["incarnations"] == 1, out
        assert out["step"] == 20
        assert out["state_sha256"] == baseline["state_sha256"]
    print(f"both groups past step {HOLD + 1} {resumed_after:.1f}s after the Lighthouse was killed "
          f"({OUTAGE_S:.0f}s outage)")


def test_after_a_group_healed_a_lighthouse_restart_reuses_no_store_prefix_and_every_process_is_kept(
        tmp_path, baseline):
    port, log, go, go2 = free_port(), tmp_path / "lighthouse.log", tmp_path / "go", tmp_path / "go2"
    url = f"http://127.0.0.1:{port}"
    lighthouses = [start_lighthouse(port, log)]
    env = {QUORUM_RETRIES_ENV: str(quorum_retries())}
    extra = ["--hang-floor", "20"]  # a stuck step ends in a worker restart, which the pid check below catches
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
        resumed_after = lighthouse_outage(tmp_path, lighthouses, port, log, go2, SECOND_HOLD + 1)
        outs = results(procs, tmp_path)
    finally:
        stop(procs, lighthouses)

    import re

    for r in (0, 1):
        ids = re.findall(r"reconfiguring for quorum_id=(\d+) ", (tmp_path / f"r{r}.err").read_text())
        assert len(ids) >= 3 and len(set(ids)) == len(ids), ids  # a process group never re-forms under an old prefix
    for out in outs:
        assert out["step"] == 20 and out["state_sha256"] == baseline["state_sha256"]
    assert [out["fault_tolerance"]["pid"] for out in outs] == list(pids)  # no worker restarted after the outage
    print(f"both groups past step {SECOND_HOLD + 1} {resumed_after:.1f}s after the Lighthouse was killed")
