"""Host and GPU-lost kernel rules on recorded lines (each fixture names the source of its format), and the
soft-lockup escalation: one short soft lockup is a warning, repeated ones are a reboot."""

from __future__ import annotations

import pytest

from openpod_core import labels as L
from node_agent.detector import SOFT_LOCKUP_REPEAT
from node_agent.findings import Action
from node_agent.kernel_match import match_kernel_line
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


def _engine_actions(text: str) -> list[tuple[str, Action]]:
    from node_agent.kernel_engine import KernelLogEngine

    engine = KernelLogEngine()
    return [(f.rule, f.action) for f in map(engine.feed, text.splitlines()) if f]


def test_a_recoverable_pcie_cper_record_does_not_replace():
    """Old code: 'event severity: recoverable' alone was host memory -> replace, whatever the section type."""
    record = "\n".join(x for x in lines("cper-pcie-uncorrected"))
    acts = _engine_actions(record)
    assert all(a is Action.NONE for _, a in acts), acts
    assert ("cper-pcie-uncorrected", Action.NONE) in acts
    # the same record with a memory section replaces; a fatal one (the host panicked) replaces
    assert ("cper-memory-uncorrected", Action.REPLACE) in _engine_actions(record.replace("PCIe error", "memory error"))
    assert ("cper-fatal", Action.REPLACE) in _engine_actions(record.replace("event severity: recoverable",
                                                                             "event severity: fatal"))


def test_a_fatal_machine_check_replaces_and_a_corrected_one_does_not():
    """Old code: 'Machine check: Processor context corrupt' matched nothing and the MCE panic only rebooted."""
    assert _engine_actions("mce: [Hardware Error]: Machine check: Processor context corrupt") == [
        ("mce-fatal", Action.REPLACE)]
    assert _engine_actions("Kernel panic - not syncing: Fatal machine check") == [("mce-fatal", Action.REPLACE)]
    bank = "[ 8812.004411] mce: [Hardware Error]: CPU 12: Machine Check Exception: 5 Bank 4: {}"
    assert _engine_actions(bank.format("be00000000800400")) == [("mce-uncorrected-fatal", Action.REPLACE)]
    assert _engine_actions(bank.format("bd80000000100134")) == [("mce-uncorrected", Action.REPLACE)]
    assert _engine_actions(bank.format("9c00004000010091").replace(" Exception", "")) == [
        ("mce-corrected", Action.NONE)]


def test_memory_failure_variants_replace_and_soft_offline_does_not():
    for line in ("Memory failure: 0x3f2c1e8: already hardware poisoned",
                 "Memory failure: 0x3f2c1e8: Sending SIGBUS to python3:4242 due to hardware memory corruption",
                 "mce: Memory error not recovered"):
        assert _engine_actions(line)[0][1] is Action.REPLACE, line
    assert _engine_actions("Memory failure: soft offline: 0x3f2c1e8: invalidated") == []


def test_gpu_init_failures_of_other_driver_branches_reboot():
    for line in ("NVRM: osInitNvMapping: *** Cannot attach gpu",
                 "NVRM: RmInitAdapter: osInitNvMapping failed, bailing out of RmInitAdapter",
                 "NVRM kgspBootstrap_GH100: Timeout waiting for lockdown release. It's also possible",
                 "NVRM: GPU0 kgspBootstrap_GH100: GSP-FMC reported an error while attempting to boot GSP: 0x12",
                 "NVRM: nvAssertFailedNoLog: Assertion failed: Failed to boot GSP @ kernel_gsp_gh100.c:913",
                 "NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) "
                 "returned from kgspInitRm(pGpu, pKernelGsp, pGspFw) @ kernel_gsp.c:2810"):
        assert _engine_actions(line)[0][1] is Action.REBOOT, line


def _host_tree(tmp_path):
    """The host's /proc/1/mounts (root and kubelet on nvme0, a data volume on nvme1) and /sys/class/nvme models."""
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "mounts").write_text(fixture_text("host", "proc-1-mounts-rw.txt")
                                                    + "/dev/nvme1n1 /data xfs rw,noatime 0 0\n")
    for ctrl, model in (("nvme0", "Amazon Elastic Block Store"), ("nvme1", "Amazon Elastic Block Store"),
                        ("nvme2", "Amazon EC2 NVMe Instance Storage")):
        d = tmp_path / "sys" / "class" / "nvme" / ctrl
        d.mkdir(parents=True)
        (d / "model").write_text(model + "              \n")  # sysfs pads the 40-byte model field with spaces
    from node_agent.config import AgentConfig

    cfg = AgentConfig()
    cfg.host.proc_root, cfg.host.sys_root = str(tmp_path / "proc"), str(tmp_path / "sys")
    return cfg


def test_a_hot_attached_ebs_data_volume_that_fails_does_not_reboot_the_node(tmp_path):
    """Old code: a data volume that failed to probe rebooted the node like its root disk."""
    c, d = make(config=_host_tree(tmp_path))
    d.on_kernel_line("nvme nvme1: Removing after probe failure status: -19", 100.0)
    d.on_kernel_line("XFS (nvme1n1): log I/O error -5", 100.1)
    assert d.metrics.findings.labels("ebs-data-volume-failed", "ebs-data-volume-failed", "none")._value.get() == 2
    assert c.get_node("n1").labels.get(L.HEALTH_STATUS) != L.HEALTH_PENDING_REBOOT
    # the root disk and an instance-store disk keep their action
    d.on_kernel_line("nvme nvme2: Removing after probe failure status: -19", 100.2)
    d.on_kernel_line("nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff", 100.3)
    assert d.metrics.findings.labels("nvme-controller-down", "nvme-controller-down", "reboot")._value.get() == 2
