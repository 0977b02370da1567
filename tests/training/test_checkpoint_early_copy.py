"""Issue 38 item 7: a save after the first starts its deferred staging copy before it builds the state dict (the
last save's copies, from the optimizer's live tensors: ``HostStager.repeat``), and keeps it only when the new
state defers exactly those copies."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from training.checkpoint import Checkpointer, hashing, state_sha256
from training.checkpoint.staging import HostStager
from training.config import CheckpointConfig, TierConfig
from tests.training.test_checkpoint import make_model, train


def _state(ts):
    return {"model": {f"w{i}": t for i, t in enumerate(ts)}}


def _live(ts):
    return {t.data_ptr(): t for t in ts}


def test_a_repeated_copy_is_kept_when_the_state_defers_the_same_copies_and_stages_the_new_values():
    stager = HostStager(pin=False)
    ts = [torch.randn(64, 32), torch.randn(1000), torch.randn(7)]
    stager.copy(stager.plan(_state(ts), defer=lambda t: True)[1])
    for t in ts:
        t.mul_(3).add_(1)  # an optimizer step, in place
    with ThreadPoolExecutor(1) as pool:
        early = stager.repeat(_live(ts), lambda *a: pool.submit(stager.copy, *a))
        assert early is not None
        staged, pending = stager.plan(_state(ts), defer=lambda t: True, early=early)
        assert stager.landing is early.landing  # kept: no second copy
        early.future.result()
    assert all(torch.equal(staged["model"][f"w{i}"], t) for i, t in enumerate(ts))


def test_a_repeated_copy_is_dropped_when_the_state_defers_other_memory_and_the_new_copy_stages_it():
    """Same paths, shapes and dtypes (the buffer is reused), but one tensor now lies elsewhere: the early copy
    read the old one; it is waited for and the plan's own copy stages the new one."""
    stager = HostStager(pin=False)
    ts = [torch.randn(64, 32), torch.randn(1000)]
    stager.copy(stager.plan(_state(ts), defer=lambda t: True)[1])
    moved = [ts[0], torch.randn(1000)]
    with ThreadPoolExecutor(1) as pool:
        early = stager.repeat(_live(ts), lambda *a: pool.submit(stager.copy, *a))
        assert early is not None
        staged, pending = stager.plan(_state(moved), defer=lambda t: True, early=early)
        assert stager.landing is not early.landing and early.future.done()
    stager.copy(pending)
    assert torch.equal(staged["model"]["w1"], moved[1]) and not torch.equal(staged["model"]["w1"], ts[1])


def test_no_copy_is_repeated_when_a_source_is_gone_or_reshaped():
    stager = HostStager(pin=False)
    ts = [torch.randn(64, 32), torch.randn(1000)]
    stager.copy(stager.plan(_state(ts), defer=lambda t: True)[1])
    assert stager.repeat({ts[0].data_ptr(): ts[0]}, _no_start) is None  # ts[1] is no longer the optimizer's
    assert stager.repeat({ts[0].data_ptr(): ts[0], ts[1].data_ptr(): ts[1].view(10, 100)}, _no_start) is None
    assert HostStager(pin=False).repeat(_live(ts), _no_start) is None  # nothing was deferred yet


def _no_start(*a):
    raise AssertionError("no copy may start")


def test_a_save_after_the_first_copies_before_it_builds_the_state_dict_and_restores_exactly(tmp_path):
    """Failed on the old code: every save built the state dict (``get_state_dict``, 4-6 ms on `small` before the
    first byte could land) before its copy started."""
    cfg = CheckpointConfig(every=1, peer_replication=False, tiers=[TierConfig("nvme", str(tmp_path / "nvme"), keep=2)])
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scr")
    model, opt = make_model()
    copying = threading.Event()
    real_copy, real_state = ck.stager.copy, ck.state
    seen = []

    def copy(*a):
        copying.set()
        return real_copy(*a)

    def state(*a):
        # the second save's copy began first (bounded wait: the old code starts it only after this returns)
        seen.append(copying.wait(10) if seen else copying.is_set())
        return real_state(*a)

    ck.stager.copy, ck.state = copy, state
    try:
        for step in (1, 2):
            train(model, opt)
            copying.clear()
            ck.save(step, model, opt)
            ck.flush()
        want = state_sha256(real_state(model, opt))
    finally:
        ck.close()
    assert seen == [False, True], "the second save built its state dict before its copy began"
    model2, opt2 = make_model(seed=5)
    ck2 = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scr")
    try:
        assert ck2.restore(model2, opt2).step == 2
        assert state_sha256(ck2.state(model2, opt2)) == want
    finally:
        ck2.close()


