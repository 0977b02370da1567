"""The JobSet ``openpod submit`` creates for a multi-node PyTorch job.

One replicated job of ``nodes`` pods (an Indexed Job, one pod per node), each
running a per-node launcher with c10d rendezvous on pod 0 through the JobSet's
headless service: ``torchrun <script>`` (runtime ``torchrun``), or the
platform's training runtime ``python -m training run`` (runtime ``openpod``),
which adds the checkpoint tiers - node memory (a per-job directory of the host's
``/dev/shm``, so it outlives the pods), the node's NVMe RAID0 (a per-job
hostPath), the team's FSx directory, optionally S3 - and peer recovery over the
pod IP. Kueue admits the JobSet as one workload (gang) against the
team's LocalQueue at the chosen priority, and places it by topology: required
(all pods in one domain, e.g. one UltraServer) or preferred (as few domains as
possible, e.g. under one network spine).

With ``--fault-tolerance replica`` (runtime ``openpod``) the replicated job has one child Job per replica
group, and a second replicated job runs the job's torchft Lighthouse (``lighthouse_job``).

A node failure makes its pod fail; the JobSet then recreates all its jobs
(``failurePolicy.maxRestarts``) and torchrun resumes from the last checkpoint
once the Auto Scaling group's replacement node has passed its health check.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from openpod_core import labels
from infra.governance import compute_domain
from infra.governance import queues as q
from infra.governance import resources as res
from infra.spec.cluster import ClusterSpec

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
REPLICATED_JOB = "node"
CONTAINER = "trainer"
RDZV_PORT = 29500
JOB_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$")

# Topology level names users type -> node label.
LEVELS: dict[str, str] = {
    "ultraserver": labels.ULTRASERVER_ID,
    "layer-1": labels.TOPOLOGY_LAYERS[0],
    "layer-2": labels.TOPOLOGY_LAYERS[1],
    "layer-3": labels.TOPOLOGY_LAYERS[2],
    "host": labels.HOSTNAME,
}
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
# --runtime openpod: where the tiers live in the container, and the downward-API env the command expands.
POD_IP_ENV = "POD_IP"        # status.podIP: agent address and peer side-channel (--bind-host)
INIT_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
PEER_SECRET_ENV = labels.PEER_SECRET_ENV
NODE_NAME_ENV = "NODE_NAME"  # spec.nodeName: names the node-local tier directories (--node-id)
# The memory tier lives in host memory (labels.HOST_MEMORY_TIER/<team>/<job>), not in
# the pod's /dev/shm: JobSet recreates every pod after a node loss, and the survivors'
# snapshots (their own and the buddy copies they hold) must outlive that.
MEMORY_DIR = "/var/run/openpod/memory"
MEMORY_VOLUME = "node-memory"
NVME_VOLUME = "local-nvme"
# In-pod worker-group restarts (a crashed worker restores from node memory); a lost
# node fails its pod and the JobSet recreates the job (--max-restarts).
LAUNCHER_RESTARTS = 3
# `python -m training run` flags submit sets; the args after -- may not repeat them.
LAUNCHER_FLAGS = ("--nnodes", "--nproc-per-node", "--rdzv-endpoint", "--rdzv-id", "--node-id", "--bind-host",
                  "--max-restarts", "--checkpoint-dir", "--memory-dir", "--nvme-dir", "--s3-uri", "--stop-timeout",
                  "--metrics-port", "--fault-tolerance", "--replica-id", "--replicas", "--min-replicas",
                  "--lighthouse", "--restart", "--spare-workers", "--node-rank")
# Of those, the ones the user chooses through submit's own flag of the same name.
SUBMIT_FLAGS = ("--restart", "--spare-workers")
# --restart (runtime openpod): process = torchrun restarts every worker of the node; in-process = the launcher
# replaces the failed rank alone (training/ft/inprocess.py, docs/training.md "In-process restart"). Its warm
# standby workers (--spare-workers) are processes of the same pod: no extra request (docs/governance.md).
RESTARTS = ("process", "in-process")

# --fault-tolerance replica (docs/training.md, "Replica healing"): one child Job per replica group
# (replicatedJob REPLICATED_JOB with `replicas: R`), the group index from the label JobSet puts on every
# pod of a child Job (jobset.sigs.k8s.io/job-index: kubernetes-sigs/jobset@v0.12.0
# api/jobset/v1alpha2/jobset_types.go:33-36, set on the pod template in
# pkg/controllers/jobset_controller.go:1014-1029), and the job's torchft Lighthouse as a replicated job of
# one pod. torchft 0.2.0's `torchft_lighthouse` (console script of the torchft wheel, in the training
# image): --bind [default [::]:29510], --min_replicas (required), --heartbeat_timeout_ms [5000],
# --join_timeout_ms [60000] (its --help, read 2026-11-23).
FAULT_TOLERANCE = ("restart", "replica")
LIGHTHOUSE_JOB = "lighthouse"
# Replica mode's failure-policy rule, and the most replicas a replicated job may have with a RestartJob rule
# (jobset@v0.12.0 pkg/webhooks/jobset_webhook.go:73-76, 445-450).
RESTART_GROUP_RULE = "restartFailedGroup"
# A Lighthouse Job that failed (its pod failed backoffLimit + 1 times: crashes, lost nodes) is recreated alone.
RESTART_LIGHTHOUSE_RULE = "restartLighthouse"
# While the Lighthouse is away (a crash, its pod recreated elsewhere) a group's quorum fails: torchft 0.2.0's
# manager server retries it only TORCHFT_QUORUM_RETRIES times (default 0; the env overrides the Manager's
# argument: torchft/manager.py:84-87,185,266-268 of the 0.2.0 wheel), and without a retry it never answers its
# client (meta-pytorch/torchft@7eb7087 src/manager.rs:238): every group waits at that step until its hang
# watchdog restarts its workers. Between retries it sleeps quorum_timeout / (retries + 1)
# (src/manager.rs:250-306) and reconnects: so many retries that it tries every QUORUM_RETRY_SECONDS for the
# runtime's whole quorum timeout (tests/governance/test_lighthouse_failure.py runs it on the wheel).
QUORUM_RETRIES_ENV = "TORCHFT_QUORUM_RETRIES"
QUORUM_RETRY_SECONDS = 2
# Seconds the Lighthouse's pod stays bound to a node that is unreachable or not ready before it is evicted and
# its Job replaces it, instead of the 300 s the DefaultTolerationSeconds admission plugin gives pods that set no
# such toleration (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/#taint-based-evictions,
# checked 2026-11-23): the groups pause at their quorum meanwhile, and their hang watchdog fires after
# --hang-floor (300 s by default).
LIGHTHOUSE_EVICTION_SECONDS = 30
NODE_FAILURE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
MAX_RESTARTABLE_GROUPS = 1024
LIGHTHOUSE_CONTAINER = "lighthouse"
LIGHTHOUSE_PORT = 29510
REPLICA_ID_ENV = "REPLICA_ID"
# In-process restart over several nodes: each pod's index in its Indexed child Job = its --node-rank.
NODE_RANK_ENV = "NODE_RANK"
# ... and a pod lost with its node (the taint manager's eviction from an unreachable node, PodGC for a deleted
# one: both set the DisruptionTarget condition, KEP-3329 kubernetes/enhancements
# keps/sig-apps/3329-retriable-and-non-retriable-failures/README.md "New PodConditions", checked 2026-11-23)
# is replaced by the Job controller with the same completion index, without counting against backoffLimit
# ("Ignore", same KEP "JobSpec API"): the other nodes' launchers keep their processes and wait for it
# (training --node-wait). A launcher that exits with an error still fails the Job (backoffLimit 0).
NODE_LOSS_POLICY = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
# What the Lighthouse pod requests. It is carved out of every trainer pod's share (each asks for this much
# less CPU and memory than a whole node gives), so the job's quota charge stays within nodes x node share
# and the Lighthouse fits on any node the job holds.
LIGHTHOUSE_SHARE = res.NodeShare(cpu=1, memory_gib=1)


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
    require_topology: str | None = None         # a LEVELS key
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


# Placement when the user asks for none: pack into one UltraServer / layer-3
# network node when possible. CPU groups: Kueue's implied placement.
DEFAULT_PREFERRED = {q.ULTRASERVER_TOPOLOGY: "ultraserver", q.NETWORK_TOPOLOGY: "layer-3"}


def _levels_of(group_topology: str) -> list[str]:
    keys = q.TOPOLOGY_LEVELS[group_topology]
    return [name for name, key in LEVELS.items() if key in keys]


def validate(spec: ClusterSpec, req: JobRequest) -> None:
    """Raise JobError naming the first thing that cannot work and what is allowed."""
    low, high = GRACE_RANGE
    if not low <= req.grace <= high:
        raise JobError(f"--grace-seconds {req.grace} not allowed; use {low} to {high} (seconds a pod gets after "
                       "SIGTERM to checkpoint and exit)")
    if not JOB_NAME.match(req.name):
        raise JobError(f"--name {req.name!r} not allowed; use lowercase letters, digits and '-', starting with a "
                       "letter, at most 40 characters")
    for key in req.env:
        if key.startswith("NVIDIA_"):
            raise JobError(f"--env {key} not allowed: NVIDIA_* variables select GPUs outside the device plugin "
                           "(admission refuses them too); GPUs come with --accelerators-per-node")
    teams = [t.name for t in spec.teams]
    if req.team not in teams:
        raise JobError(f"--team {req.team!r} is not a team of this spec; teams are: {', '.join(teams) or '(none)'}")
    priorities = [p.name for p in spec.priorities]
    if req.priority not in priorities:
        raise JobError(f"--priority {req.priority!r} is not a priority of this spec; priorities are: "
                       f"{', '.join(priorities)}")
    queued = [g.name for g in q.queued_groups(spec)]
    if req.group not in queued:
        raise JobError(f"--group {req.group!r} has no team quota in this spec; groups with queues are: "
                       f"{', '.join(queued) or '(none)'}")
    group = spec.group(req.group)
    t = group.type
    if req.nodes < 1:
        raise JobError(f"--nodes {req.nodes} not allowed; at least 1")
    cap = q.capacity(spec, spec.team(req.team), req.group)
    if req.nodes > cap.max_nodes:
        raise JobError(f"--nodes {req.nodes} is more than team {req.team} could ever get on group {req.group}: "
                       f"at most {cap.max_nodes} (nominal {cap.nominal} + borrowable {cap.borrowable} within "
                       f"the cohort)")
    if req.accelerators_per_node is not None:
        if not t.is_accelerated:
            raise JobError(f"--accelerators-per-node not allowed: group {req.group} ({t.name}) has no accelerators")
        if not 1 <= req.accelerators_per_node <= t.accelerator_count:
            raise JobError(f"--accelerators-per-node {req.accelerators_per_node} not allowed: {t.name} has "
                           f"{t.accelerator_count} {t.accelerator_model}; use 1 to {t.accelerator_count}")
    if req.require_topology and req.prefer_topology:
        raise JobError("--require-topology and --prefer-topology are exclusive; give one")
    level = req.require_topology or req.prefer_topology
    if level:
        flag = "--require-topology" if req.require_topology else "--prefer-topology"
        allowed = _levels_of(q.topology_of(group))
        if level not in allowed:
            raise JobError(f"{flag} {level!r} not available on group {req.group} ({t.name}); levels are: "
                           f"{', '.join(allowed)}")
        if req.require_topology == "ultraserver" and t.ultraserver and req.nodes > t.ultraserver.instances:
            raise JobError(f"--nodes {req.nodes} cannot fit one UltraServer: {t.ultraserver.name} has "
                           f"{t.ultraserver.instances} instances")
        if req.require_topology == "host" and req.nodes > 1:
            raise JobError(f"--nodes {req.nodes} cannot fit one host; --require-topology host needs --nodes 1")
    if not 0 <= req.max_restarts <= MAX_RESTARTS:
        raise JobError(f"--max-restarts {req.max_restarts} not allowed; use 0 to {MAX_RESTARTS}")
    if req.hugepages_mi is not None:
        if req.hugepages_mi < 0 or req.hugepages_mi % labels.HUGEPAGE_SIZE_MI:
            raise JobError(f"--hugepages {req.hugepages_mi} not allowed; use 0 or more MiB, a multiple of "
                           f"{labels.HUGEPAGE_SIZE_MI} (2 MiB pages)")
        if t.efa_supported and req.hugepages_mi > labels.EFA_HUGEPAGES_MI:
            raise JobError(f"--hugepages {req.hugepages_mi} is more than an EFA node of group {req.group} has: "
                           f"nodes preallocate {labels.EFA_HUGEPAGES_MI} MiB; use 0 to {labels.EFA_HUGEPAGES_MI}")
        accel = req.accelerators_per_node or t.accelerator_count
        share = res.hugepages_share_mi(t, accel)
        if t.efa_supported and req.hugepages_mi > share:
            raise JobError(f"--hugepages {req.hugepages_mi} is more than the share of a job using {accel} of "
                           f"{t.accelerator_count} accelerators per node: {share} of the node's "
                           f"{labels.EFA_HUGEPAGES_MI} MiB (more would hold the whole node's hugepages while "
                           f"quota charges part of it); use 0 to {share}")
    if req.shm_gi is not None:
        memory = res.pod_share(t, req.accelerators_per_node or t.accelerator_count).memory_gib
        if not 1 <= req.shm_gi < memory:
            raise JobError(f"--shm {req.shm_gi} not allowed; /dev/shm counts against the pod's {memory} GiB of "
                           f"memory: use 1 to {memory - 1} GiB")
    if req.runtime not in RUNTIMES:
        raise JobError(f"--runtime {req.runtime!r} not allowed; use one of: {', '.join(RUNTIMES)}")
    _validate_fault_tolerance(spec, req)
    _validate_restart(spec, req)
    if req.runtime == "openpod":
        _validate_openpod(spec, req)
    elif req.s3_uri is not None:
        raise JobError("--s3-uri needs --runtime openpod (the torchrun runtime leaves checkpoints to the script)")
    elif not req.script:
        raise JobError("no training script given; put it after --, e.g. -- train.py --config llama.yaml")


def _validate_openpod(spec: ClusterSpec, req: JobRequest) -> None:
    t = spec.group(req.group).type
    if t.device_resource == res.NEURON:
        raise JobError(f"--runtime openpod not available on group {req.group} ({t.name}): the training runtime "
                       "runs on NVIDIA GPUs or CPU; use --runtime torchrun with a Neuron training script")
    if req.s3_uri is not None and not re.match(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", req.s3_uri):
        raise JobError(f"--s3-uri {req.s3_uri!r} not allowed; use s3://<checkpoints bucket>/{req.team}[/prefix] "
                       "(the bucket is the stack's checkpoints bucket output)")
    if req.s3_uri is not None and req.s3_uri.split("/")[3:4] != [req.team]:
        raise JobError(f"--s3-uri {req.s3_uri!r} not allowed; use s3://<checkpoints bucket>/{req.team}[/prefix]: "
                       f"the training role reaches only its team's prefix ({req.team}/)")
    for key in (POD_IP_ENV, NODE_NAME_ENV, PEER_SECRET_ENV):
        if key in req.env:
            raise JobError(f"--env {key} not allowed with --runtime openpod: it is set from the pod itself")
    for arg in req.script:
        flag = arg.split("=", 1)[0]
        if flag in SUBMIT_FLAGS:
            raise JobError(f"{flag} after -- not allowed with --runtime openpod: give it to openpod submit ({flag} "
                           "before --), which sets it on every node's launcher")
        if flag in LAUNCHER_FLAGS:
            raise JobError(f"{flag} after -- not allowed with --runtime openpod: submit sets it from the job "
                           f"(set by submit: {', '.join(LAUNCHER_FLAGS)})")
    from training.cli import check_run_args  # the runtime's own parser: no torch import

    problems = check_run_args([a.replace(f"$({REPLICA_ID_ENV})", "0").replace(f"$({NODE_RANK_ENV})", "0")
                               for a in launch_command(spec, req)[4:]])
    refused = [p for p in problems if p.startswith(tuple(f"{f}:" for f in (*SUBMIT_FLAGS, "--node-rank")))]
    if req.restart == "in-process" and refused:  # e.g. replica groups, or more nodes than the runtime supports
        raise JobError(f"--restart in-process: the training runtime refuses it for this job: {'; '.join(refused)}")
    if problems:
        raise JobError(f"training args after -- not accepted by python -m training run: {'; '.join(problems)}")


def _validate_fault_tolerance(spec: ClusterSpec, req: JobRequest) -> None:
    if req.fault_tolerance not in FAULT_TOLERANCE:
        raise JobError(f"--fault-tolerance {req.fault_tolerance!r} not allowed; use one of: "
                       f"{', '.join(FAULT_TOLERANCE)}")
    if not req.replica_mode:
        given = [f for f, v in (("--replicas", req.replicas), ("--min-replicas", req.min_replicas or None))
                 if v is not None]
        if given:
            raise JobError(f"{given[0]} only applies with --fault-tolerance replica")
        return
    if req.runtime != "openpod":
        raise JobError("--fault-tolerance replica needs --runtime openpod (the platform's runtime runs the "
                       "replica groups and heals a restarted one from a live peer)")
    if REPLICA_ID_ENV in req.env:
        raise JobError(f"--env {REPLICA_ID_ENV} not allowed with --fault-tolerance replica: it is the child Job's "
                       "index, set from the pod itself")
    r = req.groups
    if r < 2 or req.nodes % r:
        raise JobError(f"--replicas {r} not allowed with --nodes {req.nodes}; use a divisor of --nodes from 2 "
                       f"to {req.nodes} (every replica group has the same number of nodes)" if req.nodes > 1 else
                       f"--fault-tolerance replica needs at least 2 replica groups: --nodes {req.nodes} has one "
                       "(use --nodes 2 or more)")
    if r > MAX_RESTARTABLE_GROUPS:
        raise JobError(f"--replicas {r} not allowed: JobSet restarts a lost replica group alone only for at most "
                       f"{MAX_RESTARTABLE_GROUPS} groups per job; use a divisor of --nodes {req.nodes} up to "
                       f"{MAX_RESTARTABLE_GROUPS} (groups of several nodes)")
    if not 0 <= req.min_replicas <= r:
        raise JobError(f"--min-replicas {req.min_replicas} not allowed; use 0 (all {r} groups) to {r}")
    t = spec.group(req.group).type
    share = res.pod_share(t, req.accelerators_per_node or t.accelerator_count)
    if share.cpu <= LIGHTHOUSE_SHARE.cpu or share.memory_gib <= LIGHTHOUSE_SHARE.memory_gib:
        raise JobError(f"--fault-tolerance replica not available with {share.cpu} vCPU / {share.memory_gib} GiB "
                       f"per pod: the Lighthouse takes {LIGHTHOUSE_SHARE.cpu} vCPU and "
                       f"{LIGHTHOUSE_SHARE.memory_gib} GiB of it; use more --accelerators-per-node")


def _validate_restart(spec: ClusterSpec, req: JobRequest) -> None:
    if req.restart not in RESTARTS:
        raise JobError(f"--restart {req.restart!r} not allowed; use one of: {', '.join(RESTARTS)}")
    if req.restart != "in-process":
        if req.spare_workers is not None:
            raise JobError("--spare-workers only applies with --restart in-process")
        return
    if req.runtime != "openpod":
        raise JobError("--restart in-process needs --runtime openpod: torchrun restarts every worker of the node; "
                       "the platform's launcher replaces the failed rank alone")
    if _multi_node_in_process(req) and NODE_RANK_ENV in req.env:
        raise JobError(f"--env {NODE_RANK_ENV} not allowed with --restart in-process on several nodes: it is the "
                       "pod's index in its Job, set from the pod itself")
    t = spec.group(req.group).type
    nproc = res.processes_per_node(t, req.accelerators_per_node or t.accelerator_count)
    if req.spare_workers is not None and not 0 <= req.spare_workers <= nproc:
        raise JobError(f"--spare-workers {req.spare_workers} not allowed; use 0 (a replacement starts from scratch) "
                       f"to {nproc} (the node's {nproc} ranks: a spare takes one failed rank's place and a new one "
                       "starts behind it)")


def leader_host(name: str, job_index: int | str = 0) -> str:
    """DNS name of a child Job's pod 0: <jobset>-<replicatedJob>-<job index>-<pod index>.<headless service>."""
    return f"{name}-{REPLICATED_JOB}-{job_index}-0.{name}"


