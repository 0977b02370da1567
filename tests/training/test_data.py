"""Data: deterministic memory-mapped shards and a world-size independent sample order."""

import hashlib
import os
from pathlib import Path

import pytest

from training.data import SampleOrder, TokenShards, ensure_dataset, plan_step


def make(tmp_path, name="d", seed=7, n=100):
    return ensure_dataset(tmp_path / name, seed=seed, num_samples=n, samples_per_shard=32, seq_len=15, vocab_size=300)


def digest(d):
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(d.glob("shard_*.bin")))).hexdigest()


def test_dataset_is_deterministic_sharded_and_memory_mapped(tmp_path):
    a, b, c = make(tmp_path, "a"), make(tmp_path, "b"), make(tmp_path, "c", seed=8)
    assert digest(a) == digest(b) != digest(c)
    assert len(list(a.glob("shard_*.bin"))) == 4  # 32 + 32 + 32 + 4
    ds = TokenShards(a)
    assert len(ds) == 100
    assert ds.sample(99).shape == (16,) and int(ds.sample(99).max()) < 300
    assert ds.batch([0, 33, 99]).shape == (3, 16)
    # the sample is read from the file through the memory map
    raw = (a / "shard_00003.bin").read_bytes()[2 * 16 * 3: 2 * 16 * 4]
    assert ds.sample(99).tolist() == [int.from_bytes(raw[i:i + 2], "little") for i in range(0, 32, 2)]


def test_existing_dataset_with_other_parameters_is_refused(tmp_path):
    make(tmp_path, "a")
    with pytest.raises(ValueError, match="different data set"):
        make(tmp_path, "a", seed=9)


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_every_world_size_reads_the_same_samples_per_step(world):
    order = SampleOrder(60, seed=3)
    for step in range(10):
        plans = [plan_step(order, step, rank=r, world_size=world, global_batch=12, micro_batch=2)
                 for r in range(world)]
        ids = [i for p in plans for i in p.sample_ids]
        assert ids == [order[p] for p in range(step * 12, step * 12 + 12)]  # same samples, same order
        assert all(len(mb) <= 2 for p in plans for mb in p.micro_batches)


def test_each_epoch_is_a_permutation_and_epochs_differ():
    order = SampleOrder(60, seed=3)
    e0 = [order[p] for p in range(60)]
    e1 = [order[p] for p in range(60, 120)]
    assert sorted(e0) == sorted(e1) == list(range(60))
    assert e0 != e1


def test_resume_from_any_position_without_replaying():
    a = SampleOrder(60, seed=3)
    stream = [a[p] for p in range(150)]
    b = SampleOrder(60, seed=3)  # a fresh process resuming at position 97
    assert [b[p] for p in range(97, 150)] == stream[97:]


def test_world_larger_than_global_batch_is_refused():
    with pytest.raises(ValueError, match="exceeds the global batch"):
        plan_step(SampleOrder(10, 0), 0, rank=0, world_size=5, global_batch=4, micro_batch=1)


