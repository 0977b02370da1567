"""AWS Neuron device health: ``neuron-ls --json-output`` (live or recorded) and the driver's hardware counters in sysfs.

Sources (checked 2026-11-23): ``neuron-ls -j`` prints a JSON list, one object per device keyed
``neuron_device`` (aws-neuron/aws-neuron-sdk@v2.32.0:tools/neuron-sys-tools/neuron-ls.rst:29,212-216);
the driver gives each device ``/sys/devices/virtual/neuron_device/neuron<N>/stats/hardware/`` with one file per
hardware counter, ``mem_ecc_uncorrected`` (unrepairable DRAM), ``mem_ecc_repairable_uncorrected`` and
``sram_ecc_uncorrected``, each printing a count (aws-neuron/aws-neuron-driver@fca19f7:neuron_sysfs_metrics.c:146-150,
328-360,927-955). The sysfs user guide (tools/neuron-sys-tools/neuron-sysfs-user-guide.rst:119-123,185-191) draws
counters as directories with ``total`` and ``present``; that shape is read too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from openpod_core.instance_types import Accelerator, InstanceType
from node_agent.findings import Finding
from node_agent.rules import rule

LIST_COMMAND = ["neuron-ls", "--json-output"]
SYSFS_DEVICES = Path("devices") / "virtual" / "neuron_device"   # under the host's /sys
HW_COUNTERS = ("mem_ecc_uncorrected", "mem_ecc_repairable_uncorrected", "sram_ecc_uncorrected")
_COUNTER_RULES = {"mem_ecc_uncorrected": "neuron-hbm-ecc-uncorrected",
                  "sram_ecc_uncorrected": "neuron-sram-ecc-uncorrected",
                  "mem_ecc_repairable_uncorrected": "neuron-hbm-ecc-repairable"}


def parse_neuron_ls(text: str) -> list[dict]:
    """Devices from ``neuron-ls --json-output`` (a JSON list, one object per Neuron device)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not neuron-ls --json-output (invalid JSON: {e.msg} at line {e.lineno})") from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and "neuron_device" in d for d in data):
        raise ValueError("not neuron-ls --json-output (expected a list of objects with 'neuron_device')")
    return data


def check_neuron(devices: list[dict], itype: InstanceType | None) -> list[Finding]:
    if itype is None or itype.accelerator is not Accelerator.NEURON:
        return []
    if len(devices) < itype.accelerator_count:
        seen = sorted(d["neuron_device"] for d in devices)
        missing = sorted(set(range(itype.accelerator_count)) - set(seen))
        return [rule("neuron-count").finding(
            f"{len(devices)} Neuron devices visible, {itype.name} has {itype.accelerator_count}; missing {missing}",
            seen=len(devices), expected=itype.accelerator_count)]
    return []


def read_hw_counters(sys_root: Path) -> dict[int, dict[str, int]]:
    """Each hardware counter's count per Neuron device; {} when the driver's sysfs tree is absent."""
    base = Path(sys_root) / SYSFS_DEVICES
    out: dict[int, dict[str, int]] = {}
    if not base.is_dir():
        return out
    for d in sorted(base.iterdir()):
        m = re.fullmatch(r"neuron(\d+)", d.name)
        if not m:
            continue
        counts = {}
        for c in HW_COUNTERS:
            f = d / "stats" / "hardware" / c
            if f.is_dir():  # the guide's counter-directory shape
                f = f / "total"
            if f.is_file():
                counts[c] = int(f.read_text().strip() or 0)
        out[int(m.group(1))] = counts
    return out


def check_hw_counters(counters: dict[int, dict[str, int]]) -> list[Finding]:
    """A finding per device and counter with a non-zero total (each counter's rule decides the action)."""
    out = []
    for device, counts in sorted(counters.items()):
        for c, total in counts.items():
            if total > 0:
                out.append(rule(_COUNTER_RULES[c]).finding(
                    f"neuron{device} stats/hardware/{c} = {total}", str(device), counter=c, total=total))
    return out