def lighthouse_url(name: str) -> str:
    """The job's torchft Lighthouse: the one pod of the replicated job LIGHTHOUSE_JOB."""
    return f"http://{name}-{LIGHTHOUSE_JOB}-0-0.{name}:{LIGHTHOUSE_PORT}"


def nvme_available(spec: ClusterSpec, group: str) -> bool:
    """Whether the group's nodes mount a RAID0 of instance-store NVMe at ``labels.LOCAL_NVME_MOUNT``."""
    g = spec.group(group)
    return g.local_nvme_raid0 and g.type.nvme_count > 0


def checkpoint_dir(spec: ClusterSpec, req: JobRequest) -> str:
    """The job's durable tier: ``<FSx mount>/<team>/<job>``."""
    return f"{spec.storage.fsx.mount_path.rstrip('/')}/{req.team}/{req.name}"


def peer_secret_name(job: str) -> str:
    return f"{job}-peer"


def peer_secret(req: JobRequest) -> dict[str, Any]:
    """The job's peer-replication secret (32 random bytes, hex): every rank signs its peer requests and replies
    with it (training/checkpoint/peer_auth.py). ``openpod submit`` creates it next to the JobSet, owned by it;
    ``--dry-run`` prints it as the last document, so GitOps output holds it too."""
    import secrets

    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": peer_secret_name(req.name), "namespace": req.team,
                         "labels": {q.TEAM_LABEL: req.team, "app.kubernetes.io/name": req.name}},
            "stringData": {PEER_SECRET_ENV: secrets.token_hex(32)}}


