"""Every kernel-log rule against real log lines; the table itself; its rendering into docs."""

from __future__ import annotations

import re

import pytest

from node_agent.findings import Action
from node_agent.kernel_engine import KernelLogEngine
from node_agent.printers import PRINTERS
from node_agent.kernel_match import match_kernel_line
from node_agent.rules import KERNEL_RULES, RULES, SXID_ENTRIES, XID_ENTRIES, rules_markdown
from tests.node_agent.conftest import FIXTURES

KERNEL_FIXTURES = sorted((FIXTURES / "kernel").glob("*.log"))


def findings_of(path):
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]  # "#": the format's source
    engine = KernelLogEngine()  # the live engine: CPER records span lines
    return [f for f in (engine.feed(line) for line in lines) if f]


def test_every_kernel_rule_has_a_fixture_and_no_stray_fixtures():
    # Catalog Xid rows (one per code of NVIDIA's catalog) are covered line by line in test_xid_catalog.py;
    # every other kernel rule has a recorded fixture here.
    catalog = {f"xid-{c}" for c in XID_ENTRIES} | {f"sxid-{c}" for c in SXID_ENTRIES}
    stems = {p.stem for p in KERNEL_FIXTURES}
    assert stems <= {r.id for r in KERNEL_RULES}
    assert {r.id for r in KERNEL_RULES if r.id not in catalog} <= stems


@pytest.mark.parametrize("path", KERNEL_FIXTURES, ids=lambda p: p.stem)
def test_kernel_rule_matches_its_recorded_lines(path):
    found = findings_of(path)
    assert path.stem in [f.rule for f in found], f"{path.name}: rule not matched; got {[f.rule for f in found]}"
    f = next(f for f in found if f.rule == path.stem)
    assert f.action is RULES[path.stem].action
    assert f.evidence in path.read_text()  # evidence is the line itself


@pytest.mark.parametrize("code", [13, 31, 43])
def test_application_xids_never_act_on_the_node(code):
    found = findings_of(FIXTURES / "kernel" / f"xid-{code}.log")
    assert found and all(f.action is Action.NONE for f in found)
    assert all(f.rule == f"xid-{code}" for f in found)


@pytest.mark.parametrize("code,action,device", [
    (79, Action.REBOOT, "0000:53:00"), (64, Action.REPLACE, "0000:0f:00"), (48, Action.REBOOT, "0000:86:00"),
    (74, Action.REBOOT, "0000:b9:00"), (94, Action.NONE, "0000:86:00"), (95, Action.REBOOT, "0000:86:00"),
])
def test_xid_actions_and_device_from_the_pci_address(code, action, device):
    (f,) = [f for f in findings_of(FIXTURES / "kernel" / f"xid-{code}.log") if f.rule == f"xid-{code}"]
    assert (f.action, f.device) == (action, device)


def test_prefixes_do_not_matter_dmesg_syslog_kmsg():
    body = "NVRM: Xid (PCI:0000:53:00): 79, pid=2207, name=python3, GPU has fallen off the bus."
    for line in (body, f"[ 5107.644336] {body}", f"Mar 12 10:15:02 ip-10-1-2-3 kernel: {body}"):
        assert match_kernel_line(line).rule == "xid-79"


def test_xid_154_reads_the_drivers_own_verdict():
    assert match_kernel_line(FIXTURES.joinpath("kernel", "xid-154.log").read_text()).action is Action.REBOOT
    assert match_kernel_line(FIXTURES.joinpath("kernel", "xid-154-none.log").read_text()).action is Action.NONE


def test_unrelated_lines_and_near_misses_do_not_match():
    for line in ("[    0.000000] Linux version 6.1.112-124.190.amzn2023.x86_64",
                 "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05",
                 "[  12.1] efa 0000:31:00.0: Setup irq:0x00000000000000ff name:efa-mgmnt@pci:0000:31:00.0",
                 "python3: Xid (PCI:0000:53:00): 79 mentioned in an application log"):
        assert match_kernel_line(line) is None, line


