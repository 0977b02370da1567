"""Ready-made ``Stateful`` pieces for :meth:`Checkpointer.register` (anything with state_dict/load_state_dict works)."""

from __future__ import annotations

import random

import torch


class RNGState:
    """This rank's random number generators: Python's ``random``, torch's CPU generator and, if present, CUDA's.

    Register it when the loop draws random numbers (dropout, sampling) so a resumed run draws the same ones.
    With sharded state each rank restores its own; with replicated (data-parallel) state a rank may restore
    another rank's snapshot, so use per-rank seeds derived from the step instead.
    """

    def state_dict(self) -> dict:
        sd = {"python": random.getstate(), "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            sd["cuda"] = torch.cuda.get_rng_state()
        return sd

    def load_state_dict(self, sd: dict) -> None:
        random.setstate(_tuples(sd["python"]))
        torch.set_rng_state(sd["torch"].cpu())
        if "cuda" in sd and torch.cuda.is_available():
            torch.cuda.set_rng_state(sd["cuda"].cpu())


class Position:
    """A plain counter (e.g. the data loader's next sample) as a component."""

    def __init__(self, value: int = 0):
        self.value = value

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, sd: dict) -> None:
        self.value = int(sd["value"])


def _tuples(x):
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x
