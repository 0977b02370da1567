"""Where Kueue places a job's pods: the topology levels a user may name and the pod annotation that asks for one.

Required: all pods in one domain (e.g. one UltraServer); preferred: as few domains as possible (e.g. under one
network spine). A job that names none is packed into one UltraServer / layer-3 network node when possible.
"""

from __future__ import annotations

from infra.governance import queues as q
from infra.governance.job_request import JobRequest
from infra.spec.cluster import ClusterSpec
from openpod_core import labels

REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"

# Topology level names users type -> node label.
LEVELS: dict[str, str] = {
    "ultraserver": labels.ULTRASERVER_ID,
    "layer-1": labels.TOPOLOGY_LAYERS[0],
    "layer-2": labels.TOPOLOGY_LAYERS[1],
    "layer-3": labels.TOPOLOGY_LAYERS[2],
    "host": labels.HOSTNAME,
}

# Placement when the user asks for none: pack into one UltraServer / layer-3
# network node when possible. CPU groups: Kueue's implied placement.
DEFAULT_PREFERRED = {q.ULTRASERVER_TOPOLOGY: "ultraserver", q.NETWORK_TOPOLOGY: "layer-3"}


def levels_of(group_topology: str) -> list[str]:
    """The level names a group of that topology offers, in LEVELS order."""
    keys = q.TOPOLOGY_LEVELS[group_topology]
    return [name for name, key in LEVELS.items() if key in keys]


def topology_annotations(spec: ClusterSpec, req: JobRequest) -> dict[str, str]:
    """The pod template's placement annotation: the required level, else the preferred or the group's default."""
    annotations: dict[str, str] = {}
    preferred = req.prefer_topology or DEFAULT_PREFERRED.get(q.topology_of(spec.group(req.group)))
    if req.require_topology:
        annotations[REQUIRED_TOPOLOGY] = LEVELS[req.require_topology]
    elif preferred:
        annotations[PREFERRED_TOPOLOGY] = LEVELS[preferred]
    return annotations