def fsx_mounts(spec: ClusterSpec, team: str) -> list[dict[str, Any]]:
    """FSx as a team's pods see it: its own directory read-write, the datasets read-only, nothing else.

    ``subPath`` mounts (the kubelet resolves them without following symlinks out of the
    volume); the admission policy ``openpod-pod-security`` refuses any other mount of the
    team's FSx claim, so another team's checkpoints - whose DCP metadata torch unpickles on
    restore - are out of reach. Paths inside the container stay ``<mount>/<team>/...`` and
    ``<mount><data_repository_path>``.
    """
    mount, datasets = spec.storage.fsx.mount_path.rstrip("/"), spec.storage.fsx.data_repository_path
    return [{"name": "fsx", "mountPath": f"{mount}/{team}", "subPath": team},
            {"name": "fsx", "mountPath": f"{mount}{datasets}", "subPath": datasets.strip("/"), "readOnly": True}]


def _multi_node_in_process(req: JobRequest) -> bool:
    return req.restart == "in-process" and not req.replica_mode and req.nodes > 1


def launch_command(spec: ClusterSpec, req: JobRequest) -> list[str]:
    """The container command on every node; ``$(VAR)`` is expanded by the kubelet from the container's env."""
    t = spec.group(req.group).type
    nproc = res.processes_per_node(t, req.accelerators_per_node or t.accelerator_count)
    rendezvous = [f"--nnodes={req.nodes // req.groups}", f"--nproc-per-node={nproc}"]
    endpoint = f"--rdzv-endpoint={leader_host(req.name)}:{RDZV_PORT}"
    rdzv_id = f"--rdzv-id={req.name}"
    replica: list[str] = []
    if req.replica_mode:  # each group its own torchrun rendezvous, on its own child Job's pod 0
        group = f"$({REPLICA_ID_ENV})"
        endpoint = f"--rdzv-endpoint={leader_host(req.name, group)}:{RDZV_PORT}"
        rdzv_id = f"--rdzv-id={req.name}-{group}"
        replica = ["--fault-tolerance=replica", f"--replica-id={group}", f"--replicas={req.groups}",
                   f"--min-replicas={req.min_replicas}", f"--lighthouse={lighthouse_url(req.name)}"]
    if req.runtime == "torchrun":
        return ["torchrun", *rendezvous, "--rdzv-backend=c10d", endpoint, f"--rdzv-id={req.name}",
                "--max-restarts=0", *req.script]
    restart: list[str] = []
    if req.restart == "in-process":  # standbys: processes of this pod, within its limits (no extra request)
        restart.append("--restart=in-process")
        if _multi_node_in_process(req):  # node 0 hosts the store; node i runs global ranks i*nproc..
            restart.append(f"--node-rank=$({NODE_RANK_ENV})")
        if req.spare_workers is not None:
            restart.append(f"--spare-workers={req.spare_workers}")
    tiers = [f"--checkpoint-dir={checkpoint_dir(spec, req)}", f"--memory-dir={MEMORY_DIR}"]
    if nvme_available(spec, req.group):
        tiers.append(f"--nvme-dir={labels.LOCAL_NVME_MOUNT}")
    if req.s3_uri:
        tiers.append(f"--s3-uri={req.s3_uri}")
    return ["python", "-m", "training", "run", *rendezvous, endpoint, rdzv_id,
            f"--node-id=$({NODE_NAME_ENV})", f"--bind-host=$({POD_IP_ENV})", f"--max-restarts={LAUNCHER_RESTARTS}",
            f"--stop-timeout={req.grace - STOP_MARGIN_S}", f"--metrics-port={labels.TRAINING_METRICS_PORT}",
            *replica, *restart, *tiers, *req.script]


