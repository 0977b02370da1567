"""Multi-node in-process restart: what one node's launcher must know about the others.

Two launchers on 127.0.0.1 act as two nodes of one rank each (``--nnodes 2 --node-rank i``; node 0's
launcher hosts the job's store). Each launcher publishes its node's rank heartbeats to that store, so
every launcher's hang watchdog judges the whole job: a rank of node 1 that stops advancing is the
culprit on every node, node 1's launcher alone replaces it, and node 0's rank - waiting for it in the
step's all-reduce - keeps its process.
"""

import os
import shutil

import pytest

from tests.training.conftest import beat_steps, cli_env, kill_group, last_json, spawn, train_args, wait_for

pytestmark = [pytest.mark.slow]

HANG_FLOOR_S = 8.0  # as test_hang.py: a restored step on a loaded 2-core machine must not trip it again


def two_nodes(tmp_path, env: dict, *, max_restarts: int = 1, extra=(), only: str = "ab", port: int | None = None):
    """Launchers for nodes ``only`` of two (``a``: node 0, hosting the store at ``port``); each has ``.port``."""
    from tests.conftest import free_port

    port = port or free_port()
    procs = {}
    for i, node in enumerate("ab"):
        if node not in only:
            continue
        args = train_args(tmp_path, nproc=1, extra=["--restart", "in-process", "--max-restarts", str(max_restarts),
                                                    "--nnodes", "2", "--node-rank", str(i), "--node-id", node,
                                                    "--rdzv-endpoint", f"127.0.0.1:{port}", *extra])
        procs[node] = spawn(args, env=cli_env(**env), log=tmp_path / f"{node}.log")
        procs[node].port = port
    return procs


def test_a_hung_rank_on_node_1_is_the_culprit_on_both_nodes_and_node_0_keeps_its_process(tmp_path, baseline):
    """Rank 1 (node 1) stops advancing before step 12; rank 0 (node 0) waits in step 12's all-reduce. Node 0's
    own heartbeat files show only a rank that began step 12 and went quiet: judged from them alone, node 0's
    watchdog killed its own waiting rank (the old code). Judged from the job's store, rank 1 is the culprit
    on both nodes; node 1's launcher replaces it; rank 0 re-forms in its process; the result is exact."""
    ft = tmp_path / "ck" / "run" / "ft"
    procs = two_nodes(tmp_path, {"OPENPOD_HANG_AT": f"12@1@{tmp_path / 'hung-once'}"},
                      extra=["--hang-floor", str(HANG_FLOOR_S), "--hang-multiple", "5", "--node-timeout", "6"])
    try:
        wait_for(lambda: (ft / "a" / "pid-0").exists(), "rank 0's pid file")
        survivor = int((ft / "a" / "pid-0").read_text())
        outs = {n: p.communicate(timeout=120)[0] for n, p in procs.items()}
    finally:
        for p in procs.values():
            kill_group(p)
    logs = {n: (tmp_path / f"{n}.log").read_text() for n in procs}
    assert [procs[n].returncode for n in "ab"] == [0, 0], logs["a"][-3000:] + logs["b"][-3000:]
    (line_b,) = [ln for ln in logs["b"].splitlines() if ln.startswith("watchdog: ")]
    assert "rank(s) 1 fell behind" in line_b and "replacing them alone" in line_b, line_b
    fired_after = float(line_b.split("no rank advanced for ")[1].split("s")[0])
    assert HANG_FLOOR_S <= fired_after <= HANG_FLOOR_S + 3.0, line_b    # within its bound (+ 1 s polling)
    node_a = [ln for ln in logs["a"].splitlines() if ln.startswith("watchdog: ")]
    assert all("rank(s) 1 on node(s) 1 fell behind: keeping this node's workers" in ln for ln in node_a), node_a
    assert "hang_forever" in (ft / "b" / "stacks-rank-1.txt").read_text()  # the hung rank, caught in the act
    r0, r1 = last_json(outs["a"]), last_json(outs["b"])
    assert r0["pid"] == survivor                                         # node 0's rank: the same process
    assert r0["restart"] == {"mode": "in-process", "restarts": 1, "generation": 1}
    assert r0["restored_step"] == 10 and r0["step"] == 20
    assert r0["state_sha256"] == r1["state_sha256"] == baseline["state_sha256"]


