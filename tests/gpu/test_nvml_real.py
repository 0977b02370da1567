"""The node agent's NVML source and event watcher against the real libnvidia-ml (CPU tests use a C-ABI stand-in:
tests/node_agent/nvml_lib.py)."""

from __future__ import annotations

import re
import time

import pytest

from node_agent import gpu
from node_agent.nvml_events import NvmlEventWatcher

pytestmark = [pytest.mark.gpu, pytest.mark.nvml]


def test_snapshot_of_every_gpu():
    src = gpu.NvmlSource()
    t0 = time.perf_counter()
    gpus = src.snapshot()
    took = time.perf_counter() - t0
    assert gpus and all(re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F]", g.bus_id) for g in gpus), \
        [g.bus_id for g in gpus]
    assert all(g.uuid.startswith("GPU-") and not g.lost for g in gpus)
    assert all(g.hw_thermal_slowdown is not None and g.pcie_width for g in gpus)  # read, not unknown
    print(f"NVML snapshot of {len(gpus)} GPU(s): {took * 1e3:.1f} ms; findings: "
          f"{[f.rule for f in gpu.check_gpus(gpus, None)]}")


def test_event_watcher_registers_and_times_out():
    w = NvmlEventWatcher()
    try:
        assert w.wait(100) == []  # a healthy GPU delivers no Xid in 100 ms
    finally:
        w.close()
