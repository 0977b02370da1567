"""Checkpoints are untrusted input: a planted pickle payload is refused and the restore takes the next verified copy.

The payloads are what torch's own reader would run: a ``.metadata`` unpickled with ``pickle.load``
(torch 2.13.0 torch/distributed/checkpoint/filesystem.py:930) and a non-tensor item loaded with
``torch.load(weights_only=False)`` (default_planner.py:387-391).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import pickle

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.state_dict import get_state_dict

from training.checkpoint import Checkpointer, state_sha256
from training.checkpoint.storage import DirTier, Marker, describe_dir
from training.config import MODELS, CheckpointConfig, TierConfig
from training.model import GPT


class Payload:
    """Writes ``path`` when unpickled: what an attacker's ``__reduce__`` would do (run a shell, steal a token)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return exec, (f"open({self.path!r}, 'w').write('ran')",)


class Position:
    def __init__(self, pos=0):
        self.pos = pos

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, sd):
        self.pos = sd["pos"]


def _model(seed=0):
    torch.manual_seed(seed)
    m = GPT(MODELS["tiny"])
    return m, torch.optim.AdamW(m.parameters(), lr=1e-3)


def _cfg(tmp_path):
    return CheckpointConfig(every=2, tiers=[TierConfig("memory", str(tmp_path / "shm")),
                                            TierConfig("nvme", str(tmp_path / "nvme"))], peer_replication=False)


def _ck(tmp_path, cfg, component):
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scratch")
    ck.register("data", component)
    return ck


def _save_clean(tmp_path):
    model, opt = _model()
    ck = _ck(tmp_path, _cfg(tmp_path), Position(3))
    ck.save(2, model, opt)
    ck.close()
    return state_sha256(ck.state(model, opt))


def _replant(tier_root, files: dict[str, bytes]):
    """Overwrite files of step 2's snapshot and re-commit a marker that matches them: a verified copy."""
    tier = DirTier("memory", tier_root, fsync=False)
    d = tier.snapshot_dir(2, 0)
    for name, data in files.items():
        (d / name).write_bytes(data)
    old = next(m for m in tier.markers() if m.step == 2)
    tier.commit(dataclasses.replace(old, files=describe_dir(d)))


def _restore(tmp_path, caplog):
    model, opt = _model(seed=9)
    pos = Position(0)
    ck = _ck(tmp_path, _cfg(tmp_path), pos)
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        info = ck.restore(model, opt)
    h = state_sha256(ck.state(model, opt))
    ck.close()
    return info, h, pos


def test_a_planted_metadata_payload_is_refused_and_the_next_copy_restores(tmp_path, caplog):
    h = _save_clean(tmp_path)
    sentinel = tmp_path / "metadata-payload-ran"
    _replant(tmp_path / "shm/n0", {".metadata": pickle.dumps(Payload(sentinel))})
    info, h2, pos = _restore(tmp_path, caplog)
    assert not sentinel.exists()
    assert info.source == f"nvme:{tmp_path}/nvme/n0" and h2 == h and pos.pos == 3
    assert "refused to load builtins.exec: DCP metadata may only reference" in caplog.text
    assert f"{tmp_path}/shm/n0/step_000000002/rank_00000" in caplog.text


def test_a_planted_non_tensor_item_payload_is_refused_and_the_next_copy_restores(tmp_path, caplog):
    h = _save_clean(tmp_path)
    sentinel = tmp_path / "item-payload-ran"
    model, opt = _model()
    msd, osd = get_state_dict(model, opt)
    evil = tmp_path / "evil"  # written by DCP itself: the Checkpointer's staging would copy (and so run) it
    dcp.save({"model": msd, "optim": osd, "data": {"pos": Payload(sentinel)}}, storage_writer=FileSystemWriter(evil),
             no_dist=True)
    _replant(tmp_path / "shm/n0", {p.name: p.read_bytes() for p in evil.iterdir()})
    info, h2, pos = _restore(tmp_path, caplog)
    assert not sentinel.exists()
    assert info.source == f"nvme:{tmp_path}/nvme/n0" and h2 == h and pos.pos == 3
    assert "item 'data.pos' refused: only tensors and plain Python values load from a checkpoint" in caplog.text


