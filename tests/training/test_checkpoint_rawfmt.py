"""Issue 38 item 7: tensor items written raw (training/checkpoint/rawfmt.py) - exact round trips, checkpoints of
DCP's torch.save layout still restore, and a crafted raw item is refused in one line before a byte is read."""

import dataclasses
import json
import pickle

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

from training.checkpoint import Checkpointer, DirTier, state_sha256
from training.checkpoint.export import ExportError, export, read_model
from training.checkpoint.rawfmt import RawFileSystemWriter, descriptor
from training.checkpoint.safe_load import SafeFileSystemReader, UnsafeCheckpoint, load_metadata
from training.checkpoint.storage import CorruptCheckpoint, describe_dir
from training.config import CheckpointConfig, TierConfig
from tests.training.test_checkpoint import make_model, train

SNAP = "step_000000002/rank_00000"


def _cfg(tmp_path, layout="raw"):
    return CheckpointConfig(every=2, peer_replication=False, layout=layout, tiers=[
        TierConfig("memory", str(tmp_path / "shm")), TierConfig("nvme", str(tmp_path / "nvme")),
        TierConfig("fsx", str(tmp_path / "fsx"))])


def _ck(tmp_path, cfg):
    return Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scr")


def _save_step(root, model, opt, layout="raw", **fields) -> Checkpointer:
    """``model`` trained one more step and saved as step 2 with :func:`_cfg` (``fields`` set on it); the
    checkpointer, still open."""
    train(model, opt)
    ck = _ck(root, dataclasses.replace(_cfg(root, layout), **fields))
    ck.save(2, model, opt)
    return ck


def _save(tmp_path, layout="raw", dtype=torch.float32):
    model, opt = make_model()
    model.to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ck = _save_step(tmp_path, model, opt, layout)
    h = state_sha256(ck.state(model, opt))
    ck.close()
    return model, h


def _restore(tmp_path, layout="raw", dtype=torch.float32, tier=None):
    model, opt = make_model(seed=99)
    model.to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = _cfg(tmp_path, layout)
    if tier:
        cfg.tiers = [t for t in cfg.tiers if t.kind == tier]
    ck = _ck(tmp_path, cfg)
    info = ck.restore(model, opt)
    h = state_sha256(ck.state(model, opt))
    ck.close()
    return info, h


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_raw_items_round_trip_bit_exactly_in_every_dtype(tmp_path, dtype):
    _, h = _save(tmp_path, dtype=dtype)
    md = load_metadata(tmp_path / "nvme/n0" / SNAP / ".metadata")
    tensors = [v for v in md.storage_data.values() if v.transform_descriptors]
    assert tensors and all(v.transform_descriptors[0].startswith("openpod.raw/1:") for v in tensors)
    assert any(f":{str(dtype).removeprefix('torch.')}:" in v.transform_descriptors[0] for v in tensors)
    for tier in ("memory", "nvme", "fsx"):
        info, h2 = _restore(tmp_path, dtype=dtype, tier=tier)
        assert info.step == 2 and h2 == h, tier


def test_a_raw_save_runs_no_torch_save_per_tensor_and_writes_each_tensor_once_by_reference(tmp_path, monkeypatch):
    """The tee stream gets each tensor's staged bytes in one write, which the hash follower keeps by reference;
    torch.save serializes only the non-tensor items (DCP's planner's BYTE_IO)."""
    from training.checkpoint import hashing

    saved, copied, by_ref = [], [], []
    real_save, real_follow = torch.save, hashing.TeeFileSystem.follow

    def counting_save(obj, f, *a, **kw):
        saved.append(type(obj).__name__)
        return real_save(obj, f, *a, **kw)

    def follow(self, record, digest, chunk, written=(), **kw):
        if isinstance(chunk, memoryview):
            (by_ref if self._stable(chunk) else copied).append(len(chunk))
        return real_follow(self, record, digest, chunk, written, **kw)

    monkeypatch.setattr(torch, "save", counting_save)
    monkeypatch.setattr(hashing.TeeFileSystem, "follow", follow)
    _save(tmp_path)
    monkeypatch.undo()
    assert "Tensor" not in saved and copied == [] and by_ref  # (a save that failed would follow nothing)
    assert DirTier("nvme", tmp_path / "nvme/n0").index() == {2: {0}}
    _, h = _save(tmp_path / "again")
    assert _restore(tmp_path / "again")[1] == h


