"""In-process restart (``--restart in-process``): a rank's worker dies, the survivors keep their processes.

The launcher starts one worker per rank itself (no torchrun): when one dies it puts a warm
standby worker (or, with ``--spare-workers 0``, a new worker) in that rank's place alone and moves the job to a new generation in its store. The
surviving worker's next collective fails; it drops its process group and runtime, joins the
new generation's process group in the same process, and every rank restores the newest
step all of them hold (node memory here) and goes on. The result is bit-identical to an
uninterrupted run: the replayed steps are computed exactly as the first time.
"""

import os
import signal

import pytest

from tests.training.conftest import (beat_steps, cli_env, failure_text, kill_group, last_json, run_cli, spawn,
                                     train_args, wait_for)

pytestmark = [pytest.mark.slow]

FAULT = 12  # rank 0 holds before this step; rank 1 waits in its all-reduce and is killed there


@pytest.mark.parametrize("spares,replacement", [("1", "standby worker 0"), ("0", "a new worker")])
def test_a_killed_rank_is_replaced_and_the_survivor_keeps_its_process(tmp_path, baseline, spares, replacement):
    go = tmp_path / "go"
    ft = tmp_path / "ck" / "run" / "ft"
    args = train_args(tmp_path, extra=["--restart", "in-process", "--max-restarts", "1", "--spare-workers", spares])
    p = spawn(args, env=cli_env(OPENPOD_HOOK_WAIT=f"{FAULT}@2@{go}"), log=tmp_path / "run.log")
    try:
        wait_for(lambda: beat_steps(tmp_path) == {0: FAULT, 1: FAULT},
                 f"both ranks at step {FAULT}")
        survivor = int(next(ft.rglob("pid-0")).read_text())
        os.kill(int(next(ft.rglob("pid-1")).read_text()), signal.SIGKILL)
        go.touch()
        out, _ = p.communicate(timeout=240)
    finally:
        kill_group(p)
    log = (tmp_path / "run.log").read_text()
    assert p.returncode == 0, log[-4000:]
    r = last_json(out)
    assert r["pid"] == survivor                      # rank 0's worker is the same process as before the fault
    assert r["worker_start"] == "fork"               # forked by the launcher on a CPU torch (training/worker_start.py)
    assert r["restart"] == {"mode": "in-process", "restarts": 1, "generation": 1}
    assert r["restored_step"] == 10 and r["restored_from"].startswith("memory:")  # newest snapshot, node memory
    assert r["step"] == 20
    assert r["state_sha256"] == baseline["state_sha256"]
    assert f"rank 1 exited (-9); {replacement}" in log and "generation 1" in log


def test_in_process_restart_refuses_what_it_does_not_support(tmp_path):
    r = run_cli(train_args(tmp_path, extra=["--restart", "in-process", "--nnodes", "1:2",
                                            "--rdzv-endpoint", "127.0.0.1:1"]))
    assert r.returncode == 2, failure_text(r)
    assert "--restart: in-process needs a fixed node count (--nnodes N), got --nnodes 1:2" in r.stderr
    r = run_cli(train_args(tmp_path, extra=["--restart", "in-process", "--max-restarts", "1", "--nnodes", "2",
                                            "--rdzv-endpoint", "127.0.0.1:1", "--node-rank", "2"]))
    assert r.returncode == 2, failure_text(r)
    assert "--node-rank: must be 0 .. 1, got 2" in r.stderr
    r = run_cli(train_args(tmp_path, extra=["--node-rank", "1"]))
    assert r.returncode == 2, failure_text(r)
    assert "--node-rank: only applies with --restart in-process" in r.stderr
    r = run_cli(train_args(tmp_path, extra=["--restart", "in-process"]))  # --max-restarts 0: nothing to restart
    assert r.returncode == 2, failure_text(r)
    assert "--max-restarts: --restart in-process needs >= 1" in r.stderr
    r = run_cli(train_args(tmp_path, extra=["--spare-workers", "2"]))
    assert r.returncode == 2, failure_text(r)
    assert "--spare-workers: only applies with --restart in-process" in r.stderr


HANG_FLOOR_S = 8.0  # as test_hang.py: a restored step on a loaded 2-core machine must not trip it again


def test_a_hung_rank_is_caught_and_replaced_alone_and_the_survivor_keeps_its_process(tmp_path, baseline):
    """Rank 1 stops advancing before step 12 (alive, its sockets open); rank 0 waits in step 12's all-reduce.
    The watchdog fires within its bound and writes both stacks; it kills the rank that fell behind (the one
    that never began step 12) and no other; rank 0 re-forms the process group in the same process."""
    ft = tmp_path / "ck" / "run" / "ft"
    args = train_args(tmp_path, extra=["--restart", "in-process", "--max-restarts", "1",
                                       "--hang-floor", str(HANG_FLOOR_S), "--hang-multiple", "5"])
    p = spawn(args, env=cli_env(OPENPOD_HANG_AT=f"12@1@{tmp_path / 'hung-once'}"), log=tmp_path / "run.log")
    try:
        wait_for(lambda: any(ft.rglob("pid-0")) and any(ft.rglob("pid-1")), "both workers' pid files")
        survivor = int(next(ft.rglob("pid-0")).read_text())
        out, _ = p.communicate(timeout=240)
    finally:
        kill_group(p)
    log = (tmp_path / "run.log").read_text()
    assert p.returncode == 0, log[-4000:]
    r = last_json(out)
    assert r["pid"] == survivor                                              # rank 0: the same process
    (line,) = [ln for ln in log.splitlines() if ln.startswith("watchdog: ")]
    fired_after = float(line.split("no rank advanced for ")[1].split("s")[0])
    assert HANG_FLOOR_S <= fired_after <= HANG_FLOOR_S + 3.0, line           # within its bound (+ 1 s polling)
    assert "rank(s) 1 fell behind" in line, line                            # the culprit, and only it
    stacks = {q.name: q.read_text() for q in ft.rglob("stacks-rank-*.txt")}
    assert "hang_forever" in stacks["stacks-rank-1.txt"]                     # the hung rank, caught in the act
    assert "File " in stacks["stacks-rank-0.txt"]                            # the survivor, in its collective
    assert r["restart"] == {"mode": "in-process", "restarts": 1, "generation": 1}
    assert r["restored_step"] == 10 and r["restored_from"].startswith("memory:")
    assert r["step"] == 20 and r["state_sha256"] == baseline["state_sha256"]


