"""One incident, one page: for each failure mode of observability/failure_modes.py that has an alert, the
incidents that show it, each with every alert it raises (follow-on ones included), labelled as the rules label
them (``about``; the promtool cases of tests/observability/rule_cases*.py), and what should reach the on-call.

tests/observability/test_incident_pages.py posts each incident alone to the real Alertmanager with the platform's
configuration (observability/routing.py) and counts its notifications: the groups (routing.receiver_of's
group_by) its active alerts fall in. An incident with more than one says why (``why``): two separate problems, or
a double page no inhibition can settle (no label both alerts carry). CloudWatch alarms
(failure_modes.CLOUDWATCH_ALARMS) never pass through Alertmanager: each is one notification.
"""

from __future__ import annotations

from dataclasses import dataclass

from observability.failure_modes import CLOUDWATCH_ALARMS, ROWS, FailureMode
from observability.metrics import JOB_DCGM, JOB_DETECTOR, JOB_KSM, JOB_KUEUE, JOB_JOBSET
from observability.scrape import JOBSET_NAMESPACE, KUEUE_NAMESPACE, MONITORING_NAMESPACE, OPENPOD_NAMESPACE

# The platform's objects as node_agent/deploy.py and the managers' charts name them (observability/platform_rules.py)
AGENT_POD, AGENT_CONTAINER = "node-health-agent-amd64-x2k9p", "detector"      # node_agent/deploy.py DETECTOR
REMEDIATION_POD = "node-remediation-7f9c6-abcde"                              # node_agent/deploy.py CONTROLLER

# Why two notifications where one label cannot join them (see each incident)
JOB_VS_NODE = ("the straggler names the job's rank, the finding the node: the job's owner restarts without the "
               "node, the fleet's on-call drains it; no label joins them")


@dataclass(frozen=True)
class Incident:
    row: tuple[str, str]          # (component, start of the failure) of a failure_modes.ROWS row
    name: str
    alerts: tuple[dict, ...]      # every alert it raises: alertname + the labels its rule gives it
    pages: tuple[str, ...]        # the alerts left active (not inhibited), info ones included
    notifications: int = 1        # notification groups of the active alerts (info ones send none)
    why: str = ""                 # where notifications != 1


def alert(name: str, **labels: str) -> dict:
    return {"alertname": name, **labels}


def _node_down(node: str) -> tuple[dict, ...]:
    """A node that crashed: not Ready, its agent and dcgm-exporter unreachable, its GPUs gone from allocatable."""
    return (alert("OpenpodNodeNotReady", node=node), alert("OpenpodNodeAgentDown", node=node),
            alert("OpenpodScrapeTargetDown", job=JOB_DCGM, node=node),
            alert("OpenpodNodeAcceleratorsLost", node=node, resource="nvidia_com_gpu"))


def _job(alertname: str, ns: str, job: str, **more: str) -> dict:
    return alert(alertname, namespace=ns, training_job=job, **more)


def _manager_down(ns: str, deployment: str, job: str, pod: str) -> tuple[dict, ...]:
    return (alert("OpenpodPlatformPodCrashLooping", namespace=ns, pod=pod, container="manager", node="sys-m"),
            alert("OpenpodScrapeTargetDown", job=job, namespace=ns),
            alert("OpenpodPlatformDeploymentUnavailable", namespace=ns, deployment=deployment))


