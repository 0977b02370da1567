"""HostStager: what DCP is handed after a save is staged (sharded state, a CUDA mesh, one flat buffer)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from training.checkpoint.staging import HostStager

# torch@v2.13.0 torch/distributed/tensor/_api.py:539-541 (DTensor.from_local):
#     device_type = device_mesh.device_type
#     if device_type != local_tensor.device.type and not local_tensor.is_meta:
#         local_tensor = local_tensor.to(device_type)
# and torch/distributed/device_mesh.py:265,402-405 (the mesh keeps its device type in ``_device_type``,
# read by the ``device_type`` property). A mesh built by init_device_mesh("cuda", ...) differs from this CPU
# mesh, for from_local, only in that field: setting it makes from_local take the branch a GPU job takes
# (on a CPU-only torch, ``.to("cuda")`` raises; on a GPU, it copies the host buffer before it is filled).


@pytest.fixture
def cuda_mesh():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = DeviceMesh("cpu", [0])
        yield mesh
    finally:
        dist.destroy_process_group()


def _sharded_state(mesh):
    torch.manual_seed(0)
    w = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)])
    m = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)])
    return {"model": {"w": w}, "optim": {"state": {"w": {"exp_avg": m, "step": torch.tensor(3.0)}}}}


def test_a_staged_shard_on_a_cuda_mesh_is_the_host_buffer_the_deferred_copy_fills(cuda_mesh, tmp_path):
    state = _sharded_state(cuda_mesh)
    cuda_mesh._device_type = "cuda"  # see the note above: from_local now moves a CPU local tensor
    stager = HostStager()
    staged, pending = stager.plan(state, defer=lambda t: True)
    assert len(pending) == 3
    spans = [(a, a + n) for a, n in stager.spans()]
    for got in (staged["model"]["w"], staged["optim"]["state"]["w"]["exp_avg"]):
        assert isinstance(got, DTensor)
        local = got.to_local()
        # DCP writes this tensor: it must be a view of the staging buffer, not a copy made before it was filled
        assert local.device.type == "cpu"
        assert any(a <= local.data_ptr() < e for a, e in spans)
    stager.copy(pending)  # the deferred device-to-host copy, after plan() returned
    torch.testing.assert_close(staged["model"]["w"].to_local(), state["model"]["w"].to_local(), rtol=0, atol=0)
    torch.testing.assert_close(staged["optim"]["state"]["w"]["exp_avg"].to_local(),
                               state["optim"]["state"]["w"]["exp_avg"].to_local(), rtol=0, atol=0)
    assert staged["model"]["w"].shape == state["model"]["w"].shape
    assert staged["model"]["w"].placements == state["model"]["w"].placements

    # and what DCP writes from it is the source state
    dcp.save(staged, checkpoint_id=str(tmp_path / "ck"))
    cuda_mesh._device_type = "cpu"
    back = _sharded_state(cuda_mesh)
    for d in (back["model"]["w"], back["optim"]["state"]["w"]["exp_avg"]):
        d.to_local().zero_()
    dcp.load(back, checkpoint_id=str(tmp_path / "ck"))
    torch.testing.assert_close(back["model"]["w"].to_local(), state["model"]["w"].to_local(), rtol=0, atol=0)
    torch.testing.assert_close(back["optim"]["state"]["w"]["exp_avg"].to_local(),
                               state["optim"]["state"]["w"]["exp_avg"].to_local(), rtol=0, atol=0)
