"""The failure-mode table: every way the platform fails, the signal that shows it, and the alert that says so.

One row per (component, mode, failure): ``signal`` names the series (and its exporter at the pinned version,
the row of observability/metrics.py) or the CloudWatch metric; ``alerts`` names Prometheus alerts of
observability/rules.py or CloudWatch alarms of :data:`CLOUDWATCH_ALARMS`; a row without an alert says why in
``not_covered``. Severity, receiver, grouping and inhibition are not repeated here: docs/observability.md derives
them from the rules and observability/routing.py, so the table cannot disagree with what runs.
tests/observability/test_failure_modes.py checks that every alert is in the table and every alert the table
names exists; the coverage figure (rows with an alert / rows) is printed in docs/observability.md.

Modes: stops (dead or gone), slows (works, too slowly), flaps (in and out), lies (reports or returns something
untrue), fills (a capacity runs out), loops (fails and retries forever), leaks (a resource held and never
returned).
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("stops", "slows", "flaps", "lies", "fills", "loops", "leaks")
DCGM_CSV = "NVIDIA/dcgm-exporter@4.5.3-4.8.2:etc/default-counters.csv"
CR = "controller-runtime@v0.24.1"
KSM_STORE = "kube-state-metrics@v2.20.0:internal/store"
FSX_METRICS = ("https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html (AWS/FSx, "
               "FreeDataStorageCapacity, dimension FileSystemId; checked 2026-11-28)")


@dataclass(frozen=True)
class CloudWatchAlarm:
    """An alarm CloudWatch evaluates (AWS publishes the metric; Prometheus never sees it), on the alert topic."""

    name: str
    severity: str
    summary: str
    runbook: str


CLOUDWATCH_ALARMS: tuple[CloudWatchAlarm, ...] = (
    CloudWatchAlarm("OpenpodFSxNearlyFull", "critical",
                    "The FSx for Lustre file system has less free capacity than the alarm's threshold",
                    "Delete old checkpoints (`openpod` keeps the newest per job; look for jobs with many), move "
                    "datasets to S3, or raise the file system's storage capacity in the spec (FSx grows in "
                    "place; checkpoint saves fail once it is full: OpenpodCheckpointSaveFailing)."),
    CloudWatchAlarm("OpenpodWatchdogSilent", "critical",
                    "The always-firing watchdog stopped reaching its SNS topic (the dead-man's switch)",
                    "Rule evaluation, the alert manager or SNS delivery is broken: check the Prometheus "
                    "workspace's rule and alert manager logs (AMP vended logs), the alert manager definition and "
                    "the topics' key policies. No other alert can be trusted until it clears."),
    CloudWatchAlarm("OpenpodAmpActiveSeriesNearQuota", "warning",
                    "The Prometheus workspace's active series are past the alarm's share of its quota",
                    "Past the quota AMP refuses new series (HTTP 429) and alerts on them go quiet. Find what grew, "
                    "one scrape job at a time (`topk(10, count by (__name__) ({job=\"JOB\"}))`: a label with "
                    "unbounded values, many new nodes or jobs), drop it with the job's metric_relabel_configs, "
                    "or request a higher Active series per workspace quota for this workspace (Service Quotas, "
                    "resource-level) and set observability.alerts.amp_active_series_quota to it."),
    CloudWatchAlarm("OpenpodAmpIngestionRateNearQuota", "warning",
                    "The Prometheus workspace's ingestion rate is past the alarm's share of its quota",
                    "Past the quota AMP throttles remote write (HTTP 429) and samples are lost. Compare with the "
                    "workspace's applied Ingestion rate per workspace in Service Quotas (the spec's default is an "
                    "earlier published value) and set observability.alerts.amp_ingestion_rate_quota to it; else "
                    "raise scrape_interval_seconds, drop series nobody reads, or request an increase."),
)


@dataclass(frozen=True)
class FailureMode:
    component: str
    mode: str
    failure: str
    signal: str
    alerts: tuple[str, ...] = ()
    not_covered: str = ""   # why no alert, when ``alerts`` is empty


F = FailureMode
ROWS: tuple[FailureMode, ...] = (
    # ------------------------------------------------------------------ GPU
    F("GPU", "stops", "fatal Xid: fallen off the bus, double-bit ECC, GSP error",
      f"DCGM_FI_DEV_XID_ERRORS, dcgm-exporter ({DCGM_CSV}:29); the node agent's xid-* findings",
      ("OpenpodGPUXidError", "OpenpodNodePendingReboot", "OpenpodNodePendingReplacement")),
    F("GPU", "stops", "GPU missing from the device plugin",
      "kube_node_status_allocatable / _capacity (kube-state-metrics 2.20.0 internal/store/node.go:338,422)",
      ("OpenpodNodeAcceleratorsLost",)),
    F("GPU", "slows", "thermal or power throttling, degraded PCIe",
      "openpod_train_compute_seconds / openpod_train_straggler_score (training runtime); the agent's "
      "gpu-thermal, gpu-power-brake, gpu-pcie-degraded findings", ("OpenpodTrainingStraggler",
                                                                   "OpenpodNodeFindingRepeated")),
    F("GPU", "slows", "PCIe replays above DCGM's health-watch rate: a marginal link whose width is intact",
      f"DCGM_FI_DEV_PCIE_REPLAY_COUNTER, dcgm-exporter ({DCGM_CSV}:20), against DCGM's bound for the link's "
      "generation and width (DCGM_FI_DEV_PCIE_LINK_GEN, _WIDTH, which the platform's counters add); the node "
      "agent reads the width only",
      ("OpenpodGPUPCIeReplaysHigh",)),
    F("GPU", "flaps", "the same non-fatal Xid again and again",
      "openpod_node_agent_findings_total{action=\"none\"} (node agent), counted", ("OpenpodNodeFindingRepeated",)),
    F("GPU", "lies", "wrong results (silent data corruption)",
      "the deep check's DCGM diagnostic and NCCL correctness test at node start (findings dcgm-diag-fail, "
      "nccl-wrong)", ("OpenpodDeepCheckFailing", "OpenpodNodePendingReplacement")),
    F("GPU", "leaks", "rows remapped, a remap pending or failed",
      f"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS ({DCGM_CSV}:72); the agent's gpu-remap-pending / "
      "gpu-remap-failure findings", ("OpenpodNodePendingReboot", "OpenpodNodePendingReplacement")),
    F("GPU", "fills", "GPU memory full",
      f"DCGM_FI_DEV_FB_USED ({DCGM_CSV}:46), on the accelerator dashboard",
      not_covered="an out-of-memory is the job's own error, reported in its log and restarted by its runtime "
      "(OpenpodJobCrashLooping if it repeats); no platform fault"),
    # ------------------------------------------------------------------ NVLink / NVSwitch
    F("NVLink/NVSwitch", "stops", "link down, fabric not registered, fatal SXid",
      "the agent's gpu-nvlink-down, gpu-fabric-* and nvswitch-sxid-* findings -> openpod_node_agent_node_action",
      ("OpenpodNodePendingReboot", "OpenpodNodePendingReplacement")),
    F("NVLink/NVSwitch", "slows", "CRC and replay errors rising",
      "the agent's gpu-nvlink-errors finding (NVML counters; dcgm-exporter's NVLink error counters are off in its "
      f"default set, {DCGM_CSV}:48-51)", ("OpenpodNodeFindingRepeated",)),
    F("NVLink/NVSwitch", "lies", "data corrupted across the fabric",
      "the NCCL correctness test of the deep check (nccl-wrong)", ("OpenpodDeepCheckFailing",)),
    # ------------------------------------------------------------------ EFA
    F("EFA", "stops", "device missing or port down",
      "the agent's efa-count, efa-port-down findings; vpc_amazonaws_com_efa allocatable (kube-state-metrics)",
      ("OpenpodNodePendingReboot", "OpenpodNodeAcceleratorsLost")),
    F("EFA", "slows", "error counters rising (retransmits, timeouts)",
      "openpod_node_agent_efa_counter and the agent's efa-counters finding", ("OpenpodNodeFindingRepeated",
                                                                                "OpenpodTrainingStraggler")),
    F("EFA", "flaps", "admin queue timeouts, resets", "the agent's efa-* kernel-log findings",
      ("OpenpodNodePendingReboot", "OpenpodNodeFindingRepeated")),
    F("EFA", "lies", "loopback fails at node start", "the deep check's efa-loopback-fail finding",
      ("OpenpodDeepCheckFailing",)),
    # ------------------------------------------------------------------ host
    F("host", "stops", "instance crashed, kernel panic", "kube_node_status_condition (kube-state-metrics "
      "node.go:509)", ("OpenpodNodeNotReady",)),
    F("host", "slows", "soft lockups, block I/O errors repeated",
      "the agent's soft-lockup-repeated, block-io-error-repeated findings", ("OpenpodNodePendingReboot",)),
    F("host", "lies", "root file system read-only", "the agent's fs-readonly finding", ("OpenpodNodePendingReboot",)),
    F("host", "fills", "local disk full", "the agent's fs-full finding (watch only; it removes job scratch)",
      ("OpenpodNodeFindingRepeated",)),
    F("host", "leaks", "memory pressure", "the agent's memory-pressure finding", ("OpenpodNodeFindingRepeated",)),
    # ------------------------------------------------------------------ kubelet / node
    F("kubelet/node", "stops", "node NotReady or Unknown", "kube_node_status_condition{condition=\"Ready\"}",
      ("OpenpodNodeNotReady",)),
    F("kubelet/node", "flaps", "Ready / Unknown every few minutes", "changes of kube_node_status_condition "
      "over an hour", ("OpenpodNodeReadyFlapping",)),
    F("kubelet/node", "stops", "many nodes at once (AZ, network, control plane, bad AMI)",
      "count of not-Ready nodes against all nodes", ("OpenpodManyNodesNotReady",)),
    F("kubelet/node", "lies", "kubelet or containerd unhealthy while Ready",
      "the agent's kubelet-unhealthy, containerd-down findings", ("OpenpodNodePendingReboot",)),
    # ------------------------------------------------------------------ FSx for Lustre
    F("FSx", "fills", "file system nearly full", f"CloudWatch {FSX_METRICS}", ("OpenpodFSxNearlyFull",)),
    F("FSx", "stops", "mount lost, file system unavailable",
      "openpod_checkpoint_failures, openpod_checkpoint_restore_source_failures (training runtime)",
      ("OpenpodCheckpointSaveFailing", "OpenpodCheckpointSourceUnreadable")),
    F("FSx", "slows", "throughput exhausted", "the job's checkpoint_blocking seconds (goodput ledger)",
      ("OpenpodGoodputBelowTarget",)),
    # ------------------------------------------------------------------ S3
    F("S3", "stops", "access denied, throttled", "openpod_checkpoint_failures (tier promotions)",
      ("OpenpodCheckpointSaveFailing",)),
    F("S3", "slows", "promotion to S3 falls behind",
      "openpod_checkpoint_last_durable_timestamp_seconds (any durable tier), openpod_checkpoint_tier_lag_saves"
      "{tier=\"s3\"}", ("OpenpodCheckpointTooOld", "OpenpodCheckpointTierLagging")),
    F("S3", "lies", "an object unreadable or corrupt at restore", "openpod_checkpoint_restored_older",
      ("OpenpodCheckpointRestoredOlder",)),
    F("S3", "fills", "bucket grows without bound", "S3 storage metrics (CloudWatch AWS/S3 BucketSizeBytes)",
      not_covered="S3 has no capacity limit; its cost is the account's budget alarms, outside the platform"),
    # ------------------------------------------------------------------ Kueue
    F("Kueue", "stops", "controller down or metrics refused", "up{job=\"kueue\"}",
      ("OpenpodScrapeTargetDown", "OpenpodScrapeJobAbsent")),
    F("Kueue", "stops", "admission stuck below quota", "kueue_pending_workloads, kueue_admitted_workloads_total "
      "(kueue@v0.19.2:pkg/metrics/metrics.go:414,528)", ("OpenpodTeamQueueStalled",)),
    F("Kueue", "lies", "ClusterQueue inactive with work waiting", "kueue_cluster_queue_status "
      "(kueue@v0.19.2:pkg/metrics/metrics.go:775)", ("OpenpodClusterQueueInactive",)),
    F("Kueue", "slows", "a workload starved by others", "openpod_kueue_workload_* (kube-state-metrics custom "
      "resource state), kueue_pending_workloads", ("OpenpodWorkloadStarving", "OpenpodTeamQueueStarving")),
    F("Kueue", "leaks", "lent quota not returned: a team starved under its nominal quota while another borrows",
      "kueue_cluster_queue_nominal_quota, kueue_cluster_queue_resource_usage (metrics.go:869,831)",
      ("OpenpodTeamStarvedUnderQuota",)),
    F("Kueue", "fills", "workloads larger than any quota", "kueue_pending_workloads{status=\"inadmissible\"}",
      ("OpenpodWorkloadsInadmissible",)),
    F("Kueue", "loops", "a workload evicted and requeued again and again",
      "kueue_evicted_workloads_total (metrics.go:633), reasons PodsReadyTimeout, AdmissionCheck, NodeFailures "
      "(preemption is by design)", ("OpenpodWorkloadsEvictedRepeatedly",)),
    # ------------------------------------------------------------------ JobSet
    F("JobSet", "stops", "JobSet controller down", "up{job=\"jobset\"} (its metrics Service, jobset@v0.12.0 "
      "charts/jobset/templates/prometheus/manager_metrics_service.yaml)",
      ("OpenpodScrapeTargetDown", "OpenpodScrapeJobAbsent")),
    F("JobSet", "stops", "a JobSet failed for good (restarts spent, a FailJobSet rule): nothing restarts it",
      "jobset_failed_total (jobset@v0.12.0:pkg/metrics/metrics.go:30)", ("OpenpodJobSetFailed",)),
    F("JobSet", "loops", "the JobSet restarts its jobs again and again", "openpod_training_incarnations "
      "(training runtime ledger)", ("OpenpodJobCrashLooping",)),
    # ------------------------------------------------------------------ Kueue's and JobSet's controller managers
    F("controller managers", "loops", "reconciles fail and are retried (API refusals, RBAC, a webhook, an object "
      "it chokes on): Workloads and JobSets not brought to their spec",
      f"controller_runtime_reconcile_errors_total / controller_runtime_reconcile_total ({CR}:"
      "pkg/internal/controller/metrics/metrics.go:40,33), jobs kueue and jobset",
      ("OpenpodPlatformControllerReconcileErrors",)),
    F("controller managers", "slows", "the work queue backs up, or a worker is stuck on one item",
      f"workqueue_depth, workqueue_longest_running_processor_seconds ({CR}:pkg/internal/metrics/workqueue.go:49,90)",
      ("OpenpodPlatformControllerQueueBackedUp",)),
    F("controller managers", "stops", "no replica holds the leader Lease: every manager waits as a standby",
      f"leader_election_master_status ({CR}:pkg/metrics/leaderelection.go:14)",
      ("OpenpodPlatformControllerLeaderless",)),
    F("controller managers", "stops", "the admission webhooks fail or are unreachable",
      f"controller_runtime_webhook_requests_total ({CR}:pkg/webhook/internal/metrics/metrics.go:48)",
      not_covered="the API server refuses the team's JobSet or Workload with the webhook's error, which the user "
      "sees; the webhooks are served by the managers, whose absence is alerted (OpenpodScrapeTargetDown, "
      "OpenpodPlatformDeploymentUnavailable)"),
    # ------------------------------------------------------------------ the platform's own workloads
    F("platform workloads", "stops", "a Deployment short of available replicas or its rollout past its deadline "
      "(Kueue, JobSet, kube-state-metrics, the remediation controller)",
      f"kube_deployment_spec_replicas, _status_replicas_available, _status_condition ({KSM_STORE}/deployment.go:"
      "268,153,237), platform namespaces", ("OpenpodPlatformDeploymentUnavailable",)),
    F("platform workloads", "stops", "a DaemonSet's pods not scheduled, none available, or a rollout that does not "
      "finish (node agent, dcgm-exporter, node exporter, device plugins)",
      f"kube_daemonset_status_* ({KSM_STORE}/daemonset.go:67,85,103,157,193), platform namespaces",
      ("OpenpodPlatformDaemonSetUnavailable",)),
    F("platform workloads", "loops", "a container of a platform pod crash-loops",
      f"kube_pod_container_status_restarts_total ({KSM_STORE}/pod.go:441), platform namespaces",
      ("OpenpodPlatformPodCrashLooping",)),
    # ------------------------------------------------------------------ training job and its checkpoints
    F("training job", "stops", "hang: no step finishes", "openpod_training_step", ("OpenpodJobHung",)),
    F("training job", "stops", "its metrics endpoint stops answering", "up{job=\"openpod-training\"} per job",
      ("OpenpodJobMetricsDown",)),
    F("training job", "loops", "crash loop, before or after step 1", "openpod_training_incarnations",
      ("OpenpodJobCrashLooping",)),
    F("training job", "slows", "step time regression, straggler rank, goodput below target",
      "openpod_training_seconds, openpod_training_step, openpod_train_compute_seconds",
      ("OpenpodStepTimeRegression", "OpenpodTrainingStraggler", "OpenpodGoodputBelowTarget")),
    F("checkpoints", "stops", "saves or promotions fail", "openpod_checkpoint_failures",
      ("OpenpodCheckpointSaveFailing",)),
    F("checkpoints", "slows", "no durable checkpoint for too long",
      "openpod_checkpoint_last_durable_timestamp_seconds", ("OpenpodCheckpointTooOld",)),
    F("checkpoints", "lies", "the newest checkpoint cannot be restored; a source unreadable",
      "openpod_checkpoint_restored_older, openpod_checkpoint_restore_source_failures",
      ("OpenpodCheckpointRestoredOlder", "OpenpodCheckpointSourceUnreadable")),
    F("checkpoints", "slows", "a tier lags the one below it (node memory -> FSx -> S3)",
      "openpod_checkpoint_tier_lag_saves{tier} against openpod_checkpoint_tier_lag_bound_saves (training runtime, "
      "training/checkpoint/promotion.py Promoter.lag)", ("OpenpodCheckpointTierLagging",)),
    F("checkpoints", "lies", "a finished job's last step is not durable in every shared tier (launcher exit 4)",
      "openpod_checkpoint_final_step_not_durable{tier} (training runtime, set at the job's end)",
      ("OpenpodJobEndedNotDurable",)),
    F("training job", "leaks", "host memory of a training process grows", "the agent's memory-pressure finding",
      ("OpenpodNodeFindingRepeated",)),
    # ------------------------------------------------------------------ node agent
    F("node agent", "stops", "agent down on a node", "up{job=\"openpod-node-agent\"}",
      ("OpenpodNodeAgentDown", "OpenpodScrapeJobAbsent")),
    F("node agent", "stops", "no agent on a node with accelerators (its pod pending, evicted or never created)",
      "kube_node_status_capacity (kube-state-metrics node.go:422) of GPUs or Neuron devices with no "
      "up{job=\"openpod-node-agent\"} on the node", ("OpenpodNodeAgentMissing",)),
    F("node agent", "lies", "a check cannot run (tool missing, GPU gone from NVML)",
      "openpod_node_agent_check_errors_total", ("OpenpodNodeAgentCheckErroring",)),
    F("node agent", "loops", "the agent crash-loops", "up{job=\"openpod-node-agent\"} (down most of the time); "
      f"its container's restarts, kube_pod_container_status_restarts_total ({KSM_STORE}/pod.go:441)",
      ("OpenpodNodeAgentDown", "OpenpodPlatformPodCrashLooping")),
    # ------------------------------------------------------------------ remediation controller
    F("remediation controller", "stops", "down or no leader", "up{job=\"openpod-remediation\"}, "
      "openpod_remediation_leader", ("OpenpodRemediationControllerDown", "OpenpodRemediationLeaderless")),
    F("remediation controller", "slows", "remediation slow or stuck, drains hit the deadline",
      "openpod_remediation_duration_seconds, openpod_remediations_in_flight, "
      "openpod_drain_deadline_exceeded_total",
      ("OpenpodRemediationSlow", "OpenpodRemediationStuck", "OpenpodDrainDeadlineExceeded")),
    F("remediation controller", "fills", "the group's remediation budget used up",
      "openpod_remediation_budget_blocked", ("OpenpodRemediationBudgetExhausted",)),
    F("remediation controller", "loops", "cloud or API calls fail and are retried",
      "openpod_remediation_errors_total", ("OpenpodRemediationErrors",)),
    F("remediation controller", "lies", "gave up on a node; a new node fails its pair check",
      "openpod_remediation_failed_nodes, openpod_pair_checks_total",
      ("OpenpodRemediationGaveUp", "OpenpodPairCheckFailed")),
    # ------------------------------------------------------------------ exporters
    F("exporters", "stops", "kube-state-metrics, Kueue or a node's dcgm-exporter down", "up per job",
      ("OpenpodScrapeTargetDown", "OpenpodScrapeJobAbsent")),
    F("exporters", "lies", "a team pod serves the platform's metric names",
      "the series' job label (a team pod is scraped as kubernetes-pods or openpod-training)",
      not_covered="prevented, not alerted: every rule selects its series by job "
      "(tests/observability/test_rules.py, the impostor cases)"),
    F("exporters", "flaps", "pod labels change (a new pod on a GPU, an exporter restart)", "the same series",
      not_covered="prevented, not alerted: rules aggregate to the object (node, GPU, job, group), so churn "
      "neither re-fires nor restarts a for: window"),
    F("exporters", "stops", "node exporter down", "up{job=\"kubernetes-pods\"}",
      not_covered="no rule reads node exporter's series (dashboards only)"),
    # ------------------------------------------------------------------ managed scraper / AMP
    F("managed scraper/AMP", "stops", "scraping, ingestion or rule evaluation stops",
      "the always-firing OpenpodWatchdog reaching its SNS topic (CloudWatch NumberOfMessagesPublished)",
      ("OpenpodWatchdog", "OpenpodWatchdogSilent")),
    F("managed scraper/AMP", "fills", "active series or ingestion limits reached",
      "CloudWatch AWS/Usage ResourceCount, Service Prometheus, Resource ActiveSeries / IngestionRate, ResourceId "
      "the workspace (facts amp.cloudwatch.usage-dimensions, amp.quotas.active-series, "
      "amp.quotas.ingestion-throttling)",
      ("OpenpodAmpActiveSeriesNearQuota", "OpenpodAmpIngestionRateNearQuota")),
    # ------------------------------------------------------------------ Alertmanager
    F("Alertmanager", "stops", "notifications stop", "the watchdog's SNS messages (dead-man's switch)",
      ("OpenpodWatchdogSilent",)),
    F("Alertmanager", "loops", "a notification storm", "notifications per incident",
      not_covered="prevented, not alerted: routing groups by the incident's object and inhibits follow-on "
      "alerts (tests/observability/test_alerting_end_to_end.py; each failure mode's incidents, "
      "observability/incidents.py, in tests/observability/test_incident_pages.py)"),
)


def coverage() -> tuple[int, int]:
    """(rows with an alert, rows)."""
    return sum(1 for r in ROWS if r.alerts), len(ROWS)


def alert_names() -> set[str]:
    return {a for r in ROWS for a in r.alerts}
