"""NVML Xid / ECC events next to the kernel log: the same fault is raised when the kmsg line never arrives.

No GPU exists here: the real nvidia-ml-py (13.615.71) runs over a libnvidia-ml stand-in at the C ABI
(tests/node_agent/nvml_lib.py).
"""

from __future__ import annotations

import threading
import time

from openpod_core import labels as L
from node_agent.findings import Action
from node_agent.nvml_events import NvmlEventWatcher, xid_event_finding
from tests.node_agent.test_detector import P5, make
from tests.node_agent.nvml_lib import LibNvml, loaded


def test_xid_events_become_the_catalog_findings():
    import pynvml as p

    lib = LibNvml(events=[(3, p.nvmlEventTypeXidCriticalError, 79), (1, p.nvmlEventTypeXidCriticalError, 145),
                          (2, p.nvmlEventTypeXidCriticalError, 4242), (5, p.nvmlEventTypeDoubleBitEccError, 0),
                          (0, p.nvmlEventTypeXidCriticalError, 13)])
    with loaded(lib) as nvml:
        w = NvmlEventWatcher(nvml=nvml)
        assert w.registered == 8 and set(lib.registered.values()) == {
            p.nvmlEventTypeXidCriticalError | p.nvmlEventTypeDoubleBitEccError}
        _check_events(w)
        w.close()
    assert lib.calls[-1] == "nvmlEventSetFree"


def _check_events(w):
    (f,) = w.wait(10)
    assert (f.rule, f.action, f.device) == ("xid-79", Action.REBOOT, "00000000:1B:00.0")
    assert "NVML event: Xid 79" in f.evidence
    assert w.wait(10) == []  # NVLink5 Xid: Fatal or Nonfatal is in the kernel text only
    (f,) = w.wait(10)
    assert f.rule == "xid-unlisted" and f.action is Action.NONE  # the documented default for new codes
    (f,) = w.wait(10)
    assert f.rule == "gpu-dbe" and f.action is Action.REBOOT and f.device == "00000000:1D:00.0"
    (f,) = w.wait(10)
    assert f.rule == "xid-13" and f.action is Action.NONE  # RESTART_APP: no node action
    assert w.wait(10) == []  # timeout


def test_text_dependent_codes_are_left_to_the_kernel_log():
    assert xid_event_finding(154, "x") is None and xid_event_finding(150, "x") is None
    assert xid_event_finding(79, "x").rule == "xid-79"


def test_an_event_marks_the_node_when_the_kernel_line_never_came():
    """Old code listened to the kernel log only: an Xid 79 whose kmsg line was rate-limited away left the node
    schedulable until some poll happened to notice a symptom."""
    import pynvml as p

    with loaded(LibNvml(events=[(3, p.nvmlEventTypeXidCriticalError, 79)])) as nvml:
        c, d = make(P5, nvml_events_factory=lambda: NvmlEventWatcher(nvml=nvml))
        d.config.kernel_log.enabled = False
        t = d.start_nvml_events()
        try:
            deadline = time.time() + 10
            while time.time() < deadline and L.HEALTH_STATUS not in c.get_node("n1").labels:
                time.sleep(0.05)
        finally:
            d.stop_event.set()
            t.join(5)
    n = c.get_node("n1")
    assert n.labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REBOOT and n.has_taint(L.UNHEALTHY_TAINT)
    assert [e.reason for e in c.events] == ["GpuFellOffBus"]


def test_no_nvml_no_event_thread():
    from node_agent.gpu import ToolUnavailable

    def missing():
        raise ToolUnavailable("NVML events unavailable: NVML Shared Library Not Found")

    _, d = make(P5, nvml_events_factory=missing)
    before = threading.active_count()
    assert d.start_nvml_events() is None and threading.active_count() == before