def test_the_restart_budget_is_the_jobs_not_each_nodes(tmp_path):
    """--max-restarts 1 on two nodes: rank 1 (node 1) is killed in step 12 and replaced (the job's one restart);
    then rank 0 (node 0) is killed in step 16. On the old code each launcher counted its own restarts, so node 0
    replaced rank 0 too (two restarts, 2 x the budget) and the job completed. Now the count is one counter in
    the job's store: node 0's launcher stops with the budget used up, and node 1's stops with it, promptly."""
    import signal
    import time

    go, go2 = tmp_path / "go", tmp_path / "go2"
    ft = tmp_path / "ck" / "run" / "ft"
    procs = two_nodes(tmp_path, {"OPENPOD_HOOK_WAIT": f"12@2@{go},16@2@{go2}"})
    try:
        def steps():
            return beat_steps(tmp_path)

        wait_for(lambda: steps() == {0: 12, 1: 12}, "both ranks at step 12")
        os.kill(int((ft / "b" / "pid-1").read_text()), signal.SIGKILL)
        go.touch()
        wait_for(lambda: steps() == {0: 16, 1: 16}, "both ranks at step 16 after the first restart")
        os.kill(int((ft / "a" / "pid-0").read_text()), signal.SIGKILL)
        t0 = time.monotonic()
        go2.touch()
        for p in procs.values():
            p.communicate(timeout=60)
        ended = time.monotonic() - t0
    finally:
        for p in procs.values():
            kill_group(p)
    logs = {n: (tmp_path / f"{n}.log").read_text() for n in procs}
    assert "rank 1 exited (-9); standby worker 0" in logs["b"] and "in-process restart 1 of 1" in logs["b"]
    assert procs["a"].returncode != 0, logs["a"][-3000:]
    assert "launcher: rank(s) 0 exited (-9); --max-restarts 1 used up (the job's: 1 restart so far)" in logs["a"], \
        logs["a"][-3000:]
    assert procs["b"].returncode != 0, logs["b"][-3000:]
    assert "launcher: the job stopped on node 0: rank(s) 0 exited (-9); --max-restarts 1 used up" in logs["b"], \
        logs["b"][-3000:]
    assert ended < 20, ended                          # node 1 did not wait out a timeout


