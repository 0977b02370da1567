"""The kernel-log follower: /dev/kmsg from the first record, restarts and new boots, journald, EPIPE."""

from __future__ import annotations

import json
import re
import sys
import threading
import time

import pytest

from openpod_core import labels as L
from openpod_core.instance_types import get
from node_agent import logfollow
from node_agent.config import AgentConfig
from node_agent.detector import Detector
from node_agent.kube import InMemoryCluster, Node
from tests.node_agent.conftest import FIXTURES
from tests.node_agent.kmsg_standin import KmsgStandin

XID79 = "NVRM: Xid (PCI:0000:53:00): 79, pid=2207, name=python3, GPU has fallen off the bus."
XID64 = ("NVRM: Xid (PCI:0000:0f:00): 64, pid=57530, Row Remapper Error: (0x00000005d28c03a0) - All reserved rows "
         "for bank are remapped")
NOISE = "IPv6: ADDRCONF(NETDEV_CHANGE): eth1: link becomes ready"


def recorded_boot() -> list[tuple[float, str]]:
    """Every line of the recorded kernel fixtures, with its dmesg time, as one boot's buffer."""
    out = []
    for p in sorted((FIXTURES / "kernel").glob("*.log")):
        for line in (x for x in p.read_text().splitlines() if x and not x.startswith("#")):
            m = re.match(r"\[\s*(\d+\.\d+)\] (.*)", line)
            out.append((float(m.group(1)), m.group(2)) if m else (0.0, line))
    return out


def detector(tmp_path, boot_id="boot-a", state=True):
    c = InMemoryCluster()
    c.add_node(Node("n1", labels={L.INSTANCE_TYPE: "p5.48xlarge"}))
    cfg = AgentConfig()
    (tmp_path / "boot_id").write_text(boot_id + "\n")
    if state and "state_path" in type(cfg.kernel_log).model_fields:  # (so the old code fails on behaviour)
        cfg.kernel_log.state_path = str(tmp_path / "kernel-log.json")
        cfg.kernel_log.boot_id_path = str(tmp_path / "boot_id")
    return c, Detector(c, "n1", get("p5.48xlarge"), cfg)


def follow_until(d: Detector, lines: int, timeout: float = 10.0) -> None:
    """Run the detector's follower until it has handled ``lines`` kernel lines (or the timeout), then stop it."""
    t = d.start_follower()
    d.follower.poll = 0.01
    deadline = time.monotonic() + timeout
    while d.metrics.kernel_lines._value.get() < lines and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # anything beyond the expected lines would show now
    d.follower.stop()
    t.join(5)


def acted(d: Detector, rule: str, fault: str, action: str) -> float:
    return d.metrics.findings.labels(rule, fault, action)._value.get()


def test_a_buffer_written_before_start_reaches_the_rules(tmp_path, monkeypatch):
    """Faults logged at boot, before the agent runs, are acted on (the old follower seeked to the end: 0 lines)."""
    kmsg = KmsgStandin()
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    boot = recorded_boot()
    for ts, msg in boot:
        kmsg.printk(msg, ts_usec=int(ts * 1e6))
    c, d = detector(tmp_path, state=False)
    follow_until(d, len(boot))
    assert d.metrics.kernel_lines._value.get() == len(boot)
    assert acted(d, "xid-79", "gpu-fell-off-bus", "reboot") == 1
    assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT  # xid-64 and NEURON_HW_ERR


def test_a_restart_mid_stream_acts_once_and_sees_what_came_while_down(tmp_path, monkeypatch):
    kmsg = KmsgStandin()
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    for i in range(20):
        kmsg.printk(NOISE, ts_usec=1_000_000 + i)
    kmsg.printk(XID79, ts_usec=2_000_000)
    _, d1 = detector(tmp_path)
    follow_until(d1, 21)
    assert acted(d1, "xid-79", "gpu-fell-off-bus", "reboot") == 1
    saved = json.loads((tmp_path / "kernel-log.json").read_text())
    assert saved == {"boot_id": "boot-a", "seq": 20}
    # The pod restarts; meanwhile the kernel logs more, including a new fault.
    kmsg.printk(NOISE, ts_usec=3_000_000)
    kmsg.printk(XID64, ts_usec=3_000_001)
    _, d2 = detector(tmp_path)
    follow_until(d2, 2)
    assert d2.metrics.kernel_lines._value.get() == 2                 # only what came after seq 20
    assert acted(d2, "xid-79", "gpu-fell-off-bus", "reboot") == 0    # not acted on twice
    assert acted(d2, "xid-64", "gpu-row-remap-failure", "replace") == 1
    assert json.loads((tmp_path / "kernel-log.json").read_text())["seq"] == 22


