"""``python -m node_agent diagnose``: the live rules, offline; table or JSON; exit 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.node_agent.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]


def run(*args, stdin: str | None = None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "node_agent", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=str(FIXTURES))


def test_json_one_object_per_finding_with_fault_action_evidence(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("".join((FIXTURES / "kernel" / f"{n}.log").read_text() for n in ("xid-13", "xid-79", "xid-64")))
    r = run("diagnose", str(log), "--json", "--nvidia-smi", str(FIXTURES / "nvidia" / "query-gpu-faulty.csv"),
            "--instance-type", "p5.48xlarge")
    assert r.returncode == 0, r.stderr
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert all({"fault", "action", "evidence", "rule", "severity", "source"} <= o.keys() for o in objs)
    acts = {o["rule"]: o["action"] for o in objs}
    assert acts["xid-13"] == "none" and acts["xid-79"] == "reboot" and acts["xid-64"] == "replace"
    assert acts["gpu-count"] == "reboot" and acts["gpu-remap-failure"] == "replace"


def test_table_from_stdin_with_deep_check_outputs():
    r = run("diagnose", "-", "--dcgmi", str(FIXTURES / "deep" / "dcgmi-diag-r2-fail.json"),
            "--all-reduce", str(FIXTURES / "deep" / "all_reduce_perf-p5-slow.txt"), "--instance-type", "p5.48xlarge",
            stdin=(FIXTURES / "kernel" / "xid-43.log").read_text())
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["ACTION", "SEVERITY", "FAULT", "RULE"]
    assert any(line.startswith("none ") and "xid-43" in line for line in lines)
    assert any("nccl-busbw-low" in line for line in lines) and any("dcgm-diag-fail" in line for line in lines)
    assert lines[-1] == "3 findings, 2 need node action; node needs: replace"


def test_neuron_ls_counts_devices_against_the_instance_type():
    r = run("diagnose", str(FIXTURES / "kernel" / "neuron-hbm-uncorrectable-error.log"), "--json",
            "--neuron-ls", str(FIXTURES / "neuron" / "neuron-ls-trn2-missing.json"), "--instance-type", "trn2.48xlarge")
    assert r.returncode == 0, r.stderr
    rules = [json.loads(line)["rule"] for line in r.stdout.splitlines()]
    assert rules == ["neuron-hbm-uncorrectable-error", "neuron-count"]


def test_clean_log_reports_nothing(tmp_path):
    (tmp_path / "ok.log").write_text("[    0.000000] Linux version 6.1.112\n")
    r = run("diagnose", str(tmp_path / "ok.log"))
    assert (r.returncode, r.stdout.strip()) == (0, "no faults found")


def test_bad_input_exits_2_with_a_clear_message(tmp_path):
    cases = [
        (["diagnose", str(tmp_path / "missing.log")], "kernel log", "no such file"),
        (["diagnose", "-", "--instance-type", "p5.48xl"], "--instance-type", "did you mean p5.48xlarge"),
        (["diagnose", "-", "--nvidia-smi", str(FIXTURES / "deep" / "dcgmi-diag-r2-pass.json")], "--nvidia-smi",
         "not nvidia-smi -q output"),
        (["diagnose", "-", "--dcgmi", str(tmp_path / "nope.json")], "--dcgmi", "No such file"),
    ]
    for args, what, msg in cases:
        r = run(*args, stdin="")
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and what in r.stderr and msg in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_rules_command_prints_the_table():
    r = run("rules")
    assert r.returncode == 0 and "| `xid-79` |" in r.stdout


def test_controller_with_bad_config_exits_2(tmp_path):
    (tmp_path / "c.yaml").write_text("drain_timeout_seconds: -1\n")
    r = run("controller", "--config", str(tmp_path / "c.yaml"))
    assert r.returncode == 2 and "drain_timeout_seconds: Input should be greater than 0" in r.stderr
    assert "Traceback" not in r.stderr


def test_detector_without_a_cluster_says_so(tmp_path):
    env_home = {"KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "node_agent", "detector", "--node", "n1"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env_home}, cwd=str(tmp_path))
    assert r.returncode == 2 and "no Kubernetes API configuration" in r.stderr and "Traceback" not in r.stderr


def diagnose_in_process(*args, stdin: bytes | None = None):
    from click.testing import CliRunner

    from node_agent.__main__ import main

    return CliRunner().invoke(main, ["diagnose", *args], input=stdin)


def test_binary_input_is_refused_with_one_clear_error(tmp_path):
    """A binary journal file (systemd journal files start with the magic 'LPKSHHRH', then NUL bytes:
    https://systemd.io/JOURNAL_FILE_FORMAT/#header) or a core dump is not "no faults found"."""
    (tmp_path / "system.journal").write_bytes(b"LPKSHHRH\x00\x00\x00\x00" + bytes(range(256)) * 4)
    for args, stdin in (([str(tmp_path / "system.journal")], None), (["-"], b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64)):
        r = diagnose_in_process(*args, stdin=stdin)
        assert r.exit_code == 2, r.output
        err = r.output.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: kernel log ") and "binary data (NUL byte at offset" in err[0]
        assert "no faults found" not in r.output


def test_diagnose_applies_the_live_repeat_windows_on_log_time(tmp_path):
    lockup = "watchdog: BUG: soft lockup - CPU#47 stuck for 23s! [kworker/47:1:1203]"
    close = "".join(f"[{100.0 + 30 * i:12.6f}] {lockup}\n" for i in range(3))      # 3 within 10 minutes
    apart = "".join(f"[{100.0 + 3600 * i:12.6f}] {lockup}\n" for i in range(3))    # 3 in 2 hours
    (tmp_path / "close.log").write_text(close)
    (tmp_path / "apart.log").write_text(apart)
    r = diagnose_in_process(str(tmp_path / "close.log"), "--json")
    assert [json.loads(x)["rule"] for x in r.output.splitlines()] == ["soft-lockup", "soft-lockup", "soft-lockup-repeated"]
    r = diagnose_in_process(str(tmp_path / "apart.log"), "--json")
    assert [json.loads(x)["rule"] for x in r.output.splitlines()] == ["soft-lockup"] * 3
    # /dev/kmsg records saved with `cat /dev/kmsg` carry their own time (usec)
    kmsg = "".join(f"4,{i},{(100 + 30 * i) * 10**6},-;{lockup}\n" for i in range(3))
    (tmp_path / "kmsg.txt").write_text(kmsg)
    r = diagnose_in_process(str(tmp_path / "kmsg.txt"), "--json")
    assert json.loads(r.output.splitlines()[-1])["action"] == "reboot"


def test_diagnose_repeat_windows_on_syslog_and_iso_timestamps(tmp_path):
    """/var/log/messages and journalctl -o short-iso lines carry wall-clock time, not a dmesg prefix."""
    lockup = "kernel: watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [python3:4121]"
    syslog_close = "".join(f"Nov 25 10:0{i}:00 ip-10-0-0-1 {lockup}\n" for i in range(3))      # 3 in 2 minutes
    iso_apart = "".join(f"2026-11-25T1{i}:00:00+0000 ip-10-0-0-1 {lockup}\n" for i in range(3))  # 3 in 2 hours
    (tmp_path / "messages").write_text(syslog_close)
    (tmp_path / "iso.log").write_text(iso_apart)
    rules = lambda p: [json.loads(x)["rule"] for x in diagnose_in_process(str(p), "--json").output.splitlines()]  # noqa: E731
    assert rules(tmp_path / "messages")[-1] == "soft-lockup-repeated"
    assert rules(tmp_path / "iso.log") == ["soft-lockup"] * 3


def test_diagnose_on_a_log_without_time_warns_once_and_compresses_no_window(tmp_path):
    """`journalctl -o cat` lines carry no time: the old engine put them all at one instant, so three soft lockups
    hours apart made soft-lockup-repeated (reboot). Now: one warning line, no repeated rule; dmesg -T has time."""
    lockup = "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [python3:4121]"
    (tmp_path / "cat.log").write_text(f"{lockup}\n" * 3)
    r = run("diagnose", str(tmp_path / "cat.log"), "--json")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["rule"] for x in r.stdout.splitlines()] == ["soft-lockup"] * 3
    warnings = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert len(warnings) == 1 and "3 kernel-log lines carry no time" in warnings[0]
    human = "".join(f"[Sat Nov 28 0{i}:00:00 2026] {lockup}\n" for i in range(3))  # dmesg -T: 3 in 2 hours
    (tmp_path / "t.log").write_text(human)
    r = run("diagnose", str(tmp_path / "t.log"), "--json")
    assert [json.loads(x)["rule"] for x in r.stdout.splitlines()] == ["soft-lockup"] * 3 and "warning" not in r.stderr