def test_a_new_process_reads_cached_shards_from_node_memory_not_the_source(tmp_path):
    """The cache outlives the process that filled it: a restarted rank maps the copies, even with the
    source gone (nothing of it is read again but the index)."""
    import subprocess
    import sys

    src = make(tmp_path, "src")
    first = TokenShards(src, cache_dir=tmp_path / "shm")
    want = first.batch(list(range(100))).tolist()
    assert first.cache_stats | {"dir": None} == {"dir": None, "hit": 0, "filled": 4, "uncached": 0}
    for shard in src.glob("shard_*.bin"):
        shard.unlink()  # the source is unreachable now
    code = ("import json, sys; from training.data import TokenShards; "
            f"d = TokenShards({str(src)!r}, cache_dir={str(tmp_path / 'shm')!r}); "
            "print(json.dumps([d.batch(list(range(100))).tolist(), d.cache_stats]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[2]).stdout
    import json

    got, stats = json.loads(out)
    assert got == want
    assert (stats["hit"], stats["filled"], stats["uncached"]) == (4, 0, 0)


def test_a_changed_data_set_is_never_served_from_the_old_cache(tmp_path):
    import shutil

    src = make(tmp_path, "src", seed=7)
    old = TokenShards(src, cache_dir=tmp_path / "shm")
    old_samples = old.batch([0, 50, 99]).tolist()
    old_dir = Path(old.cache_stats["dir"])
    shutil.rmtree(src)
    make(tmp_path, "src", seed=8)  # same path, same shape, other tokens
    new = TokenShards(src, cache_dir=tmp_path / "shm")
    got = new.batch([0, 50, 99]).tolist()
    assert got == TokenShards(src).batch([0, 50, 99]).tolist() != old_samples
    assert new.cache_stats["filled"] == 3 and new.cache_stats["hit"] == 0
    assert not old_dir.exists()  # the stale copies are gone (node memory is not leaked)


def test_beyond_its_size_cap_the_cache_maps_the_source(tmp_path):
    src = make(tmp_path, "src")
    shard_bytes = 32 * 16 * 2
    d = TokenShards(src, cache_dir=tmp_path / "shm", cache_max_bytes=2 * shard_bytes)
    assert d.batch(list(range(100))).tolist() == TokenShards(src).batch(list(range(100))).tolist()
    assert (d.cache_stats["filled"], d.cache_stats["uncached"]) == (2, 2)


def test_the_launcher_writes_the_data_set_without_importing_torch(tmp_path):
    """The launcher runs before torchrun starts the workers: importing torch there cost ~1.5-3 s of CPU per run
    (measured: 14.9 s -> 12.3-14.3 s for a 15-step 2-rank FSDP run on this machine)."""
    import subprocess
    import sys

    code = ("import sys; import training.cli; from training.data import ensure_dataset; "
            f"ensure_dataset({str(tmp_path / 'd')!r}, seed=1, num_samples=40, samples_per_shard=16, seq_len=15, "
            "vocab_size=300); print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    assert len(TokenShards(tmp_path / "d")) == 40


LAUNCH_PROBE = """
import json, os, subprocess, sys
import training.cli
if os.environ.get("PROBE_TORCH"):  # the torch version the launcher reads (training.cli.installed_torch)
    training.cli.installed_torch = lambda: os.environ["PROBE_TORCH"]
class Stop(Exception):
    pass
def popen(cmd, *a, **k):  # the launcher's next step would start torchrun: report what it had imported by then
    print(json.dumps({"cmd": cmd, "torch": sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))}))
    raise Stop
subprocess.Popen = popen
from training.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
except Stop:
    pass
"""


def launch_probe(tmp_path, *extra: str, torch: str | None = None) -> dict:
    """``python -m training run`` up to its torchrun call: that command, the torch modules loaded by then, and what
    it printed on stderr; ``torch``: the torch version it is to read as installed."""
    import json
    import subprocess
    import sys

    args = ["run", "--model", "tiny", "--steps", "2", "--checkpoint-dir", str(tmp_path / "ck"),
            "--memory-dir", str(tmp_path / "shm"), *extra]
    env = {k: v for k, v in os.environ.items() if k != "PROBE_TORCH"} | ({"PROBE_TORCH": torch} if torch else {})
    r = subprocess.run([sys.executable, "-c", LAUNCH_PROBE, *args], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[2], timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]) | {"stderr": r.stderr}


@pytest.mark.parametrize("extra", [[], ["--parallelism", "fsdp"], ["--s3-uri", "s3://b/j", "--s3-endpoint-url",
                                                                   "http://127.0.0.1:9"]])
def test_the_launcher_starts_torchrun_without_having_imported_torch(tmp_path, extra):
    """The whole launch path, not only the data set: every import before torchrun starts delays the workers.
    Failed on the old code: the peer-secret check imported training.checkpoint, whose package init loaded the
    checkpointer and with it torch and torch.distributed.checkpoint (about 3 s of CPU and 5 s of wall time per
    incarnation on the 2-core CI machine, then more at the launcher's exit)."""
    seen = launch_probe(tmp_path, "--nproc-per-node", "2", *extra)
    assert seen["cmd"][2] == "training.agent"  # torchrun, forking the workers where it can
    assert seen["torch"] == [], f"imported before torchrun started: {seen['torch'][:10]}"


def test_a_one_node_run_lets_torchruns_rendezvous_store_pick_its_port(tmp_path):
    """Failed on the old code: the launcher picked a free port and torchrun bound it seconds later (after importing
    torch); another process took it in between once in a CI run and the rendezvous client timed out after 60 s.
    Port 0 is what torchrun --standalone uses (facts: torchrun.standalone-endpoint)."""
    cmd = launch_probe(tmp_path)["cmd"]
    assert "--rdzv-endpoint=127.0.0.1:0" in cmd, cmd
