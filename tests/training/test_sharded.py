"""Sharded state (FSDP2 over a DeviceMesh) through the checkpointer: 2 CPU ranks, gloo."""

from __future__ import annotations

import json
import os
import time
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.conftest import free_port
from tests.training.conftest import fork_ranks
from training.checkpoint import Checkpointer, state_sha256
from training.config import MODELS, CheckpointConfig, TierConfig
from training.model import GPT
from training.process_exit import exit_without_teardown

WORLD = 2


def _fsdp_model(seed: int):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(seed)
    model = GPT(MODELS["tiny"])
    mesh = init_device_mesh("cpu", (WORLD,))
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def _step(model, opt, rank: int):
    x = torch.randint(256, (2, 33), generator=torch.Generator().manual_seed(rank))
    opt.zero_grad()
    model.loss_sum(x).backward()
    opt.step()


def _worker(rank: int, port: int, root: str, overlap: bool, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        cfg = CheckpointConfig(every=1, overlap_staging=overlap, peer_replication=False, tiers=[
            TierConfig("memory", f"{root}/shm"), TierConfig("fsx", f"{root}/fsx")])

        def ck():
            return Checkpointer(cfg, rank=rank, world_size=WORLD, local_world_size=1, node_id=f"n{rank}",
                                scratch_dir=f"{root}/scratch{rank}")

        model, opt = _fsdp_model(0)
        c = ck()
        _step(model, opt, rank)
        c.save(1, model, opt)
        _step(model, opt, rank)  # the overlapped copy must see step-1 state, not this update
        c.flush()
        stats = (c.stats.committed, c.stats.failed, c.stats.last_error, dict(c.stats.promoted))
        c.close()

        model2, opt2 = _fsdp_model(0)
        _step(model2, opt2, rank)
        want = state_sha256(ck().state(model2, opt2))  # the full, unsharded state after one step

        model3, opt3 = _fsdp_model(7)
        c3 = ck()
        info = c3.restore(model3, opt3)
        got = state_sha256(c3.state(model3, opt3))
        c3.close()
        out[rank] = {"stats": stats, "step": info.step if info else None, "want": want, "got": got}
    except BaseException:  # noqa: BLE001 - reported to the test
        out[rank] = {"error": traceback.format_exc()}
    finally:
        dist.destroy_process_group()
        exit_without_teardown(0)  # a rank that ran gloo collectives leaves this way (training/process_exit.py)


@pytest.mark.slow
@pytest.mark.parametrize("overlap", [True, False], ids=["overlapped-staging", "eager-staging"])
def test_fsdp2_each_rank_saves_and_restores_its_own_shards(tmp_path, overlap):
    """Failed on the old code: staging copied a DTensor into a plain buffer (`aten.copy_ got mixed Tensor and
    DTensor`), so no FSDP2 checkpoint was ever committed."""
    out = mp.Manager().dict()
    fork_ranks(_worker, (free_port(), str(tmp_path), overlap, out), WORLD)
    for rank in range(WORLD):
        r = out[rank]
        assert "error" not in r, r.get("error")
        committed, failed, last_error, promoted = r["stats"]
        assert (committed, failed, last_error) == (1, 0, None)
        assert promoted == {"fsx": 1}  # every rank writes its own shards to the shared tier
        assert r["step"] == 1 and r["got"] == r["want"]
        marker = json.loads((tmp_path / f"fsx/step_000000001/rank_{rank:05d}.commit.json").read_text())
        assert marker["replicated"] is False  # a sharded snapshot restores only its own rank
    assert out[0]["want"] == out[1]["want"]


def _peer_worker(rank: int, port: int, root: str, out: dict) -> None:
    """Each rank on its own node; after a save, rank 1's node is replaced (its memory is gone)."""
    import shutil

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        cfg = CheckpointConfig(every=1, peer_replication=True, tiers=[TierConfig("memory", f"{root}/shm")])

        def ck():
            return Checkpointer(cfg, rank=rank, world_size=WORLD, local_world_size=1, node_id=f"n{rank}",
                                scratch_dir=f"{root}/scratch{rank}")

        model, opt = _fsdp_model(0)
        c = ck()
        _step(model, opt, rank)
        c.save(1, model, opt)
        c.flush()  # written, committed and sent to the buddy
        want = state_sha256(c.state(model, opt))
        c.close()
        dist.barrier()
        if rank == 1:  # the replacement node starts with empty memory
            shutil.rmtree(f"{root}/shm/n1")
            shutil.rmtree(f"{root}/shm/n1.held", ignore_errors=True)
        dist.barrier()
        model2, opt2 = _fsdp_model(7)
        c2 = ck()
        info = c2.restore(model2, opt2)
        got = state_sha256(c2.state(model2, opt2))
        c2.close()
        out[rank] = {"want": want, "got": got, "step": info.step if info else None,
                     "source": info.source if info else None}
    except BaseException:  # noqa: BLE001 - reported to the test
        out[rank] = {"error": traceback.format_exc()}
    finally:
        dist.destroy_process_group()
        exit_without_teardown(0)  # a rank that ran gloo collectives leaves this way (training/process_exit.py)


@pytest.mark.slow
def test_fsdp2_a_replaced_node_restores_its_own_shards_from_its_buddys_memory(tmp_path):
    """Issue 9: with sharded state, rank 1's snapshot (its shards only) lives on after its node is gone in
    the memory of its buddy on another node; the replacement restores exactly those shards from there."""
    out = mp.Manager().dict()
    fork_ranks(_peer_worker, (free_port(), str(tmp_path), out), WORLD)
    for rank in range(WORLD):
        assert "error" not in out[rank], out[rank].get("error")
    assert out[0]["step"] == out[1]["step"] == 1
    assert out[0]["source"].startswith("memory:") and out[1]["source"].startswith("peer:")
    assert out[0]["got"] == out[0]["want"] and out[1]["got"] == out[1]["want"] == out[0]["want"]
    held = json.loads((tmp_path / "shm/n0.held/step_000000001/rank_00001.commit.json").read_text())
    assert held["replicated"] is False and held["rank"] == 1


def _stuck(rank: int) -> None:
    time.sleep(120)


def test_a_stuck_forked_rank_fails_its_test_instead_of_hanging_the_suite(monkeypatch, capfd):
    """And says where it was stuck: every rank's threads' stacks reach the captured stderr. Failed on the old
    harness, which killed the ranks silently (a hang of test_fsdp2_each_rank_saves_and_restores_its_own_shards under a
    load of ~6 left nothing to read)."""
    from tests.training import conftest

    monkeypatch.setattr(conftest, "FORKED_RANKS_TIMEOUT_S", 1)
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match="still running after 1 s"):
        fork_ranks(_stuck, (), 2)
    assert time.monotonic() - t0 < 30
    err = capfd.readouterr().err
    assert err.count(" in _stuck\n") == 2, err[-2000:]   # both ranks' stacks