def test_the_torch_save_layout_stays_loadable_by_stock_dcp_and_raw_is_refused_by_it_by_name(tmp_path):
    model, _ = _save(tmp_path / "ts", layout="torch-save")
    sd = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    dcp.load({"model": sd}, storage_reader=FileSystemReader(tmp_path / "ts/nvme/n0" / SNAP), no_dist=True)
    assert all(torch.equal(sd[k], v) for k, v in model.state_dict().items())
    _save(tmp_path / "raw")
    with pytest.raises(BaseException, match="Unknown extension name='openpod.raw'"):
        dcp.load({"model": sd}, storage_reader=FileSystemReader(tmp_path / "raw/nvme/n0" / SNAP), no_dist=True)


@pytest.mark.parametrize("written, read", [("torch-save", "raw"), ("raw", "torch-save")])
def test_a_checkpoint_of_either_layout_restores_whatever_the_layout_now(tmp_path, written, read):
    """torch-save is the old code path (DCP's FileSystemWriter through the tee file system): a checkpoint written
    before the raw layout restores after it, and a raw one after switching back."""
    _, h = _save(tmp_path, layout=written)
    info, h2 = _restore(tmp_path, layout=read)
    assert info.step == 2 and h2 == h


def test_raw_items_of_a_sharded_fsdp2_state_round_trip_on_one_rank(tmp_path):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from training.model import GPT
    from training.config import MODELS

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))

        def fsdp(seed):
            torch.manual_seed(seed)
            m = GPT(MODELS["tiny"])
            for blk in m.blocks:
                fully_shard(blk, mesh=mesh)
            fully_shard(m, mesh=mesh)
            o = torch.optim.AdamW(m.parameters(), lr=1e-3)
            train(m, o)
            return m, o

        m, o = fsdp(0)
        ck = _ck(tmp_path, _cfg(tmp_path))
        ck.save(2, m, o)
        h = state_sha256(ck.state(m, o))
        ck.close()
        m2, o2 = fsdp(7)
        ck = _ck(tmp_path, _cfg(tmp_path))
        info = ck.restore(m2, o2)
        assert info.step == 2 and state_sha256(ck.state(m2, o2)) == h
        ck.close()
    finally:
        dist.destroy_process_group()


# ------------------------------------------------------------------------------------------ crafted raw items
def _raw_dir(tmp_path):
    d = tmp_path / "ck"
    state = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(5, dtype=torch.bfloat16),
             "hp": {"lr": 0.5}}
    dcp.save(state, storage_writer=RawFileSystemWriter(d), no_dist=True)
    return d


def _edit(d, fqn, **change):
    md = pickle.loads((d / ".metadata").read_bytes())
    for k, v in md.storage_data.items():
        if k.fqn == fqn:
            md.storage_data[k] = dataclasses.replace(v, **change)
    (d / ".metadata").write_bytes(pickle.dumps(md))


def _load(d):
    target = {"w": torch.zeros(3, 4), "b": torch.zeros(5, dtype=torch.bfloat16), "hp": {"lr": 0.0}}
    try:
        dcp.load(target, storage_reader=SafeFileSystemReader(d), no_dist=True)
    except BaseException as e:  # noqa: BLE001 - DCP wraps what read_data raised
        from training.checkpoint.safe_load import first_failure

        raise first_failure(e) from None
    return target


def test_a_clean_raw_checkpoint_loads_through_the_safe_reader(tmp_path):
    got = _load(_raw_dir(tmp_path))
    assert torch.equal(got["w"], torch.arange(12.0).reshape(3, 4)) and got["hp"] == {"lr": 0.5}
    assert torch.equal(got["b"], torch.ones(5, dtype=torch.bfloat16))