I = Incident
INCIDENTS: tuple[Incident, ...] = (
    # ------------------------------------------------------------------ GPU
    I(("GPU", "fatal Xid"), "Xid 79 (fallen off the bus): the node marked for replacement",
      (alert("OpenpodGPUXidError", node="gpu-a", gpu="3", xid="79"), alert("OpenpodNodePendingReplacement", node="gpu-a"),
       alert("OpenpodNodeAcceleratorsLost", node="gpu-a", resource="nvidia_com_gpu"),
       alert("OpenpodNodeAgentCheckErroring", node="gpu-a", check="gpu")),
      ("OpenpodNodePendingReplacement",)),
    I(("GPU", "fatal Xid"), "Xid 48 (double-bit ECC): the node waits for its reboot",
      (alert("OpenpodGPUXidError", node="gpu-b", gpu="0", xid="48"), alert("OpenpodNodePendingReboot", node="gpu-b")),
      ("OpenpodNodePendingReboot",)),
    I(("GPU", "GPU missing"), "the device plugin reports 7 of 8 GPUs",
      (alert("OpenpodNodeAcceleratorsLost", node="gpu-c", resource="nvidia_com_gpu"),),
      ("OpenpodNodeAcceleratorsLost",)),
    I(("GPU", "thermal"), "a throttling GPU slows its job's rank",
      (_job("OpenpodTrainingStraggler", "team-a", "llm-1", rank="17"),
       alert("OpenpodNodeFindingRepeated", node="gpu-d", rule="gpu-thermal")),
      ("OpenpodTrainingStraggler", "OpenpodNodeFindingRepeated"), 2, JOB_VS_NODE),
    I(("GPU", "PCIe replays"), "a marginal PCIe link",
      (alert("OpenpodGPUPCIeReplaysHigh", node="gpu-e", gpu="5"),), ("OpenpodGPUPCIeReplaysHigh",)),
    I(("GPU", "the same non-fatal Xid"), "Xid 13 again and again",
      (alert("OpenpodNodeFindingRepeated", node="gpu-f", rule="xid-13"),), ("OpenpodNodeFindingRepeated",)),
    I(("GPU", "wrong results"), "a bad driver: three new nodes fail the DCGM diagnostic (replaced as they fail)",
      (alert("OpenpodDeepCheckFailing"),), ("OpenpodDeepCheckFailing",)),
    I(("GPU", "wrong results"), "one node's NCCL test is wrong and it waits for replacement",
      (alert("OpenpodNodePendingReplacement", node="gpu-g"),), ("OpenpodNodePendingReplacement",)),
    I(("GPU", "rows remapped"), "a row remap pending (Xid 63): the node waits for its reboot",
      (alert("OpenpodNodePendingReboot", node="gpu-h"), alert("OpenpodGPUXidError", node="gpu-h", gpu="2", xid="63")),
      ("OpenpodNodePendingReboot",)),
    I(("GPU", "rows remapped"), "a row remap failed: the node waits for replacement",
      (alert("OpenpodNodePendingReplacement", node="gpu-i"), alert("OpenpodGPUXidError", node="gpu-i", gpu="2", xid="64")),
      ("OpenpodNodePendingReplacement",)),
    # ------------------------------------------------------------------ NVLink / NVSwitch
    I(("NVLink/NVSwitch", "link down"), "an NVLink down (Xid 74): the node waits for its reboot",
      (alert("OpenpodNodePendingReboot", node="nvl-a"), alert("OpenpodGPUXidError", node="nvl-a", gpu="1", xid="74")),
      ("OpenpodNodePendingReboot",)),
    I(("NVLink/NVSwitch", "link down"), "a fatal SXid: the node marked for replacement",
      (alert("OpenpodNodePendingReplacement", node="nvl-c"), alert("OpenpodGPUXidError", node="nvl-c", gpu="4", xid="74"),
       alert("OpenpodNodeAcceleratorsLost", node="nvl-c", resource="nvidia_com_gpu")),
      ("OpenpodNodePendingReplacement",)),
    I(("NVLink/NVSwitch", "CRC"), "NVLink errors slow a rank",
      (alert("OpenpodNodeFindingRepeated", node="nvl-b", rule="gpu-nvlink-errors"),
       _job("OpenpodTrainingStraggler", "team-a", "llm-2", rank="40")),
      ("OpenpodNodeFindingRepeated", "OpenpodTrainingStraggler"), 2, JOB_VS_NODE),
    I(("NVLink/NVSwitch", "data corrupted"), "three nodes' NCCL tests wrong", (alert("OpenpodDeepCheckFailing"),),
      ("OpenpodDeepCheckFailing",)),
    # ------------------------------------------------------------------ EFA
    I(("EFA", "device missing"), "an EFA port down: the device plugin drops it, the node waits for its reboot",
      (alert("OpenpodNodePendingReboot", node="efa-a"),
       alert("OpenpodNodeAcceleratorsLost", node="efa-a", resource="vpc_amazonaws_com_efa")),
      ("OpenpodNodePendingReboot", "OpenpodNodeAcceleratorsLost")),
    I(("EFA", "error counters"), "EFA retransmits slow a rank",
      (alert("OpenpodNodeFindingRepeated", node="efa-b", rule="efa-counters"),
       _job("OpenpodTrainingStraggler", "team-b", "moe-1", rank="3")),
      ("OpenpodNodeFindingRepeated", "OpenpodTrainingStraggler"), 2, JOB_VS_NODE),
    I(("EFA", "admin queue"), "EFA admin timeouts, then a reset that needs a reboot",
      (alert("OpenpodNodeFindingRepeated", node="efa-c", rule="efa-admin-timeout"),
       alert("OpenpodNodePendingReboot", node="efa-c")), ("OpenpodNodePendingReboot",)),
    I(("EFA", "loopback"), "three nodes fail the EFA loopback", (alert("OpenpodDeepCheckFailing"),),
      ("OpenpodDeepCheckFailing",)),
    # ------------------------------------------------------------------ host, kubelet / node
    I(("host", "instance crashed"), "a kernel panic", _node_down("host-a"), ("OpenpodNodeNotReady",)),
    I(("host", "soft lockups"), "repeated soft lockups", (alert("OpenpodNodePendingReboot", node="host-b"),),
      ("OpenpodNodePendingReboot",)),
    I(("host", "root file system"), "root file system read-only",
      (alert("OpenpodNodePendingReboot", node="host-c"),), ("OpenpodNodePendingReboot",)),
    I(("host", "local disk"), "local disk full", (alert("OpenpodNodeFindingRepeated", node="host-d", rule="fs-full"),),
      ("OpenpodNodeFindingRepeated",)),
    I(("host", "memory pressure"), "memory pressure",
      (alert("OpenpodNodeFindingRepeated", node="host-e", rule="memory-pressure"),), ("OpenpodNodeFindingRepeated",)),
    I(("kubelet/node", "node NotReady"), "the kubelet stops reporting", _node_down("kub-a"), ("OpenpodNodeNotReady",)),
    I(("kubelet/node", "Ready / Unknown"), "a flapping node", (alert("OpenpodNodeReadyFlapping", node="kub-b"),),
      ("OpenpodNodeReadyFlapping",)),
    I(("kubelet/node", "many nodes"), "an AZ event: three nodes down, a job's metrics gone",
      (alert("OpenpodManyNodesNotReady"), *_node_down("az-a"), *_node_down("az-b"),
       *_node_down("az-c"), _job("OpenpodJobMetricsDown", "team-a", "llm-3")), ("OpenpodManyNodesNotReady",)),
    I(("kubelet/node", "kubelet or containerd"), "containerd down on a Ready node",
      (alert("OpenpodNodePendingReboot", node="kub-c"),), ("OpenpodNodePendingReboot",)),
    # ------------------------------------------------------------------ FSx, S3, checkpoints
    I(("FSx", "file system nearly full"), "FSx nearly full", (alert("OpenpodFSxNearlyFull"),), ("OpenpodFSxNearlyFull",)),
    I(("FSx", "mount lost"), "a job's FSx mount lost: saves fail, the restart cannot read its checkpoint",
      (_job("OpenpodCheckpointSaveFailing", "team-c", "vit-1"), _job("OpenpodCheckpointSourceUnreadable", "team-c",
       "vit-1"), _job("OpenpodCheckpointTooOld", "team-c", "vit-1")),
      ("OpenpodCheckpointSaveFailing", "OpenpodCheckpointSourceUnreadable", "OpenpodCheckpointTooOld")),
    I(("FSx", "throughput"), "checkpoint saves block the job",
      (_job("OpenpodGoodputBelowTarget", "team-c", "vit-2"),), ("OpenpodGoodputBelowTarget",)),
    I(("S3", "access denied"), "promotions to S3 refused",
      (_job("OpenpodCheckpointSaveFailing", "team-d", "rl-1"), _job("OpenpodCheckpointTierLagging", "team-d", "rl-1",
       tier="s3")), ("OpenpodCheckpointSaveFailing", "OpenpodCheckpointTierLagging")),
    I(("S3", "promotion to S3"), "S3 promotion behind",
      (_job("OpenpodCheckpointTierLagging", "team-d", "rl-2", tier="s3"), _job("OpenpodCheckpointTooOld", "team-d",
       "rl-2")), ("OpenpodCheckpointTierLagging", "OpenpodCheckpointTooOld")),
    I(("S3", "an object unreadable"), "a corrupt object at restore",
      (_job("OpenpodCheckpointRestoredOlder", "team-d", "rl-3"), _job("OpenpodCheckpointSourceUnreadable", "team-d",
       "rl-3")), ("OpenpodCheckpointRestoredOlder", "OpenpodCheckpointSourceUnreadable")),
    I(("checkpoints", "saves or promotions"), "saves fail", (_job("OpenpodCheckpointSaveFailing", "team-e", "a"),
      _job("OpenpodCheckpointTooOld", "team-e", "a")), ("OpenpodCheckpointSaveFailing", "OpenpodCheckpointTooOld")),
    I(("checkpoints", "no durable"), "no durable checkpoint", (_job("OpenpodCheckpointTooOld", "team-e", "b"),),
      ("OpenpodCheckpointTooOld",)),
    I(("checkpoints", "the newest checkpoint"), "the newest checkpoint unreadable: the restart takes an older one",
      (_job("OpenpodCheckpointRestoredOlder", "team-e", "c"), _job("OpenpodCheckpointSourceUnreadable", "team-e",
       "c")), ("OpenpodCheckpointRestoredOlder", "OpenpodCheckpointSourceUnreadable")),
    I(("checkpoints", "a tier lags"), "node memory ahead of FSx",
      (_job("OpenpodCheckpointTierLagging", "team-e", "d", tier="fsx"),), ("OpenpodCheckpointTierLagging",)),
    I(("checkpoints", "a finished job"), "the last step not in S3 at the end",
      (_job("OpenpodJobEndedNotDurable", "team-e", "e", tier="s3"),), ("OpenpodJobEndedNotDurable",)),
    # ------------------------------------------------------------------ Kueue, JobSet and their managers
    I(("Kueue", "controller down"), "the Kueue manager crash-loops",
      _manager_down(KUEUE_NAMESPACE, "kueue-controller-manager", JOB_KUEUE, "kueue-controller-manager-6d9-x"),
      ("OpenpodPlatformPodCrashLooping",)),
    I(("Kueue", "controller down"), "Kueue's metrics refused",
      (alert("OpenpodScrapeTargetDown", job=JOB_KUEUE, namespace=KUEUE_NAMESPACE),), ("OpenpodScrapeTargetDown",)),
    I(("Kueue", "controller down"), "Kueue's metrics Service gone",
      (alert("OpenpodScrapeJobAbsent", job=JOB_KUEUE, namespace=KUEUE_NAMESPACE),), ("OpenpodScrapeJobAbsent",)),
    I(("Kueue", "admission stuck"), "a team's queue admits nothing below its quota",
      (alert("OpenpodTeamQueueStalled", cluster_queue="team-f", status="active"),
       alert("OpenpodWorkloadStarving", namespace="team-f", local_queue="default", cluster_queue="team-f")),
      ("OpenpodTeamQueueStalled", "OpenpodWorkloadStarving")),
    I(("Kueue", "ClusterQueue inactive"), "a ClusterQueue inactive (a flavor deleted)",
      (alert("OpenpodClusterQueueInactive", cluster_queue="team-g"),
       alert("OpenpodTeamQueueStalled", cluster_queue="team-g", status="active"),
       alert("OpenpodWorkloadsInadmissible", cluster_queue="team-g", status="inadmissible"),
       alert("OpenpodWorkloadStarving", namespace="team-g", local_queue="default", cluster_queue="team-g")),
      ("OpenpodClusterQueueInactive", "OpenpodWorkloadsInadmissible")),
    I(("Kueue", "a workload starved"), "a large workload passed by small ones",
      (alert("OpenpodWorkloadStarving", namespace="team-h", local_queue="big", cluster_queue="team-h"),),
      ("OpenpodWorkloadStarving",)),
    I(("Kueue", "a workload starved"), "a workload waits on a LocalQueue that does not exist (no ClusterQueue joined)",
      (alert("OpenpodWorkloadStarving", namespace="team-h", local_queue="typo"),), ("OpenpodWorkloadStarving",)),
    I(("Kueue", "a workload starved"), "a team's queue starving (no Workload data)",
      (alert("OpenpodTeamQueueStarving", cluster_queue="team-h"),), ("OpenpodTeamQueueStarving",)),
    I(("Kueue", "lent quota"), "lent quota not returned",
      (alert("OpenpodTeamStarvedUnderQuota", cohort="all", cluster_queue="team-i", resource="nvidia.com/gpu"),
       alert("OpenpodWorkloadStarving", namespace="team-i", local_queue="default", cluster_queue="team-i")),
      ("OpenpodTeamStarvedUnderQuota", "OpenpodWorkloadStarving")),
    I(("Kueue", "workloads larger"), "a workload larger than any quota",
      (alert("OpenpodWorkloadsInadmissible", cluster_queue="team-j", status="inadmissible"),),
      ("OpenpodWorkloadsInadmissible",), 0, "info: the dashboard, no notification"),
    I(("Kueue", "a workload evicted"), "pods never ready: evicted again and again",
      (alert("OpenpodWorkloadsEvictedRepeatedly", cluster_queue="team-k", reason="PodsReadyTimeout"),),
      ("OpenpodWorkloadsEvictedRepeatedly",)),
    I(("JobSet", "JobSet controller down"), "the JobSet manager crash-loops",
      _manager_down(JOBSET_NAMESPACE, "jobset-controller", JOB_JOBSET, "jobset-controller-5c8-y"),
      ("OpenpodPlatformPodCrashLooping",)),
    I(("JobSet", "JobSet controller down"), "JobSet's metrics Service gone",
      (alert("OpenpodScrapeJobAbsent", job=JOB_JOBSET, namespace=JOBSET_NAMESPACE),), ("OpenpodScrapeJobAbsent",)),
    I(("JobSet", "a JobSet failed"), "restarts spent: the JobSet failed, its pods gone",
      (_job("OpenpodJobSetFailed", "team-a", "llm-4"), _job("OpenpodJobCrashLooping", "team-a", "llm-4"),
       _job("OpenpodJobMetricsDown", "team-a", "llm-4")), ("OpenpodJobSetFailed", "OpenpodJobCrashLooping")),
    I(("JobSet", "the JobSet restarts"), "restarts again and again", (
        _job("OpenpodJobCrashLooping", "team-a", "llm-5"), _job("OpenpodJobMetricsDown", "team-a", "llm-5"),
        _job("OpenpodGoodputBelowTarget", "team-a", "llm-5"), _job("OpenpodCheckpointTooOld", "team-a", "llm-5")),
      ("OpenpodJobCrashLooping",)),
    I(("controller managers", "reconciles fail"), "Kueue's workload controller refused by a webhook",
      (alert("OpenpodPlatformControllerReconcileErrors", job=JOB_KUEUE, controller="workload_controller"),),
      ("OpenpodPlatformControllerReconcileErrors",)),
    I(("controller managers", "the work queue"), "JobSet's queue backs up",
      (alert("OpenpodPlatformControllerQueueBackedUp", job=JOB_JOBSET, controller="jobset"),),
      ("OpenpodPlatformControllerQueueBackedUp",)),
    I(("controller managers", "no replica holds"), "Kueue leaderless",
      (alert("OpenpodPlatformControllerLeaderless", job=JOB_KUEUE),), ("OpenpodPlatformControllerLeaderless",)),
    # ------------------------------------------------------------------ the platform's own workloads
    I(("platform workloads", "a Deployment short"), "one of the remediation controller's two pods unschedulable",
      (alert("OpenpodPlatformDeploymentUnavailable", namespace=OPENPOD_NAMESPACE, deployment="node-remediation"),),
      ("OpenpodPlatformDeploymentUnavailable",)),
    I(("platform workloads", "a Deployment short"), "neither remediation pod scheduled (the system group gone)",
      (alert("OpenpodPlatformDeploymentUnavailable", namespace=OPENPOD_NAMESPACE, deployment="node-remediation"),
       alert("OpenpodScrapeJobAbsent", job="openpod-remediation"), alert("OpenpodNodePendingReboot", node="sys-a"),
       alert("OpenpodNodePendingReplacement", node="sys-b")), ("OpenpodScrapeJobAbsent",)),
    I(("platform workloads", "a Deployment short"), "the Kueue manager's pods unschedulable",
      (alert("OpenpodPlatformDeploymentUnavailable", namespace=KUEUE_NAMESPACE, deployment="kueue-controller-manager"),
       alert("OpenpodScrapeJobAbsent", job=JOB_KUEUE, namespace=KUEUE_NAMESPACE)), ("OpenpodScrapeJobAbsent",)),
    I(("platform workloads", "a DaemonSet's pods"), "the node agent's pods do not fit on two nodes",
      (alert("OpenpodPlatformDaemonSetUnavailable", namespace=OPENPOD_NAMESPACE, daemonset="node-health-agent-amd64"),
       alert("OpenpodNodeAgentMissing", node="ds-a"), alert("OpenpodNodeAgentMissing", node="ds-b")),
      ("OpenpodPlatformDaemonSetUnavailable",)),
    I(("platform workloads", "a container"), "a node's dcgm-exporter crash-loops",
      (alert("OpenpodPlatformPodCrashLooping", namespace=MONITORING_NAMESPACE, pod="dcgm-exporter-q7w",
             container="exporter", node="gpu-j"), alert("OpenpodScrapeTargetDown", job=JOB_DCGM, node="gpu-j")),
      ("OpenpodPlatformPodCrashLooping",)),
    I(("platform workloads", "a container"), "a pod crash-loops without kube_pod_info (no node joined)",
      (alert("OpenpodPlatformPodCrashLooping", namespace="kube-system", pod="nvidia-device-plugin-daemonset-p2",
             container="nvidia-device-plugin-ctr"),), ("OpenpodPlatformPodCrashLooping",)),
    # ------------------------------------------------------------------ training job
    I(("training job", "hang"), "a hung collective", (_job("OpenpodJobHung", "team-b", "moe-2"),
      _job("OpenpodStepTimeRegression", "team-b", "moe-2"), _job("OpenpodGoodputBelowTarget", "team-b", "moe-2"),
      _job("OpenpodCheckpointTooOld", "team-b", "moe-2")), ("OpenpodJobHung",)),
    I(("training job", "its metrics endpoint"), "the job's metrics endpoint stops",
      (_job("OpenpodJobMetricsDown", "team-b", "moe-3"),), ("OpenpodJobMetricsDown",)),
    I(("training job", "crash loop"), "a crash loop before step 1", (_job("OpenpodJobCrashLooping", "team-b", "m4"),
      _job("OpenpodJobMetricsDown", "team-b", "m4"), _job("OpenpodCheckpointTooOld", "team-b", "m4")),
      ("OpenpodJobCrashLooping",)),
    I(("training job", "crash loop"), "a crash loop after step 1: no step finishes either",
      (_job("OpenpodJobCrashLooping", "team-b", "m6"), _job("OpenpodJobHung", "team-b", "m6"),
       _job("OpenpodGoodputBelowTarget", "team-b", "m6"), _job("OpenpodCheckpointTooOld", "team-b", "m6")),
      ("OpenpodJobCrashLooping", "OpenpodJobHung")),
    I(("training job", "step time"), "a slow rank slows the job", (
        _job("OpenpodStepTimeRegression", "team-b", "m5"), _job("OpenpodTrainingStraggler", "team-b", "m5", rank="9"),
        _job("OpenpodGoodputBelowTarget", "team-b", "m5")),
      ("OpenpodStepTimeRegression", "OpenpodTrainingStraggler", "OpenpodGoodputBelowTarget")),
    I(("training job", "host memory"), "a leaking data loader",
      (alert("OpenpodNodeFindingRepeated", node="trn-a", rule="memory-pressure"),), ("OpenpodNodeFindingRepeated",)),
    # ------------------------------------------------------------------ node agent
    I(("node agent", "agent down"), "the agent hangs on a node", (alert("OpenpodNodeAgentDown", node="agt-a"),),
      ("OpenpodNodeAgentDown",)),
    I(("node agent", "agent down"), "the agent's DaemonSets deleted",
      (alert("OpenpodScrapeJobAbsent", job=JOB_DETECTOR),), ("OpenpodScrapeJobAbsent",)),
    I(("node agent", "no agent"), "the agent's pod evicted from a GPU node",
      (alert("OpenpodNodeAgentMissing", node="agt-b"),), ("OpenpodNodeAgentMissing",)),
    I(("node agent", "a check cannot run"), "nvidia-smi missing",
      (alert("OpenpodNodeAgentCheckErroring", node="agt-c", check="gpu"),), ("OpenpodNodeAgentCheckErroring",)),
    I(("node agent", "the agent crash-loops"), "the agent crash-loops on a node",
      (alert("OpenpodNodeAgentDown", node="agt-d"),
       alert("OpenpodPlatformPodCrashLooping", namespace=OPENPOD_NAMESPACE, pod=AGENT_POD, container=AGENT_CONTAINER,
             node="agt-d")),
      ("OpenpodPlatformPodCrashLooping",)),
    # ------------------------------------------------------------------ remediation controller
    I(("remediation controller", "down or no leader"), "the controller crash-loops; nodes wait for it",
      (alert("OpenpodRemediationControllerDown", job="openpod-remediation"),
       alert("OpenpodPlatformDeploymentUnavailable", namespace=OPENPOD_NAMESPACE, deployment="node-remediation"),
       alert("OpenpodPlatformPodCrashLooping", namespace=OPENPOD_NAMESPACE, pod=REMEDIATION_POD, container="controller",
             node="sys-r"),
       alert("OpenpodNodePendingReboot", node="rem-a"), alert("OpenpodNodePendingReplacement", node="rem-b")),
      ("OpenpodRemediationControllerDown",)),
    I(("remediation controller", "down or no leader"), "no replica leads; nodes wait for it",
      (alert("OpenpodRemediationLeaderless"), alert("OpenpodNodePendingReboot", node="rem-c"),
       alert("OpenpodNodePendingReplacement", node="rem-d")),
      ("OpenpodRemediationLeaderless",)),
    I(("remediation controller", "remediation slow"), "drains hit their deadline",
      (alert("OpenpodRemediationSlow", group="gpu", action="replace"), alert("OpenpodRemediationStuck", group="gpu"),
       alert("OpenpodDrainDeadlineExceeded", group="gpu")),
      ("OpenpodRemediationSlow", "OpenpodRemediationStuck", "OpenpodDrainDeadlineExceeded")),
    I(("remediation controller", "the group's remediation budget"), "a rolling fault uses up the budget",
      (alert("OpenpodRemediationBudgetExhausted", group="gpu"), alert("OpenpodNodePendingReboot", node="bud-a"),
       alert("OpenpodNodePendingReplacement", node="bud-b")), ("OpenpodRemediationBudgetExhausted",)),
    I(("remediation controller", "cloud or API calls"), "EC2 calls throttled",
      (alert("OpenpodRemediationErrors", group="gpu"),), ("OpenpodRemediationErrors",)),
    I(("remediation controller", "gave up"), "a replacement fails its pair check and is given up",
      (alert("OpenpodRemediationGaveUp", group="gpu"), alert("OpenpodPairCheckFailed", group="gpu", result="fail")),
      ("OpenpodRemediationGaveUp", "OpenpodPairCheckFailed")),
    # ------------------------------------------------------------------ exporters, AMP, Alertmanager
    I(("exporters", "kube-state-metrics"), "kube-state-metrics hangs",
      (alert("OpenpodScrapeTargetDown", job=JOB_KSM),), ("OpenpodScrapeTargetDown",)),
    I(("exporters", "kube-state-metrics"), "a node's dcgm-exporter hangs",
      (alert("OpenpodScrapeTargetDown", job=JOB_DCGM, node="exp-a"),), ("OpenpodScrapeTargetDown",)),
    I(("exporters", "kube-state-metrics"), "kube-state-metrics uninstalled",
      (alert("OpenpodScrapeJobAbsent", job=JOB_KSM),), ("OpenpodScrapeJobAbsent",)),
    I(("exporters", "kube-state-metrics"), "dcgm-exporter gone from every GPU node",
      (alert("OpenpodScrapeJobAbsent", job=JOB_DCGM),), ("OpenpodScrapeJobAbsent",)),
    I(("managed scraper/AMP", "scraping"), "rule evaluation stops: the watchdog falls silent",
      (alert("OpenpodWatchdogSilent"),), ("OpenpodWatchdogSilent",)),
    I(("managed scraper/AMP", "active series"), "active series near the quota",
      (alert("OpenpodAmpActiveSeriesNearQuota"),), ("OpenpodAmpActiveSeriesNearQuota",)),
    I(("managed scraper/AMP", "active series"), "ingestion rate near the quota",
      (alert("OpenpodAmpIngestionRateNearQuota"),), ("OpenpodAmpIngestionRateNearQuota",)),
    I(("Alertmanager", "notifications stop"), "the alert manager's SNS key policy broken",
      (alert("OpenpodWatchdogSilent"),), ("OpenpodWatchdogSilent",)),
)

CLOUDWATCH = {c.name for c in CLOUDWATCH_ALARMS}


def row_of(incident: Incident) -> FailureMode:
    """The failure-mode row an incident shows; ValueError when none or several match."""
    comp, start = incident.row
    found = [r for r in ROWS if r.component == comp and r.failure.startswith(start)]
    if len(found) != 1:
        raise ValueError(f"incident {incident.name!r}: row {incident.row} matches {len(found)} failure modes "
                         "(wants one: component and the start of its failure)")
    return found[0]


def coverage() -> tuple[int, int]:
    """(rows with an alert that have an incident, rows with an alert)."""
    checked = {id(row_of(i)) for i in INCIDENTS}
    rows = [r for r in ROWS if r.alerts]
    return sum(1 for r in rows if id(r) in checked), len(rows)
