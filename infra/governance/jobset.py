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
group, and a second replicated job runs the job's torchft Lighthouse (``job_fault_tolerance.lighthouse_job``).

A node failure makes its pod fail; the JobSet then recreates all its jobs
(``failurePolicy.maxRestarts``) and torchrun resumes from the last checkpoint
once the Auto Scaling group's replacement node has passed its health check.

The request, its validation and the JobSet's parts live in modules of their own: ``job_request`` (what the user
asks for), ``job_validation``, ``job_placement`` (topology), ``job_launcher`` (the command on every node),
``trainer_pod`` (the pod template), ``job_fault_tolerance`` (failure policy, replica mode's Lighthouse).
``openpod submit`` calls this module: ``validate``, then ``build`` and ``peer_secret``.
"""

from __future__ import annotations

from typing import Any

from infra.governance import queues as q
from infra.governance.job_fault_tolerance import NODE_LOSS_POLICY, failure_policy, lighthouse_job
from infra.governance.job_launcher import REPLICATED_JOB
from infra.governance.job_request import JobError, JobRequest, multi_node_in_process
from infra.governance.job_validation import validate
from infra.governance.trainer_pod import peer_secret, trainer_pod
from infra.spec.cluster import ClusterSpec

__all__ = ["JobError", "JobRequest", "build", "peer_secret", "validate"]

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def build(spec: ClusterSpec, req: JobRequest) -> dict[str, Any]:
    """The JobSet for ``req``; call ``validate`` first."""
    pod = trainer_pod(spec, req)
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
                    **({"podFailurePolicy": NODE_LOSS_POLICY} if multi_node_in_process(req) else {}),
                    "template": pod,
                }},
            }, *([lighthouse_job(req, pod["spec"])] if req.replica_mode else [])],
        },
    }
