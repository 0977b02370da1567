"""Issue 24: ``python -m training.checkpoint export`` - model-only, one dtype, safetensors, from any world size."""

import subprocess
import sys

import pytest
import torch

from training.checkpoint import Checkpointer, DirTier
from training.checkpoint.export import ExportError, export
from training.config import CheckpointConfig, TierConfig
from tests.training.test_checkpoint import make_model, train
from tests.training.test_checkpoint_jobwide import _fake_parts

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _saved(tmp_path):
    cfg = CheckpointConfig(every=1, peer_replication=False, tiers=[TierConfig("fsx", str(tmp_path / "fsx"))])
    model, opt = make_model()
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "s")
    for s in (1, 2):
        train(model, opt)
        ck.save(s, model, opt)
    ck.close()
    return model


@pytest.mark.parametrize("dtype, want", [("keep", torch.float32), ("bf16", torch.bfloat16)])
def test_export_writes_the_model_alone_as_safetensors(tmp_path, dtype, want):
    from safetensors.torch import load_file

    model = _saved(tmp_path)
    info = export(str(tmp_path / "fsx"), tmp_path / "model.safetensors", dtype=dtype)
    assert info["step"] == 2 and info["ranks"] == 1
    got = load_file(str(tmp_path / "model.safetensors"))
    sd = model.state_dict()
    assert set(got) == set(sd)  # no optimizer state, no "model." prefix
    for k, v in sd.items():
        assert got[k].dtype == want and torch.equal(got[k], v.to(want)), k


def test_export_refuses_a_partial_step_in_one_line(tmp_path):
    tier = DirTier("fsx", tmp_path / "fsx")
    _fake_parts(tier, tmp_path, 10, range(4), 4)
    _fake_parts(tier, tmp_path, 20, [0, 1, 3], 4)
    with pytest.raises(ExportError, match=r"step 20 is partial in SOURCE: the parts of rank\(s\) 2 of 4 are "
                                          r"missing; refusing to export it \(complete steps: 10\)"):
        export(str(tmp_path / "fsx"), tmp_path / "m.safetensors", step=20)
    r = subprocess.run([sys.executable, "-m", "training.checkpoint", "export", str(tmp_path / "fsx"),
                        str(tmp_path / "m.safetensors"), "--step", "20"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: step 20 is partial")
    assert not (tmp_path / "m.safetensors").exists()


@pytest.mark.slow
def test_export_merges_every_ranks_shards(tmp_path, fsdp_baseline, baseline_run):
    """Two FSDP2 ranks each saved half of every tensor; the export holds all of it: the same model as a DDP run of
    the same job (the same step computed, to float rounding). One rank's snapshot alone read as a whole
    (what dcp_to_torch_save does) would leave the other half uninitialised. The two runs are the shared baselines
    (tests/training/conftest.py), exported where they lie: export only reads its source."""
    from safetensors.torch import load_file

    from training.config import MODELS
    from training.model import GPT

    models = {}
    for par, run in (("fsdp", fsdp_baseline), ("ddp", baseline_run)):
        assert run.result["step"] == 20
        e = subprocess.run([sys.executable, "-m", "training.checkpoint", "export", str(run.dir / "ck"),
                            str(tmp_path / f"{par}.safetensors")], cwd=ROOT, capture_output=True, text=True)
        assert e.returncode == 0, e.stderr[-2000:]
        models[par] = load_file(str(tmp_path / f"{par}.safetensors"))
    GPT(MODELS["tiny"]).load_state_dict(models["fsdp"], strict=True)
    for k, v in models["ddp"].items():  # k's bias gets ~0 gradients (softmax ignores it): Adam magnifies rounding
        torch.testing.assert_close(models["fsdp"][k], v, rtol=1e-3, atol=1e-4, msg=k)