@pytest.mark.parametrize("crafted, message", [
    ("short", r"bytes \d+..\d+ lie outside the \d+-byte file"),
    ("length", r"length 9, 10 bytes expected for torch.bfloat16 \[5\]"),
    ("offset", r"bytes 1000000..1000010 lie outside the \d+-byte file"),
    ("shape", r"torch.bfloat16 \[7\] in the file, torch.bfloat16 \[5\] in the metadata"),
    ("huge", r"torch.bfloat16 \[1099511627776, 1099511627776\] in the file, torch.bfloat16 \[5\] in the metadata"),
    ("dtype", r"torch.float32 \[5\] in the file, torch.bfloat16 \[5\] in the metadata"),
])
def test_a_crafted_raw_item_is_refused_in_one_line_before_it_is_read(tmp_path, crafted, message):
    d = _raw_dir(tmp_path)
    md = pickle.loads((d / ".metadata").read_bytes())
    info = next(v for k, v in md.storage_data.items() if k.fqn == "b")
    if crafted == "short":
        f = d / info.relative_path
        f.write_bytes(f.read_bytes()[:info.offset + 4])
    elif crafted == "length":
        _edit(d, "b", length=9)
    elif crafted == "offset":
        _edit(d, "b", offset=1_000_000)
    elif crafted == "shape":
        _edit(d, "b", transform_descriptors=[descriptor(torch.bfloat16, (7,))])
    elif crafted == "huge":  # 2^80 elements asked: refused before any allocation
        _edit(d, "b", transform_descriptors=[descriptor(torch.bfloat16, (1 << 40, 1 << 40))])
    elif crafted == "dtype":
        _edit(d, "b", transform_descriptors=[descriptor(torch.float32, (5,))], length=20)
    with pytest.raises(CorruptCheckpoint, match=message) as e:
        _load(d)
    assert "\n" not in str(e.value) and ": item '" in str(e.value)


@pytest.mark.parametrize("descs", [["openpod.raw/2:float32:5"], ["openpod.raw/1:os.system:5"],
                                   ["openpod.raw/1:bfloat16:-5"], ["openpod.raw/1:bfloat16:5", "zip/1"], [7]])
def test_a_malformed_raw_descriptor_is_refused_when_the_metadata_is_read(tmp_path, descs):
    d = _raw_dir(tmp_path)
    _edit(d, "b", transform_descriptors=descs)
    with pytest.raises(CorruptCheckpoint, match="storage entry 'b': raw item descriptor") as e:
        load_metadata(d / ".metadata")
    assert "\n" not in str(e.value)


def test_export_of_a_crafted_raw_item_is_one_line_not_dcps_traceback(tmp_path):
    model, _ = _save(tmp_path)
    d = tmp_path / "fsx" / SNAP
    assert set(read_model([d])) == set(model.state_dict())
    key = next(k.fqn for k, v in load_metadata(d / ".metadata").storage_data.items()
               if k.fqn.startswith("model.") and v.transform_descriptors)
    _edit(d, key, offset=1 << 40)
    with pytest.raises(CorruptCheckpoint, match="lie outside the") as e:
        read_model([d])
    assert "\n" not in str(e.value)
    with pytest.raises(ExportError, match="file .metadata has"):  # the marker's hash refuses it first
        export(str(tmp_path / "fsx"), tmp_path / "m.safetensors")
    marker = DirTier("fsx", tmp_path / "fsx").marker_path(2, 0)  # who can write the files can write the marker
    m = json.loads(marker.read_text())
    marker.write_text(json.dumps(dict(m, files=describe_dir(d))))
    with pytest.raises(ExportError, match=r"^step 2: .*: item 'model\..*': bytes \d+..\d+ lie outside the") as e:
        export(str(tmp_path / "fsx"), tmp_path / "m.safetensors")
    assert "\n" not in str(e.value) and not (tmp_path / "m.safetensors").exists()


