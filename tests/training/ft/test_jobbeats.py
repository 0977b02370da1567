"""The job's heartbeats in its store: every launcher reads every node's ranks, of the current generation only."""

from datetime import timedelta

import torch.distributed as dist

from training.ft import jobbeats
from training.ft.heartbeat import Beat, behind


def test_every_node_sees_every_rank_and_names_a_culprit_on_another_node():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))
    jobbeats.init(store, 2)
    assert [n.time for n in jobbeats.gather(store, 2)] == [None, None]  # nothing published yet; no wait
    jobbeats.publish(store, 0, [Beat(0, 11, 100.0, 1.0, started=12, started_time=101.0, generation=1)], now=105.0)
    jobbeats.publish(store, 1, [Beat(1, 11, 100.0, 1.0, started=11, started_time=99.0, generation=1),
                                Beat(2, 9, 90.0, 1.0, started=9, started_time=89.0, generation=0)], now=104.0)
    nodes = jobbeats.gather(store, 2)
    assert [n.time for n in nodes] == [105.0, 104.0]
    beats, node_of = jobbeats.current(nodes, generation=1)
    assert sorted(b.rank for b in beats) == [0, 1]    # rank 2's beat is from generation 0: stale, not judged
    assert node_of == {0: 0, 1: 1, 2: 1}
    assert behind(beats) == [1]                       # node 0 names node 1's rank as the culprit


def test_node_timeout_and_wait_must_be_positive():
    from training.cli import check_run_args

    base = ["--steps", "10", "--checkpoint-dir", "/tmp/ck", "--restart", "in-process", "--max-restarts", "1",
            "--nnodes", "2",
            "--rdzv-endpoint", "h:1"]
    assert check_run_args([*base, "--node-timeout", "5", "--node-wait", "60"]) == []
    assert check_run_args([*base, "--node-timeout", "0", "--node-wait", "-1"]) == [
        "--node-timeout: must be > 0 seconds, got 0.0", "--node-wait: must be > 0 seconds, got -1.0"]
    assert check_run_args([*base, "--node-timeout", "60"]) == [
        "--node-timeout: must be below 60 s (how long a survivor waits for a new generation after its collective "
        "failed), got 60.0"]


def test_node_timeout_must_be_below_the_hang_floor():
    """Until a silent node is declared lost its last beats stay in the store: a hang watchdog that fired first would
    find every rank at one step and replace the survivors' waiting ranks. Failed on the old code (accepted)."""
    from training.cli import check_run_args

    base = ["--steps", "10", "--checkpoint-dir", "/tmp/ck", "--restart", "in-process", "--max-restarts", "1",
            "--rdzv-endpoint", "h:1", "--node-timeout", "20"]
    assert check_run_args([*base, "--nnodes", "2", "--hang-floor", "20"]) == [
        "--node-timeout: must be below --hang-floor (20 s): a lost node must be declared before the hang watchdog "
        "fires, got 20.0"]
    assert check_run_args([*base, "--nnodes", "2", "--hang-floor", "21"]) == []
    assert check_run_args([*base, "--nnodes", "1", "--hang-floor", "8"]) == []  # one node: no node is watched
