"""Elastic data parallelism and peer recovery with separate torchrun agents on loopback (c10d rendezvous)."""

import shutil
from pathlib import Path

import pytest

from tests.training.conftest import PY, cli_env, free_port, kill_group, last_json, spawn, train_args, wait_for

pytestmark = [pytest.mark.slow]


def agent_args(tmp: Path, node: str, port: int, *, nnodes: str, steps: int, every: int, seed: int,
               extra=()) -> list[str]:
    return [PY, "-m", "training", "run", "--model", "tiny", "--steps", str(steps), "--checkpoint-every", str(every),
            "--checkpoint-dir", str(tmp / "ck"), "--memory-dir", str(tmp / "shm"), "--nproc-per-node", "1",
            "--seed", str(seed), "--nnodes", nnodes, "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "job",
            "--node-id", node, "--max-restarts", "5", "--rdzv-last-call", "1", *extra]


def committed_world(ck: Path, step: int) -> int | None:
    import json

    try:
        return json.loads((ck / f"step_{step:09d}/rank_00000.commit.json").read_text())["world_size"]
    except (OSError, ValueError):
        return None


def final_trajectory(log: Path) -> dict[int, dict]:
    """Per step, the samples of its last execution (replayed steps overwrite earlier attempts)."""
    steps: dict[int, dict] = {}
    for line in log.read_text().splitlines():
        _pid, step, world, rank, *ids = line.split()
        step, world, rank = int(step), int(world), int(rank)
        cur = steps.get(step)
        if cur is None or rank in cur["ranks"] or cur["world"] != world:
            cur = steps[step] = {"world": world, "ranks": {}}
        cur["ranks"][rank] = [int(i) for i in ids]
    return steps


def test_two_to_three_to_two_workers_keeps_batch_order_and_loss(tmp_path):
    n, g, steps = 108, 12, 18                       # two epochs of 9 steps
    port = free_port()
    go = tmp_path / "scale-down"
    env = cli_env(OPENPOD_SAMPLE_LOG=str(tmp_path / "samples.log"),
                  OPENPOD_HOOK_WAIT=f"6@2@{tmp_path / 'never'}@stop,12@3@{go}")
    extra = ["--num-samples", str(n), "--global-batch", str(g)]
    ck = tmp_path / "ck"
    agents = {node: spawn(agent_args(tmp_path, node, port, nnodes="2:3", steps=steps, every=3, seed=3, extra=extra),
                          env=env, log=tmp_path / f"{node}.err") for node in ("a", "b")}
    try:
        wait_for(lambda: committed_world(ck, 6) == 2, "step 6 at 2 workers")  # then rank 0 holds at step 6
        agents["c"] = spawn(agent_args(tmp_path, "c", port, nnodes="2:3", steps=steps, every=3, seed=3, extra=extra),
                            env=env, log=tmp_path / "c.err")
        wait_for(lambda: committed_world(ck, 12) == 3, "step 12 at 3 workers")  # rank 0 holds at step 12
        kill_group(agents.pop("c"))                 # node c leaves
        go.touch()                                   # the survivors hit the dead peer and re-rendezvous
        # The reference (2 workers throughout) runs meanwhile, on a CPU the survivors leave idle while the
        # rendezvous waits to drop node c (torchrun's keep-alive: 3 missed beats of 5 s).
        fixed = agents["fixed"] = spawn(train_args(tmp_path / "fixed", steps=steps, every=3, seed=3, extra=extra),
                                        env=cli_env(), log=tmp_path / "fixed.err")
        fixed_out = fixed.communicate(timeout=180)[0]
        outs = [last_json(p.communicate(timeout=180)[0]) for n, p in agents.items() if n != "fixed"]
    finally:
        for p in agents.values():
            kill_group(p)
    assert all(o["step"] == steps and o["world_size"] == 2 for o in outs)
    assert outs[0]["state_sha256"] == outs[1]["state_sha256"]

    traj = final_trajectory(tmp_path / "samples.log")
    assert sorted(traj) == list(range(steps))
    assert {s: traj[s]["world"] for s in (0, 5, 6, 11, 12, 17)} == {0: 2, 5: 2, 6: 3, 11: 3, 12: 2, 17: 2}
    for s, t in traj.items():
        assert len(t["ranks"]) == t["world"] and sum(map(len, t["ranks"].values())) == g  # global batch kept
    for epoch in range(2):
        seen = [i for s in range(9 * epoch, 9 * epoch + 9) for r in sorted(traj[s]["ranks"]) for i in traj[s]["ranks"][r]]
        assert sorted(seen) == list(range(n))       # every sample exactly once per epoch

    assert fixed.returncode == 0, (tmp_path / "fixed.err").read_text()[-3000:]
    ref = last_json(fixed_out)["loss"]
    assert abs(outs[0]["loss"] - ref) <= 1e-4 * abs(ref), (outs[0]["loss"], ref)


def test_replacement_node_restores_from_its_buddys_memory(tmp_path, baseline):
    port = free_port()
    # Nothing reaches the durable tier (every 100th checkpoint), so only node memory holds state.
    extra = ["--fsx-every", "100"]
    args = {node: agent_args(tmp_path, node, port, nnodes="2", steps=20, every=5, seed=1, extra=extra)
            for node in ("a", "b")}
    for a in args.values():
        a[a.index("--max-restarts") + 1] = "0"
    # The job dies right after a snapshot of step 10 reached a buddy (whichever rank gets there first).
    killed = {n: spawn(a, env=cli_env(OPENPOD_KILL_AT="after_replicate@10"), log=tmp_path / f"{n}-1.err")
              for n, a in args.items()}
    for p in killed.values():
        p.wait(timeout=120)
        assert p.returncode != 0
    held = list((tmp_path / "shm").glob("*.held/step_000000010/rank_*.commit.json"))
    assert held  # a node holds its buddy's snapshot
    assert not list((tmp_path / "ck").glob("step_*"))
    shutil.rmtree(tmp_path / "shm/b")                # node b is lost: its memory is gone
    shutil.rmtree(tmp_path / "shm/b.held")
    procs = {n: spawn(a, env=cli_env(), log=tmp_path / f"{n}-2.err") for n, a in args.items()}
    outs = {n: last_json(p.communicate(timeout=180)[0]) for n, p in procs.items()}
    assert outs["a"]["restored_from"].startswith("memory:")
    assert outs["b"]["restored_from"].startswith("peer:127.0.0.1:"), outs["b"]["restored_from"]
    # step 10, or 15 if the surviving rank's save of step 15 committed before the job died
    assert outs["a"]["restored_step"] == outs["b"]["restored_step"] in (10, 15)
    assert outs["a"]["state_sha256"] == outs["b"]["state_sha256"] == baseline["state_sha256"]
