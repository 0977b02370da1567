"""HostStager on CUDA: sharded state on a CUDA mesh, deferred copies on a side stream, pinned memory bounds."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from benchmarks.training_checkpoint import _tensors  # every tensor of a nested state

pytestmark = [pytest.mark.gpu]


@pytest.fixture
def cuda_mesh():
    from torch.distributed.device_mesh import init_device_mesh

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    try:
        yield init_device_mesh("cuda", (1,))
    finally:
        dist.destroy_process_group()


def test_deferred_copies_of_sharded_state_land_in_the_buffers_dcp_writes(cuda_mesh):
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor

    from training.checkpoint.staging import HostStager

    torch.manual_seed(0)
    w = distribute_tensor(torch.randn(1024, 256, device="cuda"), cuda_mesh, [Shard(0)])
    state = {"w": w, "step": torch.tensor(7.0, device="cuda")}
    expected = w.to_local().cpu()
    stager = HostStager()
    staged, pending = stager.plan(state, defer=lambda t: t.dim() > 0)
    ready = stager.ready_event()
    assert isinstance(staged["w"], DTensor) and staged["w"].to_local().device.type == "cpu"
    assert staged["w"].to_local().is_pinned()
    stager.copy(pending, ready)
    w.to_local().add_(1.0)  # the next optimizer step: must not reach the snapshot
    torch.cuda.synchronize()
    assert torch.equal(staged["w"].to_local(), expected)
    assert staged["step"].item() == 7.0


def test_pinned_staging_memory_is_within_5_percent_of_the_state(cuda_mesh):
    """Per-tensor pinned blocks from the caching host allocator round up to powers of two (1200 MiB asked, 1664 MiB
    pinned on an H100, issue 22); one flat buffer carved into views stays within 1.05x."""
    from training.checkpoint.staging import HostStager
    from training.config import MODELS
    from training.model import GPT

    model = GPT(MODELS["small"]).cuda()
    opt = torch.optim.AdamW(model.parameters())
    model.loss_sum(torch.randint(MODELS["small"].vocab_size, (2, 33), device="cuda")).backward()
    opt.step()
    state = {"model": model.state_dict(), "optim": opt.state_dict()}
    want = sum(t.numel() * t.element_size() for t in _tensors(state))
    before = torch.cuda.host_memory_stats().get("allocated_bytes.current", 0) if hasattr(
        torch.cuda, "host_memory_stats") else 0
    stager = HostStager()
    staged = stager.stage(state)
    assert stager.nbytes <= 1.05 * want
    assert all(t.is_pinned() for t in _tensors(staged))  # registered in place: CUDA sees the views as pinned
    if hasattr(torch.cuda, "host_memory_stats"):
        grew = torch.cuda.host_memory_stats().get("allocated_bytes.current", 0) - before
        assert grew <= 0.05 * want, f"{grew} bytes from the caching host allocator for a {want}-byte state"



def test_the_landing_of_deferred_device_copies_advances_by_events_and_the_bytes_are_there(monkeypatch):
    """The writer writes each piece of the staging buffer once ``Landing`` says its bytes are in host memory: on
    CUDA the copies are queued on the side stream with an event every ``LANDED_EVERY`` bytes, and a mark is
    advanced only once its event completed - what a waiter then reads is the device's bytes."""
    from training.checkpoint import staging
    from training.checkpoint.staging import HostStager

    monkeypatch.setattr(staging, "LANDED_EVERY", 4 << 20)
    torch.manual_seed(0)
    state = {f"t{i}": torch.randn(1 << 20, device="cuda") for i in range(6)}  # 4 MiB each
    stager = HostStager()
    staged, pending = stager.plan(state, defer=lambda t: True)
    landing, seen = stager.landing, []
    real = staging.Landing.advance

    def advance(self, upto):
        done = [k for k, v in staged.items() if v.data_ptr() + v.numel() * 4 <= self.base + upto]
        seen.append((upto, all(torch.equal(staged[k], state[k].cpu()) for k in done)))
        real(self, upto)

    monkeypatch.setattr(staging.Landing, "advance", advance)
    stager.copy(pending, stager.ready_event())
    assert landing.complete and len(seen) >= 6 and all(ok for _, ok in seen), seen
    assert [u for u, _ in seen] == sorted(u for u, _ in seen)