def test_a_non_contiguous_tensor_is_written_as_its_row_major_bytes(tmp_path):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    dcp.save({"t": t}, storage_writer=RawFileSystemWriter(tmp_path), no_dist=True)
    back = {"t": torch.zeros(4, 3)}
    dcp.load(back, storage_reader=SafeFileSystemReader(tmp_path), no_dist=True)
    assert torch.equal(back["t"], t)


def test_an_unknown_layout_is_refused_naming_the_field(tmp_path):
    with pytest.raises(ValueError, match="checkpoint.layout: 'zip' is not one of raw, torch-save"):
        _ck(tmp_path, _cfg(tmp_path, "zip"))


def test_the_stock_writer_is_what_torch_save_layout_uses(tmp_path):
    from training.checkpoint.rawfmt import writer_for

    assert writer_for("torch-save") is FileSystemWriter and writer_for("raw") is RawFileSystemWriter
    assert UnsafeCheckpoint.__mro__[1] is CorruptCheckpoint


def test_a_state_of_the_same_shapes_in_another_dtype_gets_its_own_plan_and_metadata(tmp_path):
    """DCP's plan cache is keyed by the planner's class name and compares plans without dtypes: an fp32 save, then
    a bf16 one of the same shapes in the same process, got the fp32 metadata (the raw reader then refused every
    item). The writer keys it by the staged layout."""
    for i, dtype in enumerate((torch.float32, torch.bfloat16, torch.float32)):
        _, h = _save(tmp_path / str(i), dtype=dtype)
        info, h2 = _restore(tmp_path / str(i), dtype=dtype, tier="nvme")
        assert info.step == 2 and h2 == h, dtype


def test_a_run_of_staged_tensors_is_written_in_few_writes_with_zero_padding(tmp_path, monkeypatch):
    from training.checkpoint import hashing, rawfmt

    writes = []
    real = hashing._TeeStream.write
    monkeypatch.setattr(hashing._TeeStream, "write", lambda self, b: writes.append(len(memoryview(b).cast("B")))
                        or real(self, b))
    monkeypatch.setattr(rawfmt, "PIECE", 64 << 10)
    _save(tmp_path)
    monkeypatch.undo()
    f = tmp_path / "nvme/n0" / SNAP / "__0_0.distcp"
    md = load_metadata(f.parent / ".metadata")
    items = sorted((v.offset, v.length) for v in md.storage_data.values() if v.transform_descriptors)
    big = [n for n in writes if n > 4096]
    assert len(big) <= f.stat().st_size // (64 << 10) + 2 < len(items), (len(big), len(items))
    data, end = f.read_bytes(), items[0][0]
    for o, n in items:  # between two items: the stager's alignment padding, zeros
        assert o >= end and not any(data[end:o]), (end, o)
        end = o + n


def test_the_cli_flag_picks_the_layout_and_refuses_another_in_one_line(tmp_path):
    from click.testing import CliRunner

    from training.cli import main
    from training.config import DataConfig, RunConfig

    r = CliRunner().invoke(main, ["run", "--steps", "1", "--checkpoint-dir", str(tmp_path / "ck"),
                                  "--checkpoint-layout", "zip"])
    assert r.exit_code == 2 and "Invalid value for '--checkpoint-layout': 'zip' is not one of 'raw', 'torch-save'" \
        in r.output
    assert "--checkpoint-layout [raw|torch-save]" in CliRunner().invoke(main, ["run", "--help"]).output
    d = json.loads(RunConfig(model="tiny", steps=1, seed=0, run_dir="r", data=DataConfig("x")).to_json())
    d["checkpoint"].pop("layout")  # a run's config written before the layout existed
    assert RunConfig.from_dict(d).checkpoint.layout == "raw"


