"""AWS Neuron device health from ``neuron-ls --json-output`` (live or recorded)."""

from __future__ import annotations

import json

from openpod_core.instance_types import Accelerator, InstanceType
from node_agent.findings import Finding
from node_agent.rules import rule

LIST_COMMAND = ["neuron-ls", "--json-output"]


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
