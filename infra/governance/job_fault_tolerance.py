"""What the JobSet does when a pod, a node or a replica group fails: its failure policy, the pod failure policy of
in-process restart, and replica mode's torchft Lighthouse.

With ``--fault-tolerance replica`` (docs/training.md, "Replica healing"): one child Job per replica group
(replicatedJob REPLICATED_JOB with ``replicas: R``), the group index from the label JobSet puts on every
pod of a child Job (jobset.sigs.k8s.io/job-index: kubernetes-sigs/jobset@v0.12.0
api/jobset/v1alpha2/jobset_types.go:33-36, set on the pod template in
pkg/controllers/jobset_controller.go:1014-1029), and the job's torchft Lighthouse as a replicated job of
one pod. torchft 0.2.0's ``torchft_lighthouse`` (console script of the torchft wheel, in the training
image): --bind [default [::]:29510], --min_replicas (required), --heartbeat_timeout_ms [5000],
--join_timeout_ms [60000] (its --help, read 2026-11-23).
"""

from __future__ import annotations

from typing import Any

from infra.governance import queues as q
from infra.governance import resources as res
from infra.governance.job_launcher import (
    LAUNCHER_RESTARTS,
    LIGHTHOUSE_JOB,
    LIGHTHOUSE_PORT,
    REPLICATED_JOB,
)
from infra.governance.job_request import STOP_MARGIN_S, JobRequest
from openpod_core import labels

JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
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
# In-process restart over several nodes: a pod lost with its node (the taint manager's eviction from an
# unreachable node, PodGC for a deleted one: both set the DisruptionTarget condition, KEP-3329
# kubernetes/enhancements keps/sig-apps/3329-retriable-and-non-retriable-failures/README.md "New PodConditions",
# checked 2026-11-23) is replaced by the Job controller with the same completion index, without counting against
# backoffLimit ("Ignore", same KEP "JobSpec API"): the other nodes' launchers keep their processes and wait for
# it (training --node-wait). A launcher that exits with an error still fails the Job (backoffLimit 0).
NODE_LOSS_POLICY = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
# What the Lighthouse pod requests. It is carved out of every trainer pod's share (each asks for this much
# less CPU and memory than a whole node gives), so the job's quota charge stays within nodes x node share
# and the Lighthouse fits on any node the job holds.
LIGHTHOUSE_SHARE = res.NodeShare(cpu=1, memory_gib=1)


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
