"""Issue 40: a worker's pid file (OPENPOD_FT_DIR/pid-RANK, read by the hang watchdog and by tests) is written
atomically: a reader sees no file or the whole pid, never the empty file a plain write_text shows between its
open and its write (the full suite failed once on that, on a loaded machine)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

# Constructs the runtime in a world of one with OPENPOD_FT_DIR set, recording every open() of the pid file's own
# path for writing: an atomic write opens only a temporary name and renames it.
SCRIPT = r"""
import builtins, io, json, os, sys
root = sys.argv[1]
os.environ["OPENPOD_FT_DIR"] = f"{root}/ft"
os.makedirs(f"{root}/ft")
pid_path = os.path.realpath(f"{root}/ft/pid-0")
direct = []
real_open = io.open

def spying_open(file, mode="r", *a, **kw):
    if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == pid_path and set(mode) & set("wax+"):
        direct.append(mode)
    return real_open(file, mode, *a, **kw)

io.open = builtins.open = spying_open
from training.config import CheckpointConfig, DataConfig, RunConfig
from training.data import ensure_dataset
from training.runtime import Runtime
cfg = RunConfig(model="tiny", steps=1, seed=0, run_dir=f"{root}/run", data=DataConfig(data_dir=f"{root}/data"),
                checkpoint=CheckpointConfig(enabled=False), device="cpu")
m = cfg.model_config
ensure_dataset(cfg.data.data_dir, seed=0, num_samples=cfg.data.num_samples,
               samples_per_shard=cfg.data.samples_per_shard, seq_len=m.seq_len, vocab_size=m.vocab_size)
Runtime(cfg)
print(json.dumps({"direct": direct, "pid": open(pid_path).read(), "files": sorted(os.listdir(f"{root}/ft"))}))
os._exit(0)
"""


def test_the_pid_file_appears_whole(tmp_path):
    """Failed on the old code: the pid file itself was opened for writing (Path.write_text)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**env, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    import json

    got = json.loads(r.stdout.splitlines()[-1])
    assert got["direct"] == [], "the pid file was written in place, not through a temporary file and a rename"
    assert got["pid"].isdigit()
    assert [f for f in got["files"] if f.startswith(".")] == []      # no temporary file left behind
