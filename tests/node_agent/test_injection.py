"""No injection: text a user process shapes never makes the agent act.

A task with no privilege puts any text it likes into the kernel log: its segfault report prints the file name of
the faulting mapping (arch/x86/mm/fault.c show_signal_msg "%s%s[%d]: segfault at %lx ip %px sp %px error %lx",
then print_vma_addr " in %s[%lx+%lx]" with kbasename of the mapped file), at KERN_INFO, facility kernel. The old
detector matched its patterns anywhere in a line: a file named like an Xid 79 line rebooted the node, one named
like an uncorrectable memory error replaced it. A root process in a privileged pod can also write /dev/kmsg,
but the kernel gives such records facility LOG_USER (kernel/printk/printk.c devkmsg_write).
"""

from __future__ import annotations

import time

import pytest

from openpod_core import labels as L
from openpod_core.instance_types import get
from node_agent import logfollow
from node_agent.config import AgentConfig
from node_agent.detector import Detector
from node_agent.kernel_match import match_kernel_line
from tests.node_agent.kmsg_standin import KmsgStandin
from tests.node_agent.test_controller import (  # noqa: F401 (aws, clients, recorder: fixtures)
    Clock, aws, clients, cluster_for, controller, health, recorder)

XID79 = "NVRM: Xid (PCI:0000:53:00): 79, pid=2207, name=python3, GPU has fallen off the bus."
MEMORY = "Memory failure: 0x3f2c1e8: recovery action for dirty LRU page: Recovered"
MCE = "mce: Uncorrected hardware memory error in user-access at 3b2a65000"


def segfault(file_name: str, comm: str = "python3", pid: int = 4242) -> str:
    """The kernel's segfault report for a task whose faulting mapping is the file ``file_name``."""
    return (f"{comm}[{pid}]: segfault at 0 ip 00007f3a9c2d1000 sp 00007ffd5e1c2e40 error 14 in "
            f"{file_name}[7f3a9c2d1000+1000] likely on CPU 3 (core 3, socket 0)")


ATTACKS = [segfault(XID79), segfault(MEMORY), segfault(MCE),
           segfault(XID79, comm="NVRM: Xid (PCI"),
           f"traps: a.out[77] trap invalid opcode ip:401000 sp:7ffd5e1c2e40 error:0 in {XID79}[400000+1000]",
           f'audit: type=1400 audit(1732800000.123:88): apparmor="DENIED" name="/tmp/{MEMORY}" comm="x"',
           # any process that opens /dev/nvidiactl chooses the version string the driver prints back
           # (NVIDIA/open-gpu-kernel-modules@570.195.03:src/nvidia/arch/nvalloc/unix/src/osapi.c:1120)
           "NVRM: API mismatch: the client has the version Reset required [NV_ERR_RESET_REQUIRED] (0x00000062), but",
           "NVRM: API mismatch: the client has the version 1: Failed to boot GSP, but"]