def build(spec: ClusterSpec, req: JobRequest) -> dict[str, Any]:
    """The JobSet for ``req``; call ``validate`` first."""
    group = spec.group(req.group)
    t = group.type
    accelerators = req.accelerators_per_node or t.accelerator_count
    share = res.pod_share(t, accelerators)
    if req.replica_mode:  # the Lighthouse's share comes out of every trainer pod (LIGHTHOUSE_SHARE)
        share = dataclasses.replace(share, cpu=share.cpu - LIGHTHOUSE_SHARE.cpu,
                                    memory_gib=share.memory_gib - LIGHTHOUSE_SHARE.memory_gib)
    amounts = share.quantities(t)
    resources = {r: res.quantity(r, n) for r, n in amounts.items()}
    hugepages_mi = res.hugepages_share_mi(t, accelerators) if req.hugepages_mi is None else req.hugepages_mi
    if t.efa_supported and hugepages_mi:
        resources[res.HUGEPAGES] = f"{hugepages_mi}Mi"
    shm_gi = req.shm_gi or max(1, min(64, share.memory_gib // 4))
    mount = spec.storage.fsx.mount_path
    team_fsx, datasets_fsx = fsx_mounts(spec, req.team)

    openpod = req.runtime == "openpod"
    nvme = openpod and nvme_available(spec, req.group)
    env = {"OPENPOD_JOB": req.name, "OPENPOD_TEAM": req.team, "OPENPOD_FSX": mount, **req.env}
    if t.efa_supported:
        env.setdefault("FI_PROVIDER", "efa")
        if t.device_resource == res.GPU:
            env.setdefault("FI_EFA_USE_DEVICE_RDMA", "1")
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": req.image,
        "command": launch_command(spec, req),
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "ports": [{"name": "rdzv", "containerPort": RDZV_PORT, "protocol": "TCP"}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, team_fsx, datasets_fsx],
    }
    if openpod:
        container["env"] += [{"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                             {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                             # not optional: without the Secret the kubelet does not start the container (the
                             # peer server would refuse to start on the pod IP without it anyway)
                             {"name": PEER_SECRET_ENV, "valueFrom": {"secretKeyRef": {
                                 "name": peer_secret_name(req.name), "key": PEER_SECRET_ENV, "optional": False}}}]
    if _multi_node_in_process(req):
        container["env"].append({"name": NODE_RANK_ENV, "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.labels['{labels.JOB_COMPLETION_INDEX_LABEL}']"}}})
    if req.replica_mode:  # the child Job's index in the replicated job = the replica group
        container["env"].append({"name": REPLICA_ID_ENV, "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.labels['{JOB_INDEX_LABEL}']"}}})
        if QUORUM_RETRIES_ENV not in req.env:
            container["env"].append({"name": QUORUM_RETRIES_ENV, "value": str(quorum_retries())})
    # Per-job host directories: (volume, host path, mount path in the container).
    scratch = []
    if openpod:
        scratch.append((MEMORY_VOLUME, f"{labels.HOST_MEMORY_TIER}/{req.team}/{req.name}", MEMORY_DIR))
    if nvme:
        scratch.append((NVME_VOLUME, f"{labels.NVME_JOB_ROOT}/{req.team}/{req.name}", labels.LOCAL_NVME_MOUNT))
    container["volumeMounts"] += [{"name": v, "mountPath": m} for v, _, m in scratch]
    # No privilege escalation. The platform's own image (runtime openpod) runs as a non-root user with no
    # capabilities but IPC_LOCK (EFA pins memory); a torchrun job's image is the user's and may need root's
    # default capabilities, so only IPC_LOCK is added there.
    sc: dict[str, Any] = {"allowPrivilegeEscalation": False}
    caps: dict[str, Any] = {"add": ["IPC_LOCK"]} if t.efa_supported else {}
    if openpod:
        caps = {"drop": ["ALL"], **caps}
        sc["runAsNonRoot"] = True
    if caps:
        sc["capabilities"] = caps
    container["securityContext"] = sc

    annotations: dict[str, str] = {}
    preferred = req.prefer_topology or DEFAULT_PREFERRED.get(q.topology_of(group))
    if req.require_topology:
        annotations[REQUIRED_TOPOLOGY] = LEVELS[req.require_topology]
    elif preferred:
        annotations[PREFERRED_TOPOLOGY] = LEVELS[preferred]

    if openpod:  # the runtime's metrics, from each node's local rank 0 (observability/scrape.py)
        annotations.update(labels.scrape_annotations(labels.TRAINING_METRICS_PORT))
        container["ports"].append({"name": "metrics", "containerPort": labels.TRAINING_METRICS_PORT,
                                   "protocol": "TCP"})
    pod_meta: dict[str, Any] = {"labels": {"app.kubernetes.io/name": req.name, q.TEAM_LABEL: req.team}}
    if annotations:
        pod_meta["annotations"] = annotations
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        # Pod Identity gives this service account the platform's training role (bucket access).
        "serviceAccountName": labels.TRAINING_SERVICE_ACCOUNT,
        # Training needs no Kubernetes API token (Pod Identity's token is its own projected volume).
        "automountServiceAccountToken": False,
        "nodeSelector": {labels.INSTANCE_GROUP: group.name},
        "containers": [container],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gi}Gi"}},
            {"name": "fsx", "persistentVolumeClaim": {"claimName": q.FSX_CLAIM}},
        ],
        "terminationGracePeriodSeconds": req.grace,
    }
    # The kubelet creates hostPath and subPath directories root-owned; the training image
    # runs as an unprivileged user, so open up the job's own directories first (the team's
    # FSx directory, the per-job host scratch). The node agent removes the scratch once the
    # job is gone (see docs/node-agent.md, "Job scratch").
    pod_spec["volumes"] += [{"name": v, "hostPath": {"path": h, "type": "DirectoryOrCreate"}} for v, h, _ in scratch]
    pod_spec["initContainers"] = [{
        "name": "job-scratch-dirs",
        "image": req.image,
        "command": ["chmod", "1777", team_fsx["mountPath"], *(m for _, _, m in scratch)],
        # root (the directories are root's), with only what chmod on them needs
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": ["FOWNER"]}},
        "resources": {"requests": INIT_RESOURCES, "limits": INIT_RESOURCES},
        # a copy: one dict in two places would be dumped as a YAML anchor and alias
        "volumeMounts": [dict(team_fsx), *({"name": v, "mountPath": m} for v, _, m in scratch)],
    }]
    # The group's own taints only; never the health-check, unhealthy or hot-spare taints.
    if group.taints:
        pod_spec["tolerations"] = [{"key": x.key, "operator": "Equal", "value": x.value, "effect": x.effect.value}
                                   for x in group.taints]
    # Across nodes of a multi-node-NVLink group, each trainer pod claims the job's IMEX channel (its
    # ComputeDomain: infra/governance/compute_domain.py). The Lighthouse needs no NVLink and copies no claim:
    # each claim is charged one channel of the per-node quota.
    if compute_domain.needed(spec, req):
        pod_spec["resourceClaims"] = [compute_domain.pod_claim(req)]
        container["resources"]["claims"] = [{"name": compute_domain.CLAIM}]
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "name": req.name,
            "namespace": req.team,
            "labels": {QUEUE_LABEL: q.local_queue_name(req.team), PRIORITY_LABEL: req.priority,
                       q.TEAM_LABEL: req.team},
        },
        "spec": {
            "suspend": True,  # Kueue unsuspends on admission
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": req.name},
            # BlockingRecreate: new pods only once every old pod is deleted (jobset@v0.12.0
            # api/jobset/v1alpha2/jobset_types.go:500-508), so a terminating pod's SIGTERM checkpoint is
            # written before the new pods restore. In replica mode a lost group's Job restarting alone
            # (failure_policy) waits the same way for its own old Job (pkg/controllers/jobset_controller.go:920-925).
            "failurePolicy": failure_policy(req),
            # Replica mode: every group's child Job must complete; the Lighthouse's Job is deleted with the
            # other active Jobs once the JobSet is finished (jobset@v0.12.0 pkg/controllers/jobset_controller.go:162-164).
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [REPLICATED_JOB]},
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": req.groups,
                "template": {"spec": {
                    "parallelism": req.nodes // req.groups,
                    "completions": req.nodes // req.groups,
                    "completionMode": "Indexed",
                    "backoffLimit": 0,
                    **({"podFailurePolicy": NODE_LOSS_POLICY} if _multi_node_in_process(req) else {}),
                    "template": {"metadata": pod_meta, "spec": pod_spec},
                }},
            }, *([lighthouse_job(req, pod_spec)] if req.replica_mode else [])],
        },
    }