def test_a_new_boot_reads_from_its_first_record(tmp_path, monkeypatch):
    (tmp_path / "kernel-log.json").write_text(json.dumps({"boot_id": "boot-a", "seq": 500}))
    kmsg = KmsgStandin()  # the new boot's buffer starts at seq 0 again
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    kmsg.printk(NOISE, ts_usec=1_000_000)
    kmsg.printk(XID79, ts_usec=2_100_000)
    _, d = detector(tmp_path, boot_id="boot-b")
    follow_until(d, 2)
    assert acted(d, "xid-79", "gpu-fell-off-bus", "reboot") == 1
    assert json.loads((tmp_path / "kernel-log.json").read_text()) == {"boot_id": "boot-b", "seq": 1}


def test_overwritten_records_epipe_then_continue_and_are_counted(tmp_path, monkeypatch):
    kmsg = KmsgStandin(capacity=5)
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    seen: list[str] = []
    reads = 0
    real_read = kmsg.read

    def read(fd, n):  # the ring wraps under the reader after its second record
        nonlocal reads
        reads += 1
        if reads == 3:
            for i in range(8):
                kmsg.printk(f"flood {i}", ts_usec=10 + i)
        return real_read(fd, n)

    kmsg.read = read
    for i in range(5):
        kmsg.printk(f"early {i}", ts_usec=i)
    f = logfollow.LogFollower("/dev/kmsg", lambda m, ts: seen.append(m), poll_seconds=0.01,
                              boot_id_path=str(_boot_id(tmp_path)))
    t = threading.Thread(target=f.run)
    t.start()
    deadline = time.monotonic() + 5
    while len(seen) < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    f.stop()
    t.join(5)
    # first two read, then EPIPE: the reader resumes at the first record still there (flood 3..7)
    assert seen == ["early 0", "early 1", "flood 3", "flood 4", "flood 5", "flood 6", "flood 7"]
    assert f.lost == 6


def test_continuation_lines_are_not_messages(tmp_path, monkeypatch):
    kmsg = KmsgStandin()
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    kmsg.printk(XID79, ts_usec=5, dict_lines=("SUBSYSTEM=pci", "DEVICE=+pci:0000:53:00.0"))
    seen = []
    f = logfollow.LogFollower("/dev/kmsg", lambda m, ts: seen.append((m, ts)), poll_seconds=0.01,
                              boot_id_path=str(_boot_id(tmp_path)))
    t = threading.Thread(target=f.run)
    t.start()
    while not seen:
        time.sleep(0.01)
    f.stop()
    t.join(5)
    assert seen == [(XID79, 5e-6)]


def _boot_id(tmp_path):
    p = tmp_path / "boot_id"
    p.write_text("b\n")
    return p


FAKE_JOURNALCTL = '''
import json, sys, time
entries = [json.loads(l) for l in open(sys.argv[1])]
after = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--after-cursor=")]
if after:
    entries = entries[[e["__CURSOR"] for e in entries].index(after[0]) + 1:]
for e in entries:
    print(json.dumps(e), flush=True)
time.sleep(60)   # --follow
'''


def test_journald_where_kmsg_cannot_be_opened_resumes_after_its_cursor(tmp_path):
    """journalctl -k -o json (https://systemd.io/JOURNAL_EXPORT_FORMATS/#journal-json-format): MESSAGE, __CURSOR,
    _SOURCE_MONOTONIC_TIMESTAMP (usec); a non-UTF-8 MESSAGE is an array of byte values."""
    entries = tmp_path / "journal.jsonl"
    rows = [{"__CURSOR": f"s=1;i={i}", "MESSAGE": m, "_SOURCE_MONOTONIC_TIMESTAMP": str(1_000_000 * (i + 1)),
             "_TRANSPORT": "kernel"} for i, m in enumerate([NOISE, XID79, list(b"bad \xff byte")])]
    entries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = tmp_path / "journalctl.py"
    script.write_text(FAKE_JOURNALCTL)
    state = tmp_path / "state.json"

    def missing(path):
        raise FileNotFoundError(2, "No such file or directory", path)

    def run(n):
        seen = []
        f = logfollow.LogFollower("/dev/kmsg", lambda m, ts: seen.append((m, ts)) or "Xid" in m, poll_seconds=0.01,
                                  state_path=str(state), boot_id_path=str(_boot_id(tmp_path)), open_kmsg=missing,
                                  journalctl=(sys.executable, str(script), str(entries)))
        t = threading.Thread(target=f.run)
        t.start()
        deadline = time.monotonic() + 10
        while len(seen) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        f.stop()
        t.join(10)
        assert f.source == "journald"
        return seen

    seen = run(3)
    assert seen[:2] == [(NOISE, 1.0), (XID79, 2.0)] and seen[2][0].startswith("bad ")
    assert json.loads(state.read_text()) == {"boot_id": "b", "cursor": "s=1;i=2"}
    rows.append({"__CURSOR": "s=1;i=3", "MESSAGE": XID64, "__MONOTONIC_TIMESTAMP": "9000000"})
    entries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run(1) == [(XID64, 9.0)]


