"""Environment variables that select accelerators outside the device plugins' allocation: refused by admission
(``admission.py``) and by ``openpod submit --env`` (``job_validation.py``).

``NVIDIA_*``: the NVIDIA container toolkit reads NVIDIA_VISIBLE_DEVICES (and the other NVIDIA_ settings) from the
container's environment (platform_constructs/device_plugins.py NVIDIA_DEVICE_SELECTION).
``AWS_NEURON_VISIBLE_DEVICES``: the Neuron OCI hook mounts the Neuron devices it names (fact
``neuron.oci-hook.visible-devices``).
"""

from __future__ import annotations

PREFIXES = ("NVIDIA_",)
NAMES = ("AWS_NEURON_VISIBLE_DEVICES",)


def selects_devices(name: str) -> bool:
    """Whether the environment variable ``name`` selects accelerators."""
    return name.startswith(PREFIXES) or name in NAMES


def describe() -> str:
    """The refused names, for messages."""
    return ", ".join([p + "*" for p in PREFIXES] + list(NAMES))
