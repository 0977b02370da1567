"""The state dicts a save stages: torch's ``get_state_dict`` output for a model and its optimizer, without
re-deriving every parameter's name at each save.

``get_state_dict`` maps each parameter to its fully qualified name through the module tree at every call
(``_verify_options`` and ``_get_optim_state_dict``: ``_get_fqns`` per parameter, torch 2.13.0
distributed/checkpoint/state_dict.py:158, 275, 906-966). On the benchmark's `medium` GPT (133 parameters, CPU) that
is 8.3 ms per call against 0.3 ms for ``model.state_dict()`` and ``optimizer.state_dict()``, on the save call's
critical path: it delays the first staged byte and blocks the training loop (issue 38 item 7).

:class:`StateDicts` calls ``get_state_dict`` once and learns how its output differs from the two plain state
dicts: the model's keys renamed (a wrapper's prefix such as DDP's ``module.``), the optimizer's parameter ids
turned into those names. It reuses that only while the model's named parameters (names and objects), the
optimizer's parameters (objects, in order), the model's state-dict keys and the optimizer state's parameter ids
are exactly what they were when it learned, and only after checking, when it learned, that the plain state
dicts so renamed equal ``get_state_dict``'s output (same nested keys in the same order, the same tensors, equal
values). Anything else - sharded (DTensor) or FSDP1 models, an optimizer without state yet, a mismatch - takes
``get_state_dict`` itself, every save.
"""

from __future__ import annotations

import logging

import torch
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.tensor import DTensor

log = logging.getLogger("training.checkpoint")


class StateDicts:
    """``get_state_dict(model, optimizer)``, learned once per structure (see the module docstring)."""

    def __init__(self) -> None:
        self._key: tuple | None = None  # the structure learned
        self._renames: dict[str, str] = {}  # model state-dict key -> get_state_dict's key (where they differ)
        self._names: list[str] = []  # optimizer parameter id -> its name in get_state_dict's output
        self._tried: tuple | None = None  # the structure last learned from (not learned again while unchanged)
        self.fast = 0  # saves served without get_state_dict (for tests and the profile)

    def __call__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
        plain = _plain(model, optimizer)
        if plain is not None and self._key is not None and plain[0] == self._key:
            self.fast += 1
            return self._rename(plain[1], plain[2])
        msd, osd = get_state_dict(model, optimizer)
        self._key = None
        if plain is not None and plain[0] != self._tried:  # a structure it could not learn costs one call, no more
            self._learn(model, optimizer, msd, osd)
        return msd, osd

    def _rename(self, msd: dict, osd: dict) -> tuple[dict, dict]:
        """The two plain state dicts (fresh from ``state_dict()``) renamed in place, as ``get_state_dict`` does
        (torch 2.13.0 distributed/checkpoint/state_dict.py:503-533: a renamed key moves to the end; 939-966)."""
        for k in list(msd):
            if k in self._renames:
                msd[self._renames[k]] = msd.pop(k)
        names = self._names
        for g in osd["param_groups"]:
            g["params"] = [names[i] for i in g["params"]]
        return msd, {"state": {names[i]: v for i, v in osd["state"].items()}, "param_groups": list(osd["param_groups"])}

    def _learn(self, model, optimizer, msd: dict, osd: dict) -> None:
        """From ``get_state_dict``'s output just taken: the renames, kept only if they reproduce it."""
        plain = _plain(model, optimizer)  # after get_state_dict: it creates an optimizer's missing state
        if plain is None or not osd.get("state"):
            return
        key, pm, po = plain
        self._tried = key
        if len(pm) != len(msd) or set(osd) != {"state", "param_groups"} or len(po["param_groups"]) != len(
                osd["param_groups"]):
            return
        gone, new = [k for k in pm if k not in msd], [k for k in msd if k not in pm]  # renamed keys move to the end,
        if len(gone) != len(new):                                                     # in their order
            return
        renames = dict(zip(gone, new))
        names: dict[int, str] = {}
        for g, gg in zip(po["param_groups"], osd["param_groups"]):
            if len(g["params"]) != len(gg.get("params", ())):
                return
            names.update(zip(g["params"], gg["params"]))
        if sorted(names) != list(range(len(names))):
            return
        self._renames, self._names = renames, [names[i] for i in range(len(names))]
        try:
            same = _same(self._rename(pm, po), (msd, osd))  # pm and po are its own: renamed in place
        except (KeyError, IndexError, TypeError):
            same = False
        if same:
            self._key = key
        else:
            log.debug("checkpoint: get_state_dict's output is not the plain state dicts renamed; calling it at "
                      "every save")


def _plain(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[tuple, dict, dict] | None:
    """The structure key and the two plain state dicts; None for a model this does not serve (sharded)."""
    named = [(n, p) for n, p in model.named_parameters(remove_duplicate=False)]
    if any(isinstance(p, DTensor) for _, p in named):
        return None  # FSDP2/TP state: get_state_dict does real work there (FSDP1 fails the check in _learn)
    msd = model.state_dict()
    osd = optimizer.state_dict()
    key = (tuple((n, id(p)) for n, p in named),
           tuple(id(p) for g in optimizer.param_groups for p in g["params"]),
           tuple(msd), tuple(osd["state"]), tuple(len(g["params"]) for g in osd["param_groups"]))
    return key, msd, osd


def _same(a, b) -> bool:
    """Equal nested state: dicts with the same keys in the same order, tensors over the same memory (address,
    shape, strides, dtype, device), anything else equal and of the same type."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (type(a) is type(b) and a.device == b.device and a.dtype == b.dtype and a.shape == b.shape
                and a.stride() == b.stride() and a.data_ptr() == b.data_ptr())
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b
