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


def test_another_nodes_beats_are_moved_into_the_readers_clock():
    """Issue 38: beats carry each node's boot clock (no wall-clock step moves it), which differs from node to node;
    the reader places a beat as old, before the moment it first saw that node's publication, as it was before
    the publication. A node that stops publishing keeps its beats' place: they age."""
    from training.ft.heartbeat import is_hung

    node1 = jobbeats.NodeBeats(1, 1_000_100.0, (Beat(1, 7, 1_000_095.0, 1.0, started=8, started_time=1_000_096.0,
                                                     generation=0),))
    node0 = jobbeats.NodeBeats(0, 199.0, (Beat(0, 7, 198.0, 1.0, started=8, started_time=198.5, generation=0),))
    seen = {1: (1_000_100.0, 200.0)}  # the reader (node 0) saw node 1's publication at 200.0 on its own clock
    beats, _ = jobbeats.current([node0, node1], 0, seen, own=0)
    assert [(b.rank, b.time, b.started_time) for b in beats] == [(0, 198.0, 198.5), (1, 195.0, 196.0)]
    assert not is_hung(beats, now=210.0, floor_s=30) and is_hung(beats, now=240.0, floor_s=30)
