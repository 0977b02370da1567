"""The pod template every node of a job runs: the trainer container, its volumes and directories, what it may
do, and the peer-replication Secret it reads."""

from __future__ import annotations

import dataclasses
from typing import Any

from infra.governance import compute_domain
from infra.governance import queues as q
from infra.governance import resources as res
from infra.governance.job_fault_tolerance import (
    JOB_INDEX_LABEL,
    LIGHTHOUSE_SHARE,
    QUORUM_RETRIES_ENV,
    quorum_retries,
)
from infra.governance.job_launcher import (
    MEMORY_DIR,
    NODE_NAME_ENV,
    NODE_RANK_ENV,
    PEER_SECRET_ENV,
    POD_IP_ENV,
    RDZV_PORT,
    REPLICA_ID_ENV,
    launch_command,
    nvme_available,
)
from infra.governance.job_placement import topology_annotations
from infra.governance.job_request import JobRequest, multi_node_in_process
from infra.spec.cluster import ClusterSpec
from openpod_core import labels

CONTAINER = "trainer"
INIT_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
MEMORY_VOLUME = "node-memory"
NVME_VOLUME = "local-nvme"


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


def trainer_pod(spec: ClusterSpec, req: JobRequest) -> dict[str, Any]:
    """The trainer pod template (``metadata`` and ``spec``) of the job's replicated job."""
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
    if multi_node_in_process(req):
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

    annotations = topology_annotations(spec, req)
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
    return {"metadata": pod_meta, "spec": pod_spec}
