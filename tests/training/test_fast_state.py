"""Issue 38 item 7: a save's state dicts are torch's ``get_state_dict`` output, its names learned once per
structure (``fast_state.StateDicts``) instead of re-derived through the module tree at every save."""

import torch
import torch.distributed.checkpoint.state_dict as dcp_state_dict
from torch import nn

from training.checkpoint import Checkpointer, fast_state, state_sha256
from training.checkpoint.fast_state import StateDicts, _same
from training.config import CheckpointConfig, TierConfig
from tests.training.test_checkpoint import make_model, train


def _expected(model, opt):
    return dcp_state_dict.get_state_dict(model, opt)


def _counting(monkeypatch) -> list:
    """Counts get_state_dict's calls (through its option check, looked up at call time)."""
    calls = []
    real = dcp_state_dict._verify_options

    def verify(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(dcp_state_dict, "_verify_options", verify)
    return calls


def test_saves_take_get_state_dict_once_and_stage_what_it_returns(tmp_path, monkeypatch):
    """Failed on the old code: every save called get_state_dict (3 calls in 3 saves; 8.3 of its 8.6 ms on
    `medium` naming parameters)."""
    cfg = CheckpointConfig(every=1, peer_replication=False, tiers=[TierConfig("nvme", str(tmp_path / "nvme"), keep=3)])
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scr")
    model, opt = make_model()
    calls = _counting(monkeypatch)
    try:
        for step in (1, 2, 3):
            train(model, opt)
            ck.save(step, model, opt)
            ck.flush()
        n = len(calls)
        want = state_sha256({"model": _expected(model, opt)[0], "optim": _expected(model, opt)[1]})
    finally:
        ck.close()
    assert n == 1, f"get_state_dict called {n} times in 3 saves"
    model2, opt2 = make_model(seed=5)
    ck2 = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "scr")
    try:
        assert ck2.restore(model2, opt2).step == 3
        got = ck2.state(model2, opt2)
        assert state_sha256({"model": got["model"], "optim": got["optim"]}) == want
    finally:
        ck2.close()


def test_the_state_dicts_equal_get_state_dicts_after_each_step_and_before_the_first():
    model, opt = make_model()
    sd = StateDicts()
    for i in range(3):  # the first before any step: get_state_dict creates the optimizer's state
        got = sd(model, opt)
        assert _same(got, _expected(model, opt)), i
        train(model, opt)
    assert sd.fast == 2


def test_a_wrapped_models_prefix_is_renamed_as_get_state_dict_does():
    """torch.compile's wrapper (lazy: nothing compiles here) prefixes every key with ``_orig_mod.``; get_state_dict
    strips it, and so does the learned rename."""
    model, _ = make_model()
    wrapped = torch.compile(model)
    opt = torch.optim.AdamW(wrapped.parameters(), lr=1e-3)
    train(model, opt)
    assert any(k.startswith("_orig_mod.") for k in wrapped.state_dict())
    sd = StateDicts()
    for _ in range(2):
        got = sd(wrapped, opt)
        assert _same(got, _expected(wrapped, opt)) and not any(k.startswith("_orig_mod.") for k in got[0])
    assert sd.fast == 1


def test_a_partly_wrapped_models_keys_move_where_get_state_dict_moves_them():
    """A compiled submodule: only its keys are renamed, and get_state_dict moves each renamed key to the end."""
    model, opt = make_model()
    train(model, opt)
    model.blocks[0] = torch.compile(model.blocks[0])  # lazy: nothing compiles (no forward after this)
    sd = StateDicts()
    sd(model, opt)
    got = sd(model, opt)
    want = _expected(model, opt)
    assert sd.fast == 1 and list(got[0]) == list(want[0]) and _same(got, want)
    assert list(want[0])[-1].startswith("blocks.0.") and list(want[0])[0] == "tok.weight"


def test_a_changed_structure_is_learned_again():
    model, opt = make_model()
    train(model, opt)
    sd = StateDicts()
    sd(model, opt)
    model.extra = nn.Parameter(torch.randn(3))  # a new parameter, in a new group
    opt.add_param_group({"params": [model.extra], "lr": 1e-2})
    train(model, opt)
    got = sd(model, opt)
    assert sd.fast == 0 and _same(got, _expected(model, opt)) and "extra" in got[0]
    with torch.no_grad():
        model.extra = nn.Parameter(model.extra * 2)  # the same name, another object
    opt.param_groups[1]["params"] = [model.extra]
    got = sd(model, opt)
    assert sd.fast == 0 and _same(got, _expected(model, opt))
    assert _same(sd(model, opt), _expected(model, opt)) and sd.fast == 1


def test_output_the_renames_do_not_reproduce_is_never_served(monkeypatch):
    """Where get_state_dict's output is not the plain state dicts renamed (FSDP1's flat parameters, an option,
    a torch that changes it), every save takes get_state_dict itself."""
    model, opt = make_model()
    train(model, opt)

    def other(m, o):
        msd, osd = dcp_state_dict.get_state_dict(m, o)
        return {k: v for k, v in msd.items() if not k.endswith("bias")}, osd

    monkeypatch.setattr(fast_state, "get_state_dict", other)
    plains = []
    real_plain = fast_state._plain
    monkeypatch.setattr(fast_state, "_plain", lambda *a: plains.append(1) or real_plain(*a))
    sd = StateDicts()
    for _ in range(3):
        assert _same(sd(model, opt), other(model, opt))
    assert sd.fast == 0
    assert len(plains) == 4, "an unchanged structure it could not learn was learned again at every save"
