"""Checkpoints of the reference model from before its fused qkv projection was split into q, k, v resume: the
fused weight, bias and AdamW moments are split along dim 0 (q | k | v) into the live tensors. The old model is
rebuilt here as it was (training/model.py before commit 4f73abd) and trained for real before it is saved."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.training.test_checkpoint import checkpointer, tiers
from training.checkpoint import IncompatibleCheckpoint
from training.config import MODELS
from training.model import GPT
from training.process_exit import exit_without_teardown

C = MODELS["tiny"]
D = C.d_model


class OldBlock(nn.Module):
    """The block as it was: one fused [3d, d] projection whose output splits into q, k, v (last dim)."""

    def __init__(self, c):
        super().__init__()
        self.n_heads = c.n_heads
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.mlp = nn.Sequential(nn.Linear(c.d_model, 4 * c.d_model), nn.GELU(), nn.Linear(4 * c.d_model, c.d_model))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def old_model(seed: int = 3):
    torch.manual_seed(seed)
    model = GPT(C)
    model.blocks = nn.ModuleList(OldBlock(C) for _ in range(C.n_layers))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def batch(seed: int) -> torch.Tensor:
    return torch.randint(C.vocab_size, (2, C.seq_len + 1), generator=torch.Generator().manual_seed(seed))


def step(model, opt, seed: int) -> float:
    opt.zero_grad()
    loss = model.loss_sum(batch(seed))
    loss.backward()
    opt.step()
    return float(loss.detach())


def test_a_checkpoint_with_a_fused_qkv_resumes_into_q_k_v(tmp_path, caplog):
    """Failed on the old code: IncompatibleCheckpoint (the fused checkpoint could not be resumed at all)."""
    cfg = tiers(tmp_path)
    old, old_opt = old_model()
    for s in range(3):
        step(old, old_opt, s)
    ck = checkpointer(tmp_path, cfg)
    ck.save(3, old, old_opt, {"loss": 1.0})
    ck.close()

    torch.manual_seed(99)
    new = GPT(C)
    new_opt = torch.optim.AdamW(new.parameters(), lr=1e-2)
    ck = checkpointer(tmp_path, cfg)
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        info = ck.restore(new, new_opt)
    ck.close()
    assert info.step == 3 and info.source.startswith("memory:")
    assert "from before the q, k, v split: 48 tensors taken from fused qkv projections" in caplog.text

    old_p, new_p = dict(old.named_parameters()), dict(new.named_parameters())
    for name, p in new_p.items():
        if ".q." in name or ".k." in name or ".v." in name:
            part = next(i for i, x in enumerate((".q.", ".k.", ".v.")) if x in name)
            fused = name.replace((".q.", ".k.", ".v.")[part], ".qkv.")
            want_p = old_p[fused][part * D:(part + 1) * D]
            want_state = {k: (v if v.dim() == 0 else v[part * D:(part + 1) * D])
                          for k, v in old_opt.state[old_p[fused]].items()}
        else:
            want_p, want_state = old_p[name], old_opt.state[old_p[name]]
        assert torch.equal(p, want_p), name
        got_state = new_opt.state[p]
        assert set(got_state) == set(want_state) == {"step", "exp_avg", "exp_avg_sq"}, name
        for k in want_state:
            assert torch.equal(got_state[k], want_state[k]), (name, k)
    assert new_opt.param_groups[0]["lr"] == old_opt.param_groups[0]["lr"]

    # The split model goes on as the fused one does (the same function; float sums in another order).
    for s in range(3, 5):
        assert step(new, new_opt, s) == pytest.approx(step(old, old_opt, s), rel=1e-6)


def test_a_checkpoint_of_another_model_is_still_refused(tmp_path):
    """Only names a fused projection explains are mapped: a checkpoint lacking other parameters is refused with
    one error naming them, never skipped into a fresh start."""
    cfg = tiers(tmp_path)
    old, opt = old_model()
    for blk in old.blocks:
        blk.fc = blk.mlp  # another model: the MLP under another name
        del blk.mlp
    step_ok = torch.optim.AdamW(old.parameters(), lr=1e-2)
    ck = checkpointer(tmp_path, cfg)
    ck.save(2, old, step_ok, {"loss": 1.0})
    ck.close()
    torch.manual_seed(99)
    new = GPT(C)
    ck = checkpointer(tmp_path, cfg)
    with pytest.raises(IncompatibleCheckpoint,
                       match=r"holds another model: it lacks .*blocks\.0\.mlp\.0\.bias and has model\.blocks\.0\.fc\."):
        ck.restore(new, torch.optim.AdamW(new.parameters(), lr=1e-2))
    ck.close()


def _sharded_worker(rank: int, world: int, tp: int, port: int, root: str, out: dict) -> None:
    import os
    import traceback

    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    try:
        from torch.distributed.tensor import DTensor

        from training.checkpoint import Checkpointer
        from training.config import CheckpointConfig, DataConfig, RunConfig, TierConfig
        from training.runtime import Runtime

        rt = Runtime(RunConfig(model="tiny", steps=1, seed=1, run_dir=f"{root}/run{world}",
                               data=DataConfig(data_dir=f"{root}/data"), checkpoint=CheckpointConfig(enabled=False),
                               parallelism="fsdp", tp=tp))
        torch.manual_seed(99)
        model = rt.parallelize(GPT(C))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        cfg = CheckpointConfig(every=1, peer_replication=False, tiers=[TierConfig("fsx", f"{root}/fsx")])
        ck = Checkpointer(cfg, rank=rank, world_size=world, local_world_size=world, node_id=f"n{rank}",
                          scratch_dir=f"{root}/scratch{world}-{rank}")
        info = ck.restore(model, opt)
        ck.close()
        full = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()
                for n, p in model.named_parameters()}
        moments = {n: (lambda t: t.full_tensor() if isinstance(t, DTensor) else t)(opt.state[p]["exp_avg"]).clone()
                   for n, p in model.named_parameters()}
        if rank == 0:
            out["result"] = {"step": info.step, "params": full, "exp_avg": moments}
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the test
        out[f"error{rank}"] = traceback.format_exc()
    exit_without_teardown(0)  # a rank that ran gloo collectives leaves this way (training/process_exit.py)


@pytest.mark.slow
@pytest.mark.parametrize("world,tp", [(2, 1), (4, 2)], ids=["fsdp2", "dp2-tp2"])
def test_a_fused_checkpoint_resumes_onto_sharded_q_k_v(tmp_path, world, tp):
    """The old checkpoint (one process, replicated) restored by FSDP2 ranks and by a (dp 2 x tp 2) mesh: each rank
    fills its own shard of q, k, v (and of their AdamW moments) from the fused tensors."""
    import torch.multiprocessing as mp

    from tests.conftest import free_port
    from tests.training.conftest import fork_ranks

    cfg = tiers(tmp_path)
    cfg.tiers = [t for t in cfg.tiers if t.kind == "fsx"]
    old, old_opt = old_model()
    for s in range(2):
        step(old, old_opt, s)
    ck = checkpointer(tmp_path, cfg)
    ck.save(2, old, old_opt, {"loss": 1.0})
    ck.close()
    from training.data import ensure_dataset

    ensure_dataset(tmp_path / "data", seed=1, num_samples=1536, samples_per_shard=256, seq_len=C.seq_len,
                   vocab_size=C.vocab_size)  # the runtime opens it
    out = mp.Manager().dict()
    fork_ranks(_sharded_worker, (world, tp, free_port(), str(tmp_path), out), world)
    errors = [v for k, v in out.items() if k.startswith("error")]
    assert not errors, errors[0]
    got = out["result"]
    assert got["step"] == 2
    old_p = dict(old.named_parameters())
    for name, p in got["params"].items():
        parts = [i for i, x in enumerate((".q.", ".k.", ".v.")) if x in name]
        if parts:
            fused = old_p[name.replace((".q.", ".k.", ".v.")[parts[0]], ".qkv.")]
            sl = slice(parts[0] * D, (parts[0] + 1) * D)
            want, want_m = fused[sl], old_opt.state[fused]["exp_avg"][sl]
        else:
            want, want_m = old_p[name], old_opt.state[old_p[name]]["exp_avg"]
        assert torch.equal(p, want), name
        assert torch.equal(got["exp_avg"][name], want_m), name
