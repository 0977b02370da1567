"""The command every node of a job runs, and the addresses and directories it is given.

A per-node launcher with c10d rendezvous on pod 0 through the JobSet's headless service: ``torchrun <script>``
(runtime ``torchrun``), or the platform's training runtime ``python -m training run`` (runtime ``openpod``),
which adds the checkpoint tiers - node memory (a per-job directory of the host's ``/dev/shm``, so it outlives
the pods), the node's NVMe RAID0 (a per-job hostPath), the team's FSx directory, optionally S3 - and peer
recovery over the pod IP.
"""

from __future__ import annotations

from infra.governance import resources as res
from infra.governance.job_request import STOP_MARGIN_S, JobRequest, multi_node_in_process
from infra.spec.cluster import ClusterSpec
from openpod_core import labels

REPLICATED_JOB = "node"
LIGHTHOUSE_JOB = "lighthouse"    # replica mode's second replicated job (job_fault_tolerance.lighthouse_job)
RDZV_PORT = 29500
LIGHTHOUSE_PORT = 29510
# --runtime openpod: where the tiers live in the container, and the downward-API env the command expands.
POD_IP_ENV = "POD_IP"        # status.podIP: agent address and peer side-channel (--bind-host)
PEER_SECRET_ENV = labels.PEER_SECRET_ENV
NODE_NAME_ENV = "NODE_NAME"  # spec.nodeName: names the node-local tier directories (--node-id)
REPLICA_ID_ENV = "REPLICA_ID"
# In-process restart over several nodes: each pod's index in its Indexed child Job = its --node-rank.
NODE_RANK_ENV = "NODE_RANK"
# The memory tier lives in host memory (labels.HOST_MEMORY_TIER/<team>/<job>), not in
# the pod's /dev/shm: JobSet recreates every pod after a node loss, and the survivors'
# snapshots (their own and the buddy copies they hold) must outlive that.
MEMORY_DIR = "/var/run/openpod/memory"
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
        if multi_node_in_process(req):  # node 0 hosts the store; node i runs global ranks i*nproc..
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