def _checkpointer(tmp_path):
    cfg = CheckpointConfig(every=1, peer_replication=False, tiers=[TierConfig("nvme", str(tmp_path / "nvme"), keep=3)])
    return Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scr")


def test_a_save_after_the_first_writes_its_data_file_before_it_builds_the_state_dict(tmp_path, monkeypatch):
    """Failed on the old code: the writer opened the step's files only once the state dict was built and staged."""
    written = threading.Event()
    real_write = hashing._File.write

    def write(self, mv, *stable):
        if self.dest.kind == "nvme" and self.fh.name.endswith(".distcp"):
            written.set()
        return real_write(self, mv, *stable)

    monkeypatch.setattr(hashing._File, "write", write)
    ck = _checkpointer(tmp_path)
    model, opt = make_model()
    real_state, seen = ck.state, []

    def state(*a):
        seen.append(written.wait(10) if seen else written.is_set())  # bounded: the old code writes after this
        return real_state(*a)

    ck.state = state
    try:
        for step in (1, 2):
            train(model, opt)
            written.clear()
            ck.save(step, model, opt)
            ck.flush()
        assert ck.stats.committed == 2 and ck.stats.failed == 0, ck.stats
    finally:
        ck.close()
    assert seen == [False, True], "the second save wrote no byte before building its state dict"


def test_a_save_failing_after_its_files_were_opened_early_leaves_the_next_save_exact(tmp_path):
    ck = _checkpointer(tmp_path)
    model, opt = make_model()
    real_state = ck.state
    try:
        train(model, opt)
        ck.save(1, model, opt)
        ck.flush()
        train(model, opt)
        ck.state = lambda *a: (_ for _ in ()).throw(RuntimeError("state dict failed"))
        with pytest.raises(RuntimeError, match="state dict failed"):
            ck.save(2, model, opt)  # its copy and its files had started
        ck.state = real_state
        train(model, opt)
        ck.save(3, model, opt)
        ck.flush()
        want = state_sha256(real_state(model, opt))
        assert ck.stats.committed == 2 and ck.stats.failed == 0, ck.stats
        assert sorted(ck.tiers[0].index()) == [1, 3]
    finally:
        ck.close()
    model2, opt2 = make_model(seed=5)
    ck2 = _checkpointer(tmp_path)
    try:
        assert ck2.restore(model2, opt2).step == 3
        assert state_sha256(ck2.state(model2, opt2)) == want
    finally:
        ck2.close()


def test_a_failed_re_save_of_a_committed_step_leaves_its_copy(tmp_path):
    """Opening a step's files early replaces its directory: never for a step already committed (a re-save whose
    state dict then fails would have lost it)."""
    ck = _checkpointer(tmp_path)
    model, opt = make_model()
    try:
        train(model, opt)
        ck.save(1, model, opt)
        ck.flush()
        want = state_sha256(ck.state(model, opt))
        real_state = ck.state
        ck.state = lambda *a: (_ for _ in ()).throw(RuntimeError("state dict failed"))
        with pytest.raises(RuntimeError, match="state dict failed"):
            ck.save(1, model, opt)
        ck.state = real_state
    finally:
        ck.close()
    model2, opt2 = make_model(seed=5)
    ck2 = _checkpointer(tmp_path)
    try:
        assert ck2.restore(model2, opt2).step == 1
        assert state_sha256(ck2.state(model2, opt2)) == want
    finally:
        ck2.close()