def test_metadata_naming_a_file_outside_the_snapshot_is_refused(tmp_path):
    from training.checkpoint.safe_load import SafeFileSystemReader, UnsafeCheckpoint, load_metadata

    d = tmp_path / "snap"
    dcp.save({"w": torch.ones(3)}, storage_writer=FileSystemWriter(d), no_dist=True)
    md = load_metadata(d / ".metadata")
    md.storage_data = {k: dataclasses.replace(v, relative_path="../../etc/passwd") for k, v in md.storage_data.items()}
    (d / ".metadata").write_bytes(pickle.dumps(md))
    with pytest.raises(UnsafeCheckpoint, match=r"storage entry 'w': bad snapshot file name '../../etc/passwd'"):
        SafeFileSystemReader(d).read_metadata()


def test_the_allow_list_is_exactly_what_a_real_snapshot_references(tmp_path):
    """Every global the .metadata of a model + AdamW + RNG + component save resolves is allowed, and loads."""
    from training.checkpoint.safe_load import METADATA_GLOBALS, SafeFileSystemReader

    model, opt = _model()
    opt.zero_grad()
    model.loss_sum(torch.randint(256, (2, 33))).backward()
    opt.step()
    from training.checkpoint.components import RNGState

    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd, "rng": RNGState().state_dict(), "data": {"pos": 3, "name": "shard-7"}}
    dcp.save(state, storage_writer=FileSystemWriter(tmp_path), no_dist=True)
    seen = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module, name):
            seen.add((module, name))
            return super().find_class(module, name)

    Recorder(io.BytesIO((tmp_path / ".metadata").read_bytes())).load()
    dtypes = {(m, n) for m, n in seen if m == "torch" and isinstance(getattr(torch, n), torch.dtype)}
    assert seen - dtypes <= METADATA_GLOBALS
    target = {"model": {k: torch.zeros_like(v) for k, v in msd.items()}, "data": {"pos": 0, "name": ""}}
    dcp.load(target, storage_reader=SafeFileSystemReader(tmp_path), no_dist=True)
    assert target["data"] == {"pos": 3, "name": "shard-7"}
    assert all(torch.equal(target["model"][k], v) for k, v in msd.items())


def test_a_marker_naming_a_path_outside_its_tier_never_makes_put_write_there(tmp_path, caplog):
    fsx = DirTier("fsx", tmp_path / "fsx" / "job", fsync=False)
    src = fsx.snapshot_dir(2, 0)
    src.mkdir(parents=True)
    name = "../../../ESCAPED.txt"
    (src / name).write_bytes(b"escaped")  # the file the marker names exists where it points
    files = {name: {"size": 7, "blake3": "0" * 64}}
    fsx.marker_path(2, 0).write_text(json.dumps({"step": 2, "rank": 0, "world_size": 1, "files": files}))
    memory = DirTier("memory", tmp_path / "a" / "b" / "c" / "memory", fsync=False)
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        for m in fsx.markers():
            memory.put(fsx.snapshot_dir(m.step, m.rank), m)
    assert not (memory.root.parent / "ESCAPED.txt").exists()
    assert not [p for p in memory.root.parent.rglob("ESCAPED.txt")]
    assert "unreadable commit marker (bad snapshot file name '../../../ESCAPED.txt'" in caplog.text
    with pytest.raises(ValueError, match="bad snapshot file name"):
        Marker(step=2, rank=0, world_size=1, files=files)


def test_non_tensor_items_reach_no_weights_only_false_load(tmp_path, monkeypatch, caplog):
    """Issue 35: the reader checked an item's bytes with weights_only=True, then handed the same bytes to the
    planner, whose load_bytes loads them again with weights_only=False (default_planner.py:387-391). Every load of
    checkpoint bytes during a restore must be weights_only=True, and the restored values still arrive."""
    h = _save_clean(tmp_path)
    calls = []
    real = torch.load

    def recording(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", recording)
    info, h2, pos = _restore(tmp_path, caplog)
    assert info.step == 2 and h2 == h and pos.pos == 3  # the component's plain values loaded
    assert calls and all(w is True for w in calls), calls