def test_a_second_failure_during_the_recovery_moves_everyone_to_the_next_generation(tmp_path, baseline):
    """Rank 1's worker is killed in step 12; the standby that takes its place is killed as soon as the launcher
    assigns it (the survivor is then on its way into generation 1's process group, which can no longer form).
    The launcher starts generation 2 in a later poll; the survivor leaves generation 1 for it instead of
    waiting out the rendezvous timeout, keeps its process, and the result is the uninterrupted run's."""
    go = tmp_path / "go"
    ft = tmp_path / "ck" / "run" / "ft"
    log_path = tmp_path / "run.log"
    args = train_args(tmp_path, extra=["--restart", "in-process", "--max-restarts", "2"])
    p = spawn(args, env=cli_env(OPENPOD_HOOK_WAIT=f"{FAULT}@2@{go}"), log=log_path)
    try:
        wait_for(lambda: beat_steps(tmp_path) == {0: FAULT, 1: FAULT},
                 f"both ranks at step {FAULT}")
        survivor = int(next(ft.rglob("pid-0")).read_text())
        os.kill(int(next(ft.rglob("pid-1")).read_text()), signal.SIGKILL)
        go.touch()
        marker = "standby worker 0 (pid "
        wait_for(lambda: marker in log_path.read_text(), "the first replacement", poll=0.01)
        text = log_path.read_text()
        os.kill(int(text[text.index(marker) + len(marker):].split(")")[0]), signal.SIGKILL)
        out, _ = p.communicate(timeout=240)
    finally:
        kill_group(p)
    log = log_path.read_text()
    assert p.returncode == 0, log[-4000:]
    assert "generation 2 (in-process restart 2 of 2)" in log
    r = last_json(out)
    assert r["pid"] == survivor                      # the survivor kept its process through both failures
    assert r["restart"]["generation"] == 2 and r["restart"]["restarts"] in (1, 2)  # 1: it skipped generation 1
    assert r["restored_step"] == 10 and r["step"] == 20
    assert r["state_sha256"] == baseline["state_sha256"]


def test_two_nodes_a_killed_rank_of_node_1_is_replaced_there_and_the_survivors_on_both_nodes_keep_their_processes(
        tmp_path):
    """Two launchers on 127.0.0.1 act as two nodes of two ranks each (--nnodes 2 --node-rank i): node 0's
    launcher hosts the job's store at --rdzv-endpoint, node 1's connects to it. Rank 3 (node 1) is SIGKILLed
    in step 12; node 1's standby takes it; ranks 0, 1 (node 0) and 2 (node 1) keep their processes; the world
    size (4) and the result are those of an uninterrupted 4-rank run."""
    from tests.conftest import free_port

    ref = run_cli(train_args(tmp_path / "ref", nproc=4))
    assert ref.returncode == 0, failure_text(ref)
    port, go = free_port(), tmp_path / "go"
    ft = tmp_path / "ck" / "run" / "ft"
    procs = {}
    try:
        for i, node in enumerate("ab"):
            args = train_args(tmp_path, nproc=2, extra=["--restart", "in-process", "--max-restarts", "1",
                                                        "--nnodes", "2", "--node-rank", str(i), "--node-id", node,
                                                        "--rdzv-endpoint", f"127.0.0.1:{port}"])
            procs[node] = spawn(args, env=cli_env(OPENPOD_HOOK_WAIT=f"{FAULT}@4@{go}"), log=tmp_path / f"{node}.log")
        at = dict.fromkeys(range(4), FAULT)
        wait_for(lambda: beat_steps(tmp_path) == at,
                 f"every rank at step {FAULT}")
        pids = {int(f.name.split("-")[1]): int(f.read_text()) for f in ft.glob("*/pid-*")}
        os.kill(pids[3], signal.SIGKILL)
        go.touch()
        outs = {n: p.communicate(timeout=240)[0] for n, p in procs.items()}
    finally:
        for p in procs.values():
            kill_group(p)
    logs = {n: (tmp_path / f"{n}.log").read_text() for n in procs}
    assert [procs[n].returncode for n in "ab"] == [0, 0], logs["a"][-3000:] + logs["b"][-3000:]
    assert "rank 3 exited (-9); standby worker 0" in logs["b"] and "generation 1" in logs["b"]
    for rank in (0, 1, 2):                           # the survivors, on both nodes: the same processes
        assert f"rank {rank}: re-forming the process group in generation 1 (same process, pid {pids[rank]};" \
            in logs["ab"[rank // 2]], rank
    r0, r2 = last_json(outs["a"]), last_json(outs["b"])  # each node reports its first rank
    assert (r0["pid"], r2["pid"]) == (pids[0], pids[2])
    assert r0["restart"] == r2["restart"] == {"mode": "in-process", "restarts": 1, "generation": 1}
    assert r0["world_size"] == r2["world_size"] == 4
    assert r0["restored_step"] == r2["restored_step"] == 10
    assert r0["state_sha256"] == r2["state_sha256"] == last_json(ref.stdout)["state_sha256"]
