"""Every Xid of NVIDIA's catalog maps to a documented action; unknown codes take the documented default.

The catalog is node_agent/catalog/xids.csv, a copy of NVIDIA/NVSentinel's
distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv (code, mnemonic, resolution,
fatal) with openpod's action per row. Test lines are in the driver's format, from
NVIDIA/open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c:
``NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s`` and, on MIG, ``(PCI:... GPU-I:%02u GPU-CI:%02u)``.
"""

from __future__ import annotations

import csv

import pytest

from node_agent.findings import Action
from node_agent.kernel_match import match_kernel_line
from node_agent.rules import RULES, XID_CATALOG_FILE, XID_ENTRIES, rules_markdown

# NVIDIA's resolution buckets -> openpod's node action (the issue's and the module docstring's mapping).
BUCKET = {
    "RESTART_APP": Action.NONE, "IGNORE": Action.NONE, "WORKFLOW_XID_45": Action.NONE, "CHECK_UVM": Action.NONE,
    "CHECK_MECHANICALS": Action.NONE, "UPDATE_SWFW": Action.NONE,
    "RESET_GPU": Action.REBOOT, "RESTART_BM": Action.REBOOT, "RESTART_VM": Action.REBOOT,
    "WORKFLOW_XID_48": Action.REBOOT, "WORKFLOW_NVLINK_ERR": Action.REBOOT, "WORKFLOW_NVLINK5_ERR": Action.REBOOT,
    "UNEXPECTED_ERR_REPORT_ISSUE": Action.REBOOT, "FOLLOW_RECOVERY_ACTION": Action.REBOOT,
}
# Rows where openpod deliberately differs from the bucket, each with its reason in the row's note.
OVERRIDES = {63: Action.REBOOT, 64: Action.REPLACE}
SRC = "NVIDIA/NVSentinel@6f8b0fcfa8e502bdda78fabf96facef729a9285b"


def xid_line(code: int, mig: bool = False) -> str:
    where = "PCI:0000:53:00 GPU-I:01 GPU-CI:00" if mig else "PCI:0000:53:00"
    return f"[ 5107.644336] NVRM: Xid ({where}): {code}, pid=2207, name=python3, Ch 00000008"


def test_the_catalog_is_complete_sourced_and_dated():
    rows = list(csv.DictReader(XID_CATALOG_FILE.open()))
    assert [int(r["code"]) for r in rows] == list(range(1, 163))  # NVSentinel's catalog: Xid 1..162, no gaps
    assert all(r["source"].startswith(SRC) and r["checked"] == "2026-11-23" for r in rows)
    assert all(r["note"] for r in rows)


@pytest.mark.parametrize("code", sorted(XID_ENTRIES))
def test_every_catalog_xid_maps_to_its_documented_action(code):
    e = XID_ENTRIES[code]
    assert e.action is OVERRIDES.get(code, BUCKET[e.resolution])
    if code == 154:
        return  # read by the xid-154 rules from the driver's own verdict (test_rules.py)
    for mig in (False, True):
        f = match_kernel_line(xid_line(code, mig))
        assert (f.rule, f.action, f.device) == (f"xid-{code}", e.action, "0000:53:00")
    assert f"`xid-{code}`" in rules_markdown() and e.resolution in RULES[f"xid-{code}"].source


@pytest.mark.parametrize("code,action", [
    (46, Action.REBOOT), (109, Action.REBOOT), (110, Action.REBOOT), (119, Action.REBOOT), (120, Action.REBOOT),
    (136, Action.REBOOT), (140, Action.REBOOT), (143, Action.REBOOT), (144, Action.REBOOT), (145, Action.REBOOT),
    (146, Action.REBOOT), (147, Action.REBOOT), (148, Action.REBOOT), (149, Action.REBOOT), (150, Action.REBOOT),
    (155, Action.REBOOT), (156, Action.REBOOT), (158, Action.REBOOT), (160, Action.REBOOT),
    (13, Action.NONE), (43, Action.NONE), (94, Action.NONE), (64, Action.REPLACE),
])
def test_the_issue_listed_xids_act_on_the_node(code, action):
    assert match_kernel_line(xid_line(code)).action is action


def test_unknown_codes_take_the_documented_default():
    f = match_kernel_line(xid_line(163))
    assert (f.rule, f.action, f.details["code"]) == ("xid-unlisted", Action.NONE, "163")
    assert "documented default" in RULES["xid-unlisted"].note
    f = match_kernel_line(xid_line(999, mig=True))
    assert (f.rule, f.device) == ("xid-unlisted", "0000:53:00")


def test_a_mig_xid_is_not_missed():
    """Before the catalog change the Xid pattern required ')' right after the PCI address: MIG lines were lost."""
    f = match_kernel_line("NVRM: Xid (PCI:0000:53:00 GPU-I:01): 79, pid=2207, name=python3, GPU has fallen off the bus.")
    assert (f.rule, f.action) == ("xid-79", Action.REBOOT)