def test_torch_saves_small_writes_are_gathered_without_an_address_lookup_each(tmp_path, monkeypatch):
    """The raw layout made the tee stream look up, for every small write, whether it lies in the staging buffer
    (~2 us each): torch.save's ~38 small writes per tensor paid it in the torch-save layout (10,973 lookups and
    215 ms of CPU per save of the benchmark's `small`, 137 ms without). Its writes are read-only views and are
    gathered without the lookup; the lookups left are the large writes' (at most a few per tensor item)."""
    from training.checkpoint import hashing

    calls = []
    real = hashing.TeeFileSystem._stable
    monkeypatch.setattr(hashing.TeeFileSystem, "_stable", lambda self, mv: calls.append(len(mv)) or real(self, mv))
    model, h = _save(tmp_path, layout="torch-save")
    items = 3 * len(list(model.parameters()))  # parameters and AdamW's two moments: the tensor items, about
    assert 0 < len(calls) <= 2 * items, (len(calls), items)
    assert _restore(tmp_path, layout="torch-save")[1] == h


class _Counter:
    """A registered component whose state gains a key between saves (a non-tensor: DCP writes it as bytes)."""

    def __init__(self, state):
        self.state = dict(state)

    def state_dict(self):
        return dict(self.state)

    def load_state_dict(self, sd):
        self.state = dict(sd)


def test_a_save_of_an_unchanged_structure_reuses_its_local_plan_and_a_changed_one_gets_a_new_plan(
        tmp_path, monkeypatch):
    """The local save plan of a save whose flattened state has the same keys, dtypes, shapes (and DTensor specs)
    as the last is reused, not made again (one write item per tensor: 2-16 ms per save of `small`); a non-tensor
    key that appears, a dtype or a shape that changes, gets a new plan - and the checkpoint holds it. Failed on
    the old code, which made the plan on every save."""
    import torch.distributed.checkpoint.default_planner as dp

    from training.checkpoint.writer import SavePlanner

    monkeypatch.setattr(SavePlanner, "_local_plans", {}, raising=False)  # not another test's plan of the tiny model
    made = []
    real = dp.create_default_local_save_plan
    monkeypatch.setattr(dp, "create_default_local_save_plan", lambda sd, c: made.append(len(sd)) or real(sd, c))
    model, opt = make_model()
    train(model, opt)
    cfg = _cfg(tmp_path)
    cfg.tiers = [t for t in cfg.tiers if t.kind == "nvme"]
    ck = _ck(tmp_path, cfg)
    comp = _Counter({"epoch": 1})
    ck.register("sched", comp)
    ck.save(2, model, opt)
    ck.save(4, model, opt)
    ck.flush()
    assert len(made) == 1, made  # the second save reused the first one's plan
    comp.state["seen"] = 7  # a new non-tensor key: same tensors, same staged layout
    ck.save(6, model, opt)
    ck.flush()
    assert len(made) == 2 and made[1] == made[0] + 1, made
    # a save that fails after its local plan, before DCP cached it: the next save of that structure must not
    # take DCP's cached plan (of the structure before) for it
    comp.state["late"] = 3
    real_global = SavePlanner.create_global_plan
    monkeypatch.setattr(SavePlanner, "create_global_plan", lambda self, plans: 1 / 0)
    ck.save(8, model, opt)
    ck.flush()
    assert ck.stats.failed == 1
    monkeypatch.setattr(SavePlanner, "create_global_plan", real_global)
    ck.save(10, model, opt)
    ck.flush()
    ck.close()
    back = _Counter({"epoch": 0, "seen": 0, "late": 0})  # DCP loads into the keys the component has
    model2, opt2 = make_model(seed=99)
    ck2 = _ck(tmp_path, cfg)
    ck2.register("sched", back)
    info = ck2.restore(model2, opt2)
    ck2.close()
    assert info.step == 10 and back.state == {"epoch": 1, "seen": 7, "late": 3}
    from training.checkpoint.writer import _structure

    sd = {"w": torch.zeros(2, 3), "n": 1}
    assert _structure(sd, True) == _structure({"w": torch.ones(2, 3), "n": 5}, True)
    for other in ({"w": torch.zeros(3, 2), "n": 1}, {"w": torch.zeros(2, 3, dtype=torch.bfloat16), "n": 1},
                  {"w": torch.zeros(2, 3)}, {"w": torch.zeros(2, 3), "m": 1}):
        assert _structure(other, True) != _structure(sd, True), other
    assert _structure(sd, False) != _structure(sd, True)
    assert SavePlanner._local_plans  # kept per layout key
