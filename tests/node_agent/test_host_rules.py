"""Host and GPU-lost kernel rules on recorded lines (each fixture names the source of its format), and the
soft-lockup escalation: one short soft lockup is a warning, repeated ones are a reboot."""

from __future__ import annotations

import pytest

from openpod_core import labels as L
from node_agent.detector import SOFT_LOCKUP_REPEAT
from node_agent.findings import Action
from node_agent.rules import match_kernel_line
from tests.node_agent.conftest import fixture_text
from tests.node_agent.test_detector import make


def lines(name):
    return [x for x in fixture_text("kernel", f"{name}.log").splitlines() if x and not x.startswith("#")]


@pytest.mark.parametrize("name,action,devices", [
    ("gpu-fallen-off-bus", Action.REBOOT, {"", "0000:b3:00.0", "0000:53:00.0"}),
    ("pcie-aer-fatal", Action.REBOOT, {"0000:40:01.1", "0000:41:00.0"}),
    ("pcie-aer-recovery-failed", Action.REBOOT, {"0000:00:00.0", "0000:01:00.0"}),  # + no error_detected
    ("pcie-aer-nonfatal", Action.NONE, {"0000:00:00.0"}),
    ("hard-lockup", Action.REBOOT, {"6", "0"}),
    ("kernel-panic", Action.REBOOT, {""}),
    ("kernel-oops", Action.REBOOT, {""}),
    ("block-io-error", Action.NONE, {"nvme0n1", "nvme0n1p1"}),  # one line: watched; repeats act
])
def test_every_recorded_line_of_a_host_rule_matches(name, action, devices):
    found = [match_kernel_line(x) for x in lines(name)]
    found = [f for f in found if f and f.rule == name]
    assert found and {f.action for f in found} == {action}
    assert {f.device for f in found} <= devices


def test_a_gpu_lost_without_any_xid_is_a_reboot():
    """Before: the driver's 'fallen off the bus' lines matched no rule unless an Xid 79 line came too."""
    found = {match_kernel_line(x).rule for x in lines("gpu-fallen-off-bus")
             if match_kernel_line(x) is not None}
    assert found == {"gpu-fallen-off-bus"}


def test_old_and_new_filesystem_shutdown_wordings():
    rules = [match_kernel_line(x) for x in lines("fs-remount-ro")]
    assert [f.rule for f in rules] == ["fs-error", "fs-remount-ro", "fs-remount-ro"]
    assert rules[2].device == "dm-0" and rules[2].action is Action.REBOOT


def test_new_mce_wording_is_uncorrectable_memory():
    f = match_kernel_line(lines("memory-uncorrectable")[-1])
    assert (f.rule, f.action) == ("memory-uncorrectable", Action.REPLACE)


def test_one_soft_lockup_is_a_warning_repeated_ones_reboot():
    c, d = make()
    line = lines("soft-lockup")[0]
    d.on_kernel_line(line)
    assert match_kernel_line(line).action is Action.NONE
    assert c.get_node("n1").labels.get(L.HEALTH_STATUS) != L.HEALTH_PENDING_REBOOT
    for _ in range(SOFT_LOCKUP_REPEAT - 1):
        d.on_kernel_line(line)
    assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REBOOT
    assert d.metrics.findings.labels("soft-lockup-repeated", "cpu-soft-lockup-repeated", "reboot")._value.get() == 1




def test_aer_in_mainline_and_older_wordings():
    """Linux 6.x "Uncorrectable (Fatal) error message received from", 4.x "Uncorrected (Fatal) error received:",
    "device recovery failed" / "Device recovery failed", a driver without AER callbacks; corrected errors are
    nothing. Lines from access.redhat.com/solutions/7128107 and /56302 (tuning half of the corpus)."""
    acts = {
        "kernel: pcieport 0000:00:1b.2: AER: Uncorrectable (Fatal) error message received from 0000:03:04.0": "reboot",
        "kernel: pcieport 0000:03:04.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, "
        "(Receiver ID)": "reboot",
        "kernel: pci 0000:05:00.0: AER: can't recover (no error_detected callback)": "reboot",
        "kernel: pcieport 0000:03:04.0: AER: device recovery failed": "reboot",
        "pcieport 0000:00:03.0: AER: Device recovery failed": "reboot",
        "Feb  5 15:41:33 hostname kernel: pcieport 10003:00:00.0: AER: Multiple Corrected error received: id=ae00":
            "none",
        "kernel: pcieport 0000:00:1b.2: AER: Correctable error received from 0000:03:04.0": "none",
    }
    for line, action in acts.items():
        f = match_kernel_line(line)
        assert (f.action.value if f else "none") == action, line
