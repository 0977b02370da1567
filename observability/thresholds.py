"""Alert thresholds: the knobs of observability/rules.py, also the spec's ``observability.alerts`` (no imports
beyond pydantic, so the spec model stays light)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AlertThresholds(BaseModel):
    """Alert thresholds (spec ``observability.alerts``); the defaults are what docs/prometheus-rules.yaml holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_replacement_pending_minutes: int = Field(
        30, ge=1, description="a node marked for replacement (node action 2) this long without being replaced")
    remediation_stuck_minutes: int = Field(
        60, ge=1, description="a group with nodes in remediation continuously this long")
    budget_exhausted_minutes: int = Field(
        15, ge=1, description="a group's remediation budget used up with nodes waiting this long")
    remediation_errors: int = Field(3, ge=1, description="failed remediation steps in a group within 30 minutes")
    remediation_p90_minutes: int = Field(
        60, ge=1, description="90th percentile of fault-to-back-in-service time over 6 hours, per group and action")
    deep_check_failed_nodes: int = Field(
        3, ge=1, description="nodes whose deep health check failed within 6 hours (a bad capacity batch or check)")
    node_reboot_pending_minutes: int = Field(
        30, ge=1, description="a node marked for reboot (node action 1) this long without being rebooted")
    node_not_ready_minutes: int = Field(
        10, ge=1, description="a node whose Ready condition is not true this long (a reboot takes less)")
    allocatable_drop_minutes: int = Field(
        10, ge=1, description="a node with fewer allocatable GPUs, Neuron devices or EFA interfaces than it "
        "had (or than its capacity) this long")
    xid_minutes: int = Field(
        30, ge=1, description="a GPU holding an Xid that needs a reboot or replacement this long (the platform "
        "did not clear it); the alert then stays until the node's dcgm-exporter pod restarts or the node is "
        "rebooted or replaced (a GPU reset alone does not clear DCGM's last Xid)")
    pcie_replays_per_minute: int = Field(
        31, ge=1, description="PCIe replays a minute of one GPU, over 10 minutes and for 15 more, that make its link "
        "marginal where dcgm-exporter reports no link generation and width (with them, each GPU has DCGM's "
        "health-watch bound for its own link: 16 on Gen4 x16, 31 on Gen5 x16; facts dcgm.health.pcie-replay-rate)")
    node_agent_missing_minutes: int = Field(
        15, ge=1, description="a node with GPUs or Neuron devices and no node agent scraped on it this long")
    node_flap_changes: int = Field(
        6, ge=2, description="changes of a node's Ready state within an hour that make it flapping")
    fleet_not_ready_nodes: int = Field(
        3, ge=2, description="nodes not Ready at once that make a fleet event (with fleet_not_ready_fraction)")
    fleet_not_ready_fraction: float = Field(
        0.1, gt=0, le=1, description="fraction of all nodes not Ready at once that makes a fleet event")
    watched_finding_repeats: int = Field(
        3, ge=1, description="findings of one watch-only node agent rule (no action) on a node within an hour")
    check_errors: int = Field(
        10, ge=1, description="runs of one node agent check that failed on a node within 30 minutes")
    checkpoint_age_minutes: int = Field(
        120, ge=1, description="a running job whose last durable checkpoint is older than this")
    tier_lag_minutes: int = Field(
        15, ge=1, description="a job's checkpoint tier more saves behind than the job's bound "
        "(checkpoint.tier_lag_saves) this long")
    scrape_down_minutes: int = Field(
        10, ge=1, description="a scrape target the rules depend on down, or its job gone, this long")
    job_restarts_per_hour: int = Field(3, ge=1, description="restarts of a training job within an hour")
    job_metrics_down_minutes: int = Field(
        10, ge=1, description="a training job none of whose pods answers scrapes this long")
    job_hang_minutes: int = Field(15, ge=1, description="a running job whose step has not advanced this long")
    goodput_target: float = Field(
        0.9, gt=0, lt=1, description="a job's goodput over the window below this fraction")
    goodput_window_minutes: int = Field(60, ge=10, description="window of the per-job goodput")
    step_time_regression: float = Field(
        1.5, gt=1, description="a job's 10-minute step time above this multiple of its own 6-hour median")
    straggler_score: float = Field(
        1.5, gt=1, description="a rank whose step time is this multiple of its node's median for 15 minutes")
    queue_stalled_minutes: int = Field(
        30, ge=1, description="a team queue with workloads pending and none admitted this long")
    starvation_minutes: int = Field(
        240, ge=1, description="the oldest workload of a team's LocalQueue pending (no quota reserved) this long")
    queue_inactive_minutes: int = Field(
        10, ge=1, description="a team's ClusterQueue not active, with workloads pending, this long")
    reclaim_minutes: int = Field(
        30, ge=1, description="a team with workloads pending below its nominal quota while another team of its "
        "cohort borrows, this long")
    evictions_per_hour: int = Field(
        3, ge=1, description="a team's workloads evicted for a fault (pods not ready in time, an admission check, "
        "failed nodes) this many times within an hour")
    fsx_free_percent: int = Field(
        10, ge=1, le=50, description="the FSx for Lustre file system's free data capacity under this percentage of "
        "its storage capacity (a CloudWatch alarm on the alert topic)")
    amp_usage_percent: int = Field(
        80, ge=1, le=100, description="the Prometheus workspace's active series or ingestion rate above this "
        "percentage of its quota (CloudWatch alarms on AMP's usage metrics, on the alert topic): past the quota "
        "AMP refuses samples and alerts on them go quiet")
    amp_active_series_quota: int = Field(
        50_000_000, ge=1, le=1_000_000_000, description="the workspace's Active series per workspace quota: AMP's "
        "default (facts amp.quotas.active-series); set the applied value after an increase (Service Quotas, "
        "resource-level)")
    amp_ingestion_rate_quota: int = Field(
        140_000, ge=1, description="the workspace's Ingestion rate per workspace quota, samples per second: the "
        "default an earlier AMP quota page lists (facts amp.quotas.ingestion-throttling; the current page's was "
        "not read); set the applied value from Service Quotas")
    inadmissible_minutes: int = Field(
        30, ge=1, description="a team queue holding workloads Kueue judged inadmissible this long")
    controller_error_ratio: float = Field(
        0.1, gt=0, le=1, description="the fraction of a platform controller's reconciles (Kueue's, JobSet's) that "
        "fail over 5 minutes, for 15, that makes its errors an incident (with controller_errors)")
    controller_errors: int = Field(
        5, ge=1, description="failed reconciles of one platform controller within 15 minutes needed as well (one "
        "failure of a controller that rarely reconciles is no incident)")
    controller_queue_depth: int = Field(
        100, ge=1, description="items a platform controller's work queue never drops below for 15 minutes: "
        "it is not keeping up")
    controller_stuck_minutes: int = Field(
        10, ge=1, description="a platform controller's worker busy with one item this long: a stuck reconcile")
    platform_unavailable_minutes: int = Field(
        15, ge=1, description="a platform Deployment or DaemonSet short of available pods (or its rollout not "
        "progressing) this long")
    platform_restarts_per_hour: int = Field(
        3, ge=1, description="restarts of one container of a platform pod within an hour (a crash loop)")