def test_no_kmsg_and_no_journalctl_is_an_error_not_silence(tmp_path):
    def denied(path):
        raise PermissionError(1, "Operation not permitted", path)

    f = logfollow.LogFollower("/dev/kmsg", lambda m, ts: None, open_kmsg=denied,
                              journalctl=("no-such-journalctl-here",), boot_id_path=str(_boot_id(tmp_path)))
    with pytest.raises(PermissionError):
        f.run()


def test_a_corrupt_state_file_reads_from_the_first_record(tmp_path, monkeypatch):
    (tmp_path / "kernel-log.json").write_text("{half")
    kmsg = KmsgStandin()
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    kmsg.printk(XID79, ts_usec=1)
    _, d = detector(tmp_path)
    follow_until(d, 1)
    assert acted(d, "xid-79", "gpu-fell-off-bus", "reboot") == 1
    assert json.loads((tmp_path / "kernel-log.json").read_text()) == {"boot_id": "boot-a", "seq": 0}


def test_journalctl_that_exits_is_an_error_with_its_message(tmp_path):
    script = tmp_path / "journalctl.py"
    script.write_text("import sys; print('No journal files were found.', file=sys.stderr); sys.exit(1)\n")
    f = logfollow.LogFollower("journald", lambda m, ts: None, boot_id_path=str(_boot_id(tmp_path)),
                              journalctl=(sys.executable, str(script)))
    with pytest.raises(OSError, match="journalctl exited 1: No journal files were found"):
        f.run()


def test_journald_entries_user_space_wrote_to_kmsg_are_skipped(tmp_path):
    """journald keeps a /dev/kmsg record's facility (systemd journald-kmsg.c: SYSLOG_FACILITY=LOG_FAC(priority),
    _TRANSPORT=kernel for all): an entry written from user space (facility 1, LOG_USER) never reaches the rules."""
    entries = tmp_path / "journal.jsonl"
    rows = [{"__CURSOR": "s=1;i=0", "MESSAGE": XID79, "SYSLOG_FACILITY": "1", "_TRANSPORT": "kernel",
             "_SOURCE_MONOTONIC_TIMESTAMP": "1000000"},
            {"__CURSOR": "s=1;i=1", "MESSAGE": NOISE, "SYSLOG_FACILITY": "0", "_TRANSPORT": "kernel",
             "_SOURCE_MONOTONIC_TIMESTAMP": "2000000"}]
    entries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = tmp_path / "journalctl.py"
    script.write_text(FAKE_JOURNALCTL)
    seen = []
    f = logfollow.LogFollower("journald", lambda m, ts: seen.append(m), poll_seconds=0.01,
                              boot_id_path=str(_boot_id(tmp_path)), journalctl=(sys.executable, str(script),
                                                                                str(entries)))
    t = threading.Thread(target=f.run)
    t.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    f.stop()
    t.join(10)
    assert seen == [NOISE] and f.user_records == 1


def test_kmsg_records_user_space_wrote_are_skipped_and_counted(tmp_path, monkeypatch):
    kmsg = KmsgStandin()
    KmsgStandin.install(kmsg, monkeypatch, logfollow)
    kmsg.printk(XID79, ts_usec=1_000_000, prio=12)     # <12>: LOG_USER, as devkmsg_write forces
    kmsg.printk(XID79, ts_usec=1_000_001, prio=3)      # the kernel's own
    c, d = detector(tmp_path)
    t = d.start_follower()
    d.follower.poll = 0.01
    deadline = time.monotonic() + 10
    while d.metrics.kernel_lines._value.get() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    d.follower.stop()
    t.join(5)
    assert d.follower.user_records == 1 and d.metrics.kernel_lines._value.get() == 1
    assert json.loads((tmp_path / "kernel-log.json").read_text())["seq"] == 1
