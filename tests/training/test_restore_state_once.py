"""restore() builds the model/optimizer state dict (torch's get_state_dict) once, whatever number of copies it
tries: every load fills the same dict. Before, it built one for the layout and another per copy it loaded."""

from __future__ import annotations

import json
import re

from tests.training.test_checkpoint import checkpointer, make_model, saved, tiers
from training.checkpoint import state_sha256
from training.checkpoint import fast_state
from training.checkpoint.storage import describe_dir


def _counting(monkeypatch) -> list:
    calls = []
    real = fast_state.get_state_dict  # the checkpointer's state dicts come through fast_state.StateDicts

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(fast_state, "get_state_dict", counted)
    return calls


def _restore(tmp_path, cfg, calls):
    model, opt = make_model(seed=99)
    ck = checkpointer(tmp_path, cfg)
    calls.clear()
    info = ck.restore(model, opt)
    n = len(calls)
    h = state_sha256(ck.state(model, opt))
    ck.close()
    return info, n, h


def test_restore_builds_the_state_dict_once(tmp_path, monkeypatch):
    """Failed on the old code: 2 calls (the layout, then the load)."""
    cfg = tiers(tmp_path)
    _, want = saved(tmp_path, cfg, steps=(2,))
    calls = _counting(monkeypatch)
    info, n, h = _restore(tmp_path, cfg, calls)
    assert info.step == 2 and info.source.startswith("memory:") and h == want
    assert n == 1


def test_a_copy_that_fails_to_load_and_the_next_one_share_the_state_dict(tmp_path, monkeypatch, caplog):
    """Node memory's copy verifies against its marker but DCP cannot read it (truncated before the marker was
    written): the load fails part-way and the NVMe copy is loaded into the same state dict, bit-exactly. Failed on
    the old code: 3 calls (the layout and one per copy tried)."""
    cfg = tiers(tmp_path)
    _, want = saved(tmp_path, cfg, steps=(2,))
    snap = tmp_path / "shm/n0/step_000000002/rank_00000"
    data = snap / "__0_0.distcp"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 3])
    marker = tmp_path / "shm/n0/step_000000002/rank_00000.commit.json"
    m = json.loads(marker.read_text())
    m["files"] = describe_dir(snap)
    marker.write_text(json.dumps(m))
    calls = _counting(monkeypatch)
    info, n, h = _restore(tmp_path, cfg, calls)
    assert info.step == 2 and info.source.startswith("nvme:"), info
    assert re.search(r"skipping (corrupt )?checkpoint memory:", caplog.text)  # (raw layout: a CorruptCheckpoint)
    assert h == want
    assert n == 1