def test_sxid_severity_decides():
    assert match_kernel_line(FIXTURES.joinpath("kernel", "sxid-nonfatal.log").read_text()).action is Action.NONE
    fatal = findings_of(FIXTURES / "kernel" / "sxid-20034.log")
    assert [f.rule for f in fatal] == ["sxid-20034"]  # the "Severity 5 Engine" continuation line is not a fault
    assert [f.rule for f in findings_of(FIXTURES / "kernel" / "sxid-fatal.log")] == ["sxid-fatal"]  # unknown code


def test_sxid_decoded_by_code_without_the_fatal_word():
    """The driver prints "CODE, Data {...}" lines with no Fatal word; old rules only read the word and missed them."""
    (f,) = findings_of(FIXTURES / "kernel" / "sxid-12028.log")
    assert (f.rule, f.action, f.device) == ("sxid-12028", Action.REBOOT, "0000:84:00.0")
    assert all(f.action is Action.NONE for f in findings_of(FIXTURES / "kernel" / "sxid-22013.log"))


def test_every_catalog_sxid_maps_to_its_documented_action():
    bucket = {"IGNORE": Action.NONE, "CHECK_FM_CONFIG": Action.NONE, "RESET_FABRIC": Action.REBOOT,
              "RESET_GPU": Action.REBOOT, "WORKFLOW_NVLINK_POTENTIALY_FATAL_ERR": Action.REBOOT,
              "UNEXPECTED_ERR_REPORT_ISSUE": Action.REBOOT, "REPORT_ISSUE": Action.REBOOT,
              "INVESTIGATE_LINK_SI": Action.REPLACE, "RUN_FIELDDIAG": Action.REPLACE,
              "CHECK_LINK_MECHANICAL_CONNECTIONS": Action.REPLACE, "CHECK_THERMALS": Action.REPLACE}
    assert len(SXID_ENTRIES) == 398
    md = rules_markdown()
    for code, e in SXID_ENTRIES.items():
        assert e.action is bucket[e.resolution], code
        assert e.source.startswith("NVIDIA/NVSentinel@") and e.checked == "2026-11-23"
        # The driver's forms (see sxid-12028.log / sxid-22013.log): Data, Fatal; Non-fatal is the switch's own verdict.
        for tail in ("Data {0x00000000, 0x00000000}", "Fatal, Link 1 error"):
            f = match_kernel_line(f"nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): {code}, {tail}")
            assert (f.rule, f.action, f.device) == (f"sxid-{code}", e.action, "0000:c4:00.0")
        assert f"`sxid-{code}`" in md


def test_nvlink5_xids_read_the_drivers_fatal_word():
    assert {f.action for f in findings_of(FIXTURES / "kernel" / "xid-nvlink5-nonfatal.log")} == {Action.NONE}
    assert {(f.rule, f.action) for f in findings_of(FIXTURES / "kernel" / "xid-149.log")} == {("xid-149", Action.REBOOT)}


def test_table_is_complete_and_auditable():
    for r in RULES.values():
        assert r.fault and r.source and r.probe
        assert re.fullmatch(r"[a-z0-9-]+", r.id)
        if r.probe == "kernel-log":
            re.compile(r.match)
    md = rules_markdown()
    for rid in RULES:
        assert f"`{rid}`" in md
    rules_part, catalog_part = md.split("## Printer catalog")
    assert rules_part.count("\n| `") == len(RULES)
    assert catalog_part.count("\n| `") == len(PRINTERS)


def test_rules_page_is_registered_with_the_docs_generator(tmp_path):
    from infra.cli import docs

    assert docs.PAGES["node-agent-rules.md"]() == rules_markdown()
    written = docs.write_all(tmp_path)
    assert (tmp_path / "node-agent-rules.md").read_text() == rules_markdown()
    assert tmp_path / "node-agent-rules.md" in written