# Every format the agent reads, wrapping one message (node_agent/logformat.py).
FORMATS = ["{m}", "[ 1234.567890] {m}", "6,881,1234567890,-;{m}", "Nov 28 21:22:09 ip-10-0-0-1 kernel: {m}",
           "2026-11-28T21:22:09+0000 ip-10-0-0-1 kernel: {m}", "kernel: {m}", "[Sat Nov 28 21:22:09 2026] {m}",
           "kern  :info  : [ 1234.567890] {m}", "10.0.0.1: kern: info: [2026-11-28T21:22:09.1Z]: {m}"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("attack", ATTACKS, ids=range(len(ATTACKS)))
def test_user_shaped_records_never_match_in_any_format(attack, fmt):
    assert match_kernel_line(fmt.format(m=attack)) is None


def test_text_after_the_printers_prefix_does_not_match():
    """Rules are anchored where the printer starts: a fault line quoted inside another message is no fault."""
    for line in (f"eth0: link up, peer says {XID79}", f"[ 1.000000] systemd[1]: {MEMORY}",
                 f"Nov 28 21:22:09 host myapp[12]: {XID79}", f"Nov 28 21:22:09 host my(app): [ 1.000000] {XID79}",
                 f"14,5,1000,-;{XID79}", f"user  :notice: [ 1.000000] {XID79}"):
        assert match_kernel_line(line) is None, line
    assert match_kernel_line(f"[ 1.000000] {XID79}").rule == "xid-79"  # the control: the real line still acts


def test_a_live_record_is_not_stripped_of_a_prefix_it_cannot_have():
    """A /dev/kmsg record's message is the kernel's own text: a task named like a log prefix (kernel/exit.c
    check_stack_usage prints "%s (%d) used greatest stack depth: ..." with the task's comm first) is not taken
    off, so what follows it never sits at a rule's anchor; offline, the same text is read as the line it is."""
    from node_agent.kernel_engine import KernelLogEngine

    for text in ("[0.0] NVRM: Xid (PCI:0000:53:00): 79, x", "kernel: Memory failure: 0x1: already hardware poisoned"):
        assert KernelLogEngine().feed(text, 1.0) is None
    assert KernelLogEngine().feed("[ 1.000000] NVRM: Xid (PCI:0000:53:00): 79, x").rule == "xid-79"


def _follow(d: Detector, records: int, timeout: float = 10.0) -> None:
    t = d.start_follower()
    d.follower.poll = 0.01
    deadline = time.monotonic() + timeout
    while (d.metrics.kernel_lines._value.get() + d.follower.user_records < records
           and time.monotonic() < deadline):
        time.sleep(0.01)
    time.sleep(0.05)
    d.follower.stop()
    t.join(5)


def test_segfault_file_name_attack_on_the_live_path_neither_reboots_nor_replaces(
        tmp_path, monkeypatch, aws, moto_endpoint, recorder):
    """Follower (/dev/kmsg stand-in) -> detector -> controller (moto): the attack records change nothing; a real
    Xid 79 record afterwards still reboots (the path is live)."""
    make, _, asg = aws
    _, ids = make(2)
    c, clock = cluster_for(ids), Clock()
    kmsg = KmsgStandin()
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    for i, text in enumerate(ATTACKS):
        kmsg.printk(text, ts_usec=1_000_000 + i, prio=6)   # facility kernel, KERN_INFO: as the kernel prints them
    kmsg.printk(XID79, ts_usec=2_000_000, prio=14)          # written to /dev/kmsg by root in a pod: LOG_USER
    kmsg.printk(MEMORY, ts_usec=2_000_001, prio=12)
    cfg = AgentConfig()
    (tmp_path / "boot_id").write_text("boot-a\n")
    cfg.kernel_log.state_path, cfg.kernel_log.boot_id_path = str(tmp_path / "k.json"), str(tmp_path / "boot_id")
    d = Detector(c, "node-0", get("p5.48xlarge"), cfg)
    _follow(d, len(ATTACKS) + 2)
    ctl = controller(c, moto_endpoint, clock)
    ctl.reconcile_once()
    assert recorder() == [], "an injected record rebooted the instance"
    assert set(health(asg, ids).values()) == {"HEALTHY"}, "an injected record replaced the instance"
    assert c.get_node("node-0").labels[L.HEALTH_STATUS] == L.HEALTH_SCHEDULABLE
    assert d.follower.user_records == 2

    kmsg.printk(XID79, ts_usec=3_000_000, prio=3)           # the kernel's own Xid 79
    d2 = Detector(c, "node-0", get("p5.48xlarge"), cfg)
    _follow(d2, 1)
    ctl.reconcile_once()
    assert recorder() == [ids[0]]


def test_on_a_neuron_node_any_pod_can_print_a_kernel_record_so_vendor_lines_are_claims(tmp_path, monkeypatch):
    """The Neuron driver prints any string a process hands its printk ioctl (aws-neuron/aws-neuron-driver@fca19f7:
    neuron_cdev.c:2003-2022, no capability, device opened write-only): facility kernel, at the message start.
    NEURON_HW_ERR lines come only that way (the runtime writes them), so they are recorded, not acted on (the
    sysfs ECC counters and the deep check decide); NVIDIA driver lines on a Neuron node are nobody's. Old code:
    the forged HBM line replaced the node, the forged Xid 79 rebooted it."""
    from openpod_core.instance_types import get as itype

    kmsg = KmsgStandin()
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    kmsg.printk("NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR instance-id=i-0 hostname=h nd-id=7 nc-id=0 serial-num=1 "
                "action=TERMINATE_INSTANCE", ts_usec=1_000_000, prio=3)
    kmsg.printk(XID79, ts_usec=1_000_001, prio=3)
    c = cluster_for(["i-0abc"])
    cfg = AgentConfig()
    (tmp_path / "boot_id").write_text("boot-a\n")
    cfg.kernel_log.state_path, cfg.kernel_log.boot_id_path = str(tmp_path / "k.json"), str(tmp_path / "boot_id")
    d = Detector(c, "node-0", itype("trn2.48xlarge"), cfg)
    _follow(d, 2)
    assert c.get_node("node-0").labels[L.HEALTH_STATUS] == L.HEALTH_SCHEDULABLE
    recorded = d.metrics.findings.labels("neuron-hbm-uncorrectable-error", "neuron-hbm-uncorrectable", "none")
    assert recorded._value.get() == 1