def failure_policy(req: JobRequest) -> dict[str, Any]:
    """The JobSet's failure policy: a failed child Job restarts the whole JobSet, at most ``max_restarts`` times;
    in replica mode a failed replica group's Job restarts alone (RESTART_GROUP_RULE), and so does a failed
    Lighthouse Job (RESTART_LIGHTHOUSE_RULE) while the groups keep their processes and retry their quorum
    (QUORUM_RETRIES_ENV).

    A trainer pod that fails (a lost node, a launcher out of restarts) fails its child Job with reason
    BackoffLimitExceeded (``backoffLimit: 0``, no podFailurePolicy). The rule restarts only that Job
    (jobset@v0.12.0 api/jobset/v1alpha2/jobset_types.go:425-429; pkg/controllers/failure_policy.go:345-369,
    299-342): the other groups keep their pods and processes, and the new Job's pods heal from them. The
    Lighthouse's Job fails the same way once its pod failed ``backoffLimit + 1`` times, and is then recreated
    alone. Any other failure matches no rule and restarts the JobSet (failure_policy.go:44-45, 64-74). Every restart, of one Job or of all, counts against ``maxRestarts`` (failure_policy.go:226, 350,
    367, 546-550). JobSet acts on the rule only with its RestartJob feature gate on, which the platform's
    JobSet install sets (infra/governance/install.py); its webhook refuses the JobSet otherwise
    (pkg/webhooks/jobset_webhook.go:440-444), so a cluster without the gate fails the submit, not the run.
    """
    policy: dict[str, Any] = {"maxRestarts": req.max_restarts, "restartStrategy": "BlockingRecreate"}
    if req.replica_mode:
        policy["rules"] = [{"name": RESTART_GROUP_RULE, "action": "RestartJob",
                            "onJobFailureReasons": ["BackoffLimitExceeded"],
                            "targetReplicatedJobs": [REPLICATED_JOB]},
                           {"name": RESTART_LIGHTHOUSE_RULE, "action": "RestartJob",
                            "onJobFailureReasons": ["BackoffLimitExceeded"],
                            "targetReplicatedJobs": [LIGHTHOUSE_JOB]}]
    return policy


