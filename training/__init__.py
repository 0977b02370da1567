"""openpod training runtime: async tiered checkpoints, peer recovery, elastic data parallelism, goodput.

Entry points: ``python -m training run`` (reference trainer), :mod:`training.runtime` (the library).
"""
