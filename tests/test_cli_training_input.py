"""Issue 29: `python -m training run` refuses bad paths, a busy metrics port and a corrupt data set in one line,
before any worker starts, and writes nothing."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from training.cli import main

BASE = ["run", "--steps", "1", "--nproc-per-node", "1", "--model", "tiny"]


def _run(args, cwd, monkeypatch):
    monkeypatch.chdir(cwd)
    r = CliRunner().invoke(main, [*BASE, *args])
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.stderr


def test_an_empty_checkpoint_dir_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    err = _run(["--checkpoint-dir", ""], tmp_path, monkeypatch)
    assert "--checkpoint-dir: empty" in err
    assert list(tmp_path.iterdir()) == []


def test_a_busy_metrics_port_is_refused(tmp_path, monkeypatch):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        err = _run(["--checkpoint-dir", str(tmp_path / "ck"), "--metrics-port", str(port)], tmp_path, monkeypatch)
    assert f"--metrics-port: {port} cannot be bound" in err
    err = _run(["--checkpoint-dir", str(tmp_path / "ck"), "--metrics-port", "70000"], tmp_path, monkeypatch)
    assert "--metrics-port: must be 1..65535" in err


@pytest.mark.parametrize("damage", ["truncate", "index"])
def test_a_corrupt_data_set_is_refused(tmp_path, monkeypatch, damage):
    from training.config import MODELS, DataConfig
    from training.data import ensure_dataset

    m = MODELS["tiny"]
    data = tmp_path / "data"
    ensure_dataset(data, seed=0, num_samples=512, samples_per_shard=DataConfig(str(data)).samples_per_shard,
                   seq_len=m.seq_len, vocab_size=m.vocab_size)
    if damage == "truncate":
        shard = sorted(data.glob("shard_*.bin"))[1]
        shard.write_bytes(shard.read_bytes()[:100])
    else:
        index = json.loads((data / "index.json").read_text())
        (data / "index.json").write_text(json.dumps({**index, "shards": 7}))
    args = ["--checkpoint-dir", str(tmp_path / "ck"), "--data-dir", str(data), "--num-samples", "512"]
    err = _run(args, tmp_path, monkeypatch)
    assert "--data-dir:" in err and "Traceback" not in err