def quorum_retries() -> int:
    """TORCHFT_QUORUM_RETRIES for the trainers: a retry every QUORUM_RETRY_SECONDS over the runtime's quorum
    timeout (training.config.FaultToleranceConfig.quorum_timeout_seconds)."""
    from training.config import FaultToleranceConfig

    return max(1, FaultToleranceConfig().quorum_timeout_seconds // QUORUM_RETRY_SECONDS - 1)


def lighthouse_job(req: JobRequest, trainer_pod: dict[str, Any]) -> dict[str, Any]:
    """The replicated job running the job's torchft Lighthouse: one pod on one of the job's nodes (same
    group, same taints tolerated), the share LIGHTHOUSE_SHARE, ready once its port accepts connections.
    A crash restarts the container in place (same pod, same DNS name), a lost pod is replaced by the Job
    (``backoffLimit``) and a failed Job by the JobSet (RESTART_LIGHTHOUSE_RULE), each under the same DNS name;
    meanwhile the replica groups' manager servers retry their quorum (QUORUM_RETRIES_ENV) and go on with the
    new Lighthouse (docs/governance.md, "When the Lighthouse is lost")."""
    amounts = {res.CPU: res.quantity(res.CPU, LIGHTHOUSE_SHARE.cpu),
               res.MEMORY: res.quantity(res.MEMORY, LIGHTHOUSE_SHARE.memory_gib)}
    required = req.min_replicas or req.groups
    container = {
        "name": LIGHTHOUSE_CONTAINER,
        "image": req.image,
        "command": ["torchft_lighthouse", "--bind", f"[::]:{LIGHTHOUSE_PORT}", "--min_replicas", str(required)],
        "ports": [{"name": "lighthouse", "containerPort": LIGHTHOUSE_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": LIGHTHOUSE_PORT}, "periodSeconds": 2},
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    spec: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "serviceAccountName": labels.TRAINING_SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "nodeSelector": dict(trainer_pod["nodeSelector"]),
        "containers": [container],
        # The Lighthouse is PID 1 without a SIGTERM handler, so an eviction's SIGTERM is not delivered to it
        # (pid_namespaces(7)): it serves the groups' quorums while they agree to stop and checkpoint, until
        # SIGKILL this long after. Longer would hold every JobSet restart (BlockingRecreate) as long.
        "terminationGracePeriodSeconds": STOP_MARGIN_S,
    }
    spec["tolerations"] = [*trainer_pod.get("tolerations", []),
                           *({"key": k, "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": LIGHTHOUSE_EVICTION_SECONDS} for k in NODE_FAILURE_TAINTS)]
    meta = {"labels": {"app.kubernetes.io/name": req.name, "app.kubernetes.io/component": LIGHTHOUSE_JOB,
                       q.TEAM_LABEL: req.team}}
    return {"name": LIGHTHOUSE_JOB, "replicas": 1,
            "template": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": LAUNCHER_RESTARTS,
                                  "template": {"metadata": meta, "spec": spec}}}}
