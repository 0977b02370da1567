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


def _plant(tier_root, files: dict[str, bytes], step=2):
    """Overwrite files of ``step``'s snapshot and commit a marker that matches them: what a writer of the tier can
    do (a teammate, a rogue peer), so the copy verifies and only the reader stands between its bytes and a pickle."""
    import dataclasses

    from training.checkpoint.storage import MANIFEST, describe_dir

    tier = DirTier("fsx", tier_root, fsync=False)
    d = tier.snapshot_dir(step, 0)
    for name, data in files.items():
        (d / name).write_bytes(data)
    (tier.root / f"step_{step:09d}" / MANIFEST).unlink(missing_ok=True)
    old = next(m for m in tier.markers() if m.step == step)
    tier.commit(dataclasses.replace(old, files=describe_dir(d)))


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "training.checkpoint", "export", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, **kw)


def test_export_refuses_a_planted_metadata_payload_in_one_line_and_runs_nothing(tmp_path):
    """Issue 35: export read .metadata with torch's plain reader (pickle.load) - the planted code ran."""
    import pickle

    from tests.training.test_safe_load import Payload

    _saved(tmp_path)
    sentinel = tmp_path / "export-payload-ran"
    _plant(tmp_path / "fsx", {".metadata": pickle.dumps(Payload(sentinel))})
    r = _cli(tmp_path / "fsx", tmp_path / "m.safetensors")
    assert not sentinel.exists()
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr[-3000:]
    assert r.stderr.startswith("error: step 2: ") and "refused to load builtins.exec" in r.stderr
    assert not list(tmp_path.glob("*m.safetensors*"))


def test_export_metadata_says_format_pt(tmp_path):
    """transformers 4.x refuses a safetensors file without {"format": "pt"} (facts transformers.safetensors-format)."""
    from safetensors import safe_open

    _saved(tmp_path)
    export(str(tmp_path / "fsx"), tmp_path / "m.safetensors")
    with safe_open(str(tmp_path / "m.safetensors"), framework="pt") as f:
        assert f.metadata()["format"] == "pt"


def test_export_on_a_full_output_disk_is_one_line_and_leaves_no_file(tmp_path):
    """A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): the kernel refuses the write (EFBIG) past 16 KiB as a
    full disk refuses it (ENOSPC); the export says so in one line and leaves neither OUT nor its temporary file."""
    import resource
    import signal

    _saved(tmp_path)
    out = tmp_path / "out"
    out.mkdir()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))

    for fmt in ("safetensors", "torch"):
        r = _cli(tmp_path / "fsx", out / "m.bin", "--format", fmt, preexec_fn=limit)
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr[-3000:]
        assert r.stderr.startswith(f"error: OUT {out / 'm.bin'}: not written: "), r.stderr
        assert list(out.iterdir()) == []


def test_export_from_s3_with_a_storage_error_is_one_line(tmp_path, moto_s3):
    r = _cli("s3://no-such-bucket-openpod/job", tmp_path / "m.safetensors", "--s3-endpoint-url", moto_s3,
             env={**__import__("os").environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                  "AWS_DEFAULT_REGION": "us-east-1"})
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr[-3000:]
    assert r.stderr.startswith("error: SOURCE s3://no-such-bucket-openpod/job: ") and "NoSuchBucket" in r.stderr
    assert not (tmp_path / "m.safetensors").exists()
