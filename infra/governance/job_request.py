"""What a user asks ``openpod submit`` for: the job request, its defaults and the range of each choice.

``job_validation.validate`` checks a request against the spec; ``jobset.build`` turns a valid one into the JobSet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from openpod_core import labels

JOB_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$")
DEFAULT_HUGEPAGES_MI = labels.EFA_HUGEPAGES_MI  # what EFA nodes preallocate (instance group user data)
DEFAULT_MAX_RESTARTS = 10
MAX_RESTARTS = 1000  # the most a team JobSet may restart; admission (openpod-jobset-restarts) enforces it too
# Seconds between SIGTERM and SIGKILL for the job's pods (eviction for a node upgrade or drain, Kueue
# preemption). `--runtime openpod` checkpoints the current step durably in that time, so it gets more;
# the launcher leaves STOP_MARGIN_S of it for torchrun and itself to exit. A preempting job waits for
# the preempted pods to terminate, so a longer grace delays it.
DEFAULT_GRACE_SECONDS = {"openpod": 300, "torchrun": 60}
STOP_MARGIN_S = 30
GRACE_RANGE = (30, 3600)

RUNTIMES = ("torchrun", "openpod")
# --restart (runtime openpod): process = torchrun restarts every worker of the node; in-process = the launcher
# replaces the failed rank alone (training/ft/inprocess.py, docs/training.md "In-process restart"). Its warm
# standby workers (--spare-workers) are processes of the same pod: no extra request (docs/governance.md).
RESTARTS = ("process", "in-process")
# --fault-tolerance replica (docs/training.md, "Replica healing"): one child Job per replica group and the job's
# torchft Lighthouse (infra/governance/job_fault_tolerance.py).
FAULT_TOLERANCE = ("restart", "replica")


class JobError(ValueError):
    """A job request that cannot run on this spec (message names the flag and what is allowed)."""


@dataclass(frozen=True)
class JobRequest:
    name: str
    team: str
    group: str
    image: str
    nodes: int
    script: tuple[str, ...]
    accelerators_per_node: int | None = None    # default: all of the type's
    priority: str = "training"
    require_topology: str | None = None         # a job_placement.LEVELS key
    prefer_topology: str | None = None
    max_restarts: int = DEFAULT_MAX_RESTARTS
    hugepages_mi: int | None = None             # default: the node's hugepages in proportion to accelerators
    shm_gi: int | None = None                   # default: a quarter of the pod's memory, at most 64
    env: dict[str, str] = field(default_factory=dict)
    runtime: str = "torchrun"                   # a RUNTIMES value
    s3_uri: str | None = None                   # runtime openpod: optional S3 checkpoint tier
    grace_seconds: int | None = None            # default: DEFAULT_GRACE_SECONDS[runtime]
    fault_tolerance: str = "restart"            # a FAULT_TOLERANCE value; replica needs runtime openpod
    replicas: int | None = None                 # replica: replica groups [default: one per node]
    min_replicas: int = 0                       # replica: groups a step needs [0: all]
    restart: str = "process"                    # a RESTARTS value; in-process needs runtime openpod
    spare_workers: int | None = None            # in-process: warm standby workers per node [runtime default]

    @property
    def grace(self) -> int:
        return self.grace_seconds if self.grace_seconds is not None else DEFAULT_GRACE_SECONDS[self.runtime]

    @property
    def replica_mode(self) -> bool:
        return self.fault_tolerance == "replica"

    @property
    def groups(self) -> int:
        """Replica groups: one child Job each (1 without replica mode)."""
        if not self.replica_mode:
            return 1
        return self.replicas if self.replicas is not None else self.nodes


def multi_node_in_process(req: JobRequest) -> bool:
    """In-process restart over several nodes: each node's launcher needs its rank, a lost node's pod is replaced."""
    return req.restart == "in-process" and not req.replica_mode and req.nodes > 1