def test_a_vanished_node_is_declared_lost_and_a_replacement_launcher_rejoins_the_job(tmp_path, baseline):
    """Node 1's launcher, its worker and its standby are SIGKILLed together while rank 0 (node 0) waits in step
    12's all-reduce - an instance dying. Node 0's launcher notices node 1's beat in the store go stale within
    --node-timeout, declares the node lost (a new generation: rank 0 leaves the broken process group at once and
    waits for a full world) and waits up to --node-wait for a launcher with --node-rank 1. A new one is started
    (as the JobSet's pod replacement would); its worker joins; rank 0 keeps its process; the result is exact.
    On the old code nothing noticed: rank 0 waited for a generation that never came and its launcher replaced it
    (or the job waited for the process-group timeout)."""
    go = tmp_path / "go"
    ft = tmp_path / "ck" / "run" / "ft"
    extra = ["--node-timeout", "3", "--node-wait", "60"]
    env = {"OPENPOD_HOOK_WAIT": f"12@2@{go}"}
    procs = two_nodes(tmp_path, env, max_restarts=2, extra=extra)
    try:
        wait_for(lambda: beat_steps(tmp_path) == {0: 12, 1: 12},
                 "both ranks at step 12")
        survivor = int((ft / "a" / "pid-0").read_text())
        kill_group(procs["b"])                       # the instance dies: launcher, worker and standby at once
        go.touch()
        wait_for(lambda: "node 1 lost" in (tmp_path / "a.log").read_text(), "node 0 declaring node 1 lost",
                 timeout=30)
        shutil.rmtree(tmp_path / "shm" / "b")         # the new instance's memory is empty: its own snapshots
        shutil.rmtree(tmp_path / "shm" / "b.held", ignore_errors=True)  # and the buddy copies it held
        procs["b"] = two_nodes(tmp_path, env, max_restarts=2, extra=extra, only="b", port=procs["a"].port)["b"]
        outs = {n: p.communicate(timeout=120)[0] for n, p in procs.items()}
    finally:
        for p in procs.values():
            kill_group(p)
    logs = {n: (tmp_path / f"{n}.log").read_text() for n in procs}
    assert [procs[n].returncode for n in "ab"] == [0, 0], logs["a"][-3000:] + logs["b"][-3000:]
    (lost,) = [ln for ln in logs["a"].splitlines() if "node 1 lost" in ln]
    silent = float(lost.split("silent for ")[1].split("s")[0])
    assert 3.0 <= silent <= 5.0, lost                # within --node-timeout (+ 1 s polling)
    assert "waiting up to 60s for a launcher with --node-rank 1" in lost, lost
    assert "launcher: node 1 rejoined" in logs["a"], logs["a"][-3000:]
    r0, r1 = last_json(outs["a"]), last_json(outs["b"])
    assert r0["pid"] == survivor                      # node 0's rank: the same process
    assert r0["restart"]["generation"] == 1 and r0["restored_step"] == 10 and r0["step"] == 20
    assert not r1["restored_from"].startswith("memory:"), r1["restored_from"]  # not the lost node's memory
    assert r0["state_sha256"] == r1["state_sha256"] == baseline["state_sha256"]


def test_a_lost_node_that_is_not_replaced_ends_the_job_with_a_clear_error(tmp_path):
    go = tmp_path / "go"
    ft = tmp_path / "ck" / "run" / "ft"
    procs = two_nodes(tmp_path, {"OPENPOD_HOOK_WAIT": f"12@2@{go}"}, extra=["--node-timeout", "3", "--node-wait", "4"])
    try:
        wait_for(lambda: (ft / "a" / "pid-0").exists() and (ft / "b" / "pid-1").exists(), "both workers")
        kill_group(procs["b"])
        go.touch()
        procs["a"].communicate(timeout=60)
    finally:
        for p in procs.values():
            kill_group(p)
    log = (tmp_path / "a.log").read_text()
    assert procs["a"].returncode != 0
    assert "launcher: node 1 lost and no launcher with --node-rank 1 joined within 4s; stopping" in log, log[-3000:]


def test_losing_node_0_stops_the_other_nodes_with_a_clear_error(tmp_path):
    """Node 0's launcher hosts the job's store: when it vanishes with its ranks, the job's rendezvous state is
    gone. Node 1's launcher says so and stops its workers within seconds (on EKS its pod then fails and the
    JobSet restarts the job: docs/training.md). On the old code it crashed with a traceback from the store."""
    import time

    go = tmp_path / "go"
    ft = tmp_path / "ck" / "run" / "ft"
    procs = two_nodes(tmp_path, {"OPENPOD_HOOK_WAIT": f"12@2@{go}"})
    try:
        wait_for(lambda: beat_steps(tmp_path) == {0: 12, 1: 12},
                 "both ranks at step 12")
        kill_group(procs["a"])
        t0 = time.monotonic()
        procs["b"].communicate(timeout=60)
        ended = time.monotonic() - t0
    finally:
        for p in procs.values():
            kill_group(p)
    log = (tmp_path / "b.log").read_text()
    assert procs["b"].returncode == 1, log[-3000:]
    (line,) = [ln for ln in log.splitlines() if ln.startswith("launcher: ")]
    assert line.startswith("launcher: the job's store at 127.0.0.1:") and "node 0's launcher is gone" in line, line
    assert ended < 15, ended
