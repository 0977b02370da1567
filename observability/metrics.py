"""The metrics the platform's rules, dashboards and docs rely on: one table, the single source.

Each row is a metric family as it appears on the wire (``prometheus_client`` adds
``_total`` to counters; histograms add ``_bucket``/``_sum``/``_count``), who exports
it, and where. Our own rows are checked against the live registries of the node
agent and the training runtime (tests/observability/test_metrics_table.py); the
upstream rows cite the pinned source file and line. Rules and dashboards may only
use names from this table (tests/observability/test_rules.py enforces it).
"""

from __future__ import annotations

from dataclasses import dataclass

# Scrape jobs (the ``job`` label); the scrape configuration and the rules use these names.
JOB_DETECTOR = "openpod-node-agent"
JOB_CONTROLLER = "openpod-remediation"
JOB_TRAINING = "openpod-training"
JOB_KUEUE = "kueue"
JOB_JOBSET = "jobset"                # the JobSet controller's metrics Service (observability/scrape.py)
JOB_EXPORTERS = "kubernetes-pods"   # annotated exporter pods (observability/scrape.py JOB_OTHER)
JOB_KSM = "kube-state-metrics"      # scraped with honor_labels (observability/scrape.py)
JOB_DCGM = "dcgm-exporter"          # scraped with honor_labels (observability/scrape.py)
JOB_MANAGERS = f"{JOB_KUEUE}, {JOB_JOBSET}"   # controller-runtime's families: both controller managers serve them

KUEUE_METRICS_GO = "kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go"
CHECKED = "2026-11-23"


@dataclass(frozen=True)
class Metric:
    """One metric family. ``labels`` are the exporter's own (scrape adds ``job``, ``namespace``, ``pod``, ``node``)."""

    name: str
    type: str          # counter | gauge | histogram
    unit: str          # seconds, ratio, bytes, 1 (a count), enum
    labels: tuple[str, ...]
    exporter: str      # who serves it (a scrape job above)
    source: str        # our module, or owner/repo@tag:path:line
    help: str
    pending: str = ""  # the issue that adds it, while it is not yet in the exporter's registry
    requires: str = ""  # exporter setting it needs, when not on by default


def _kueue(name: str, typ: str, unit: str, labels: tuple[str, ...], line: int, help: str, requires: str = "") -> Metric:
    return Metric(name, typ, unit, labels, JOB_KUEUE, f"{KUEUE_METRICS_GO}:{line}", help, requires=requires)


DCGM_COUNTERS = "NVIDIA/dcgm-exporter@4.5.3-4.8.2:etc/default-counters.csv"
DCGM_FIELDS = "NVIDIA/DCGM@v4.5.3:dcgmlib/dcgm_fields.h"
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")  # rendermetrics/render_metrics.go:47


def _dcgm(name: str, typ: str, unit: str, line: int, help: str) -> Metric:
    return Metric(name, typ, unit, DCGM_LABELS, JOB_DCGM, f"{DCGM_COUNTERS}:{line}", f"dcgm-exporter: {help}")


_CQ_RESOURCES = ("Kueue Configuration metrics.enableClusterQueueResources: true "
                 "(kubernetes-sigs/kueue@v0.19.2:apis/config/v1beta2/configuration_types.go:182-185, "
                 "cmd/kueue/main.go:303)")

METRICS: tuple[Metric, ...] = (
    # ------------------------------------------------------------------ node agent: detector (one per node)
    Metric("openpod_node_agent_findings_total", "counter", "1", ("rule", "fault", "action"), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.findings)", "Faults found, by rule of node_agent/rules.py"),
    Metric("openpod_node_agent_check_errors_total", "counter", "1", ("check",), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.check_errors)", "Checks that could not run"),
    Metric("openpod_node_agent_check_last_run_timestamp_seconds", "gauge", "seconds", ("check",), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.last_run)", "Unix time each check last ran"),
    Metric("openpod_node_agent_node_action", "gauge", "enum", (), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.node_action)", "Action the node needs: 0 none, 1 reboot, 2 replace"),
    Metric("openpod_node_agent_kernel_lines_total", "counter", "1", (), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.kernel_lines)", "Kernel log lines read"),
    Metric("openpod_node_agent_scratch_removed_total", "counter", "1", (), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.scratch_removed)", "Job scratch directories removed"),
    Metric("openpod_node_agent_scratch_removed_bytes_total", "counter", "bytes", (), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.scratch_removed_bytes)", "Bytes freed by removing job scratch"),
    Metric("openpod_node_agent_deep_check_passed", "gauge", "enum", (), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.deep_check_passed)",
           "1 if the last deep check passed, 0 if it failed or has not run"),
    Metric("openpod_node_agent_efa_counter", "gauge", "1", ("device", "counter"), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.efa_counter)",
           "An EFA device's cumulative hw_counters value (bytes for *_bytes, else events); node_exporter "
           "does not export these (facts: node-exporter.infiniband-efa)"),
    Metric("openpod_node_agent_efa_port_active", "gauge", "enum", ("device",), JOB_DETECTOR,
           "node_agent/metrics.py (DetectorMetrics.efa_port_active)", "1 if the EFA device's port 1 is ACTIVE"),
    # ------------------------------------------------------------------ node agent: remediation controller
    Metric("openpod_remediations_total", "counter", "1", ("group", "action"), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.remediations)", "Remediation actions taken (reboot, replace)"),
    Metric("openpod_remediations_in_flight", "gauge", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.in_flight)", "Nodes being remediated (the budget in use)"),
    Metric("openpod_remediation_budget_blocked", "gauge", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.budget_blocked)",
           "Nodes waiting because the group's remediation budget is used up"),
    Metric("openpod_remediation_escalations_total", "counter", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.escalations)", "Reboots escalated to replacement"),
    Metric("openpod_hot_spare_promotions_total", "counter", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.spare_promotions)", "Hot spares put into service"),
    Metric("openpod_remediation_errors_total", "counter", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.errors)",
           "Remediation steps that failed for one node (cloud or API error); retried"),
    Metric("openpod_drain_deadline_exceeded_total", "counter", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.drain_timeouts)", "Drains that hit their deadline"),
    Metric("openpod_remediation_duration_seconds", "histogram", "seconds", ("group", "action", "outcome"),
           JOB_CONTROLLER, "node_agent/metrics.py (ControllerMetrics, issue 12)",
           "Seconds from fault detection to the node back in service or replaced"),
    Metric("openpod_remediation_conflicts_total", "counter", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.conflicts)",
           "Node writes refused with 409 Conflict (the node changed since it was read); re-read and decided again"),
    Metric("openpod_remediation_leader", "gauge", "1", (), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.leader)",
           "1 if this controller replica holds the Lease and acts (exactly one replica should)"),
    Metric("openpod_remediation_failures_total", "counter", "1", ("group", "reason"), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.failed)",
           "Remediations that reached the terminal failed state (InstanceNotFound, NoProviderID)"),
    Metric("openpod_remediation_failed_nodes", "gauge", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.failed_nodes)",
           "Nodes in the terminal failed state (cordoned, waiting for an operator)"),
    Metric("openpod_pair_checks_total", "counter", "1", ("group", "result"), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.pair_checks)",
           "Two-node all-reduce checks of new or rebooted nodes by result (passed, skipped, BelowFloor, NoResult, "
           "JobFailed, TimedOut)"),
    Metric("openpod_pair_check_held_nodes", "gauge", "1", ("group",), JOB_CONTROLLER,
           "node_agent/metrics.py (ControllerMetrics.pair_held)",
           "Nodes held out of service until their two-node check passes (waiting or running)"),
    # ------------------------------------------------------------------ training runtime (rank 0 of each job)
    Metric("openpod_train_straggler_score", "gauge", "ratio", ("rank",), JOB_TRAINING,
           "training/straggler.py (StragglerCollector: local rank 0 of each node reads heartbeats when scraped)",
           "A local rank's compute time before the gradient collective / the median over its node's ranks "
           "(1.0 = typical; step times cannot show it: collectives make them equal)"),
    Metric("openpod_train_compute_seconds", "gauge", "seconds", ("rank",), JOB_TRAINING,
           "training/straggler.py (StragglerCollector)",
           "Seconds a rank's last step computed before the gradient collective (the rules compare it with the "
           "job-wide median)"),
    Metric("openpod_training_seconds", "gauge", "seconds", ("category",), JOB_TRAINING,
           "training/goodput.py (Goodput: the ledger)",
           "Wall-clock seconds by category over all incarnations: productive, startup, restore, "
           "checkpoint_blocking, replayed, rescheduling"),
    Metric("openpod_goodput_ratio", "gauge", "ratio", (), JOB_TRAINING, "training/goodput.py (Goodput)",
           "Productive seconds / all seconds, over all incarnations"),
    Metric("openpod_training_step", "gauge", "1", (), JOB_TRAINING, "training/goodput.py (Goodput)",
           "Last completed optimizer step (0 until the first step of this incarnation)"),
    Metric("openpod_training_incarnations", "gauge", "1", (), JOB_TRAINING, "training/goodput.py (Goodput)",
           "Starts of the job so far, this one included, read from the job's ledger (a restart adds one; the "
           "rules count restarts per hour as max - min over the job's pods)"),
    Metric("openpod_checkpoint_failures", "gauge", "1", (), JOB_TRAINING, "training/goodput.py (Goodput)",
           "Checkpoint saves and tier promotions that failed, over all incarnations of the job (only grows; "
           "read it with delta() or increase())"),
    Metric("openpod_checkpoint_restore_source_failures", "gauge", "1", (), JOB_TRAINING,
           "training/goodput.py (Goodput)",
           "Checkpoint sources (tiers, peers) still unreadable after retries at this incarnation's restore "
           "(held until the next restore)"),
    Metric("openpod_checkpoint_restored_older", "gauge", "1", (), JOB_TRAINING, "training/goodput.py (Goodput)",
           "1 if this incarnation resumed from an older step than the newest checkpoint any rank saw "
           "(its progress since that step is replayed; held until the next restore)"),
    Metric("openpod_checkpoint_last_durable_timestamp_seconds", "gauge", "seconds", (), JOB_TRAINING,
           "training/goodput.py (Goodput.watch_durable)",
           "Unix time a checkpoint last became durable (FSx, S3), over all incarnations; the job's first start "
           "while none has. Exported by jobs that checkpoint"),
    Metric("openpod_checkpoint_tier_lag_saves", "gauge", "1", ("tier",), JOB_TRAINING,
           "training/goodput.py (Goodput.watch_tier_lag)",
           "Saves due in a further checkpoint tier (nvme, fsx, s3) that this rank has not copied there yet; each "
           "tier copies on its own thread, so a slow one does not hold the others back"),
    Metric("openpod_checkpoint_tier_lag_bound_saves", "gauge", "1", (), JOB_TRAINING,
           "training/goodput.py (Goodput.watch_tier_lag)",
           "The lag (openpod_checkpoint_tier_lag_saves) past which the checkpointer warns "
           "(checkpoint.tier_lag_saves)"),
    Metric("openpod_checkpoint_final_step_not_durable", "gauge", "1", ("tier",), JOB_TRAINING,
           "training/goodput.py (Goodput.finished_not_durable)",
           "Set once, at the end of a job that checkpoints: 1 for each shared tier (fsx, s3) that lacks the job's "
           "last step (the launcher then exits 4 unless --allow-tier-behind), 0 for the others; a job ending so "
           "waits for one scrape to read it (at most 65 s: a finished pod is not scraped)"),
    # ------------------------------------------------------------------ Kueue v0.19.2 (per team: cluster_queue == team)
    _kueue("kueue_pending_workloads", "gauge", "1", ("cluster_queue", "status", "replica_role"), 414,
           "Pending workloads per ClusterQueue; status active (in the admission queue) or inadmissible"),
    _kueue("kueue_admitted_workloads_total", "counter", "1", ("cluster_queue", "priority_class", "replica_role"),
           528, "Admitted workloads per ClusterQueue"),
    _kueue("kueue_admission_wait_time_seconds", "histogram", "seconds",
           ("cluster_queue", "priority_class", "replica_role"), 544,
           "Time from a workload's creation or requeue to its admission"),
    _kueue("kueue_evicted_workloads_total", "counter", "1",
           ("cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"), 633,
           "Evicted workloads per ClusterQueue and reason (Preempted, PodsReadyTimeout, NodeFailures, ...)"),
    _kueue("kueue_preempted_workloads_total", "counter", "1", ("preempting_cluster_queue", "reason", "replica_role"),
           706, "Workloads preempted, per preempting ClusterQueue"),
    _kueue("kueue_admitted_active_workloads", "gauge", "1", ("cluster_queue", "replica_role"), 757,
           "Admitted workloads that are active (unsuspended, not finished)"),
    _kueue("kueue_cluster_queue_status", "gauge", "enum", ("cluster_queue", "status", "replica_role"), 775,
           "1 for the ClusterQueue's status: pending, active or terminated (the others 0)"),
    _kueue("kueue_cluster_queue_resource_usage", "gauge", "resource units",
           ("cohort", "cluster_queue", "flavor", "resource", "replica_role"), 831,
           "ClusterQueue's resource usage per flavor", requires=_CQ_RESOURCES),
    _kueue("kueue_cluster_queue_nominal_quota", "gauge", "resource units",
           ("cohort", "cluster_queue", "flavor", "resource", "replica_role"), 869,
           "ClusterQueue's nominal quota per flavor", requires=_CQ_RESOURCES),
)

METRICS += (
    # ------------------------------------------------------------------ NVIDIA GPUs (dcgm-exporter default counters)
    _dcgm("DCGM_FI_DEV_GPU_UTIL", "gauge", "percent", 23, "GPU utilization"),
    _dcgm("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "ratio", 92, "ratio of cycles the tensor pipe is active"),
    _dcgm("DCGM_FI_DEV_FB_USED", "gauge", "MiB", 46, "framebuffer memory used"),
    _dcgm("DCGM_FI_DEV_GPU_TEMP", "gauge", "celsius", 11, "GPU temperature"),
    _dcgm("DCGM_FI_DEV_POWER_USAGE", "gauge", "watts", 14, "power draw"),
    _dcgm("DCGM_FI_DEV_XID_ERRORS", "gauge", "enum", 29, "value of the last Xid error"),
    _dcgm("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "1", 20, "PCIe retries (replays) since the driver loaded"),
    _dcgm("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "1", 65, "NVLink bandwidth counters, all lanes"),
    _dcgm("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "1", 72, "rows remapped for uncorrectable errors"),
    # not in the default counters: the platform's list adds them (platform_constructs/exporters.py DCGM_COUNTERS)
    Metric("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "1", DCGM_LABELS, JOB_DCGM, f"{DCGM_FIELDS}:810",
           "dcgm-exporter: the GPU's PCIe link generation now (it may train lower when idle)"),
    Metric("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "1", DCGM_LABELS, JOB_DCGM, f"{DCGM_FIELDS}:815",
           "dcgm-exporter: the GPU's PCIe link width now (lanes)"),
)


JOBSET_METRICS_GO = "kubernetes-sigs/jobset@v0.12.0:pkg/metrics/metrics.go"

METRICS += (
    # ------------------------------------------------------------------ JobSet v0.12.0 (its own, beyond controller-runtime's)
    Metric("jobset_failed_total", "counter", "1", ("jobset_name", "namespace"), JOB_JOBSET, f"{JOBSET_METRICS_GO}:30",
           "JobSets that failed for good (counted when the controller sets the Failed condition: restarts spent or "
           "a FailJobSet rule, pkg/controllers/failure_policy.go:417-422); a label set appears at its first failure"),
)


CONTROLLER_RUNTIME = "kubernetes-sigs/controller-runtime@v0.24.1"   # Kueue v0.19.2's pin; JobSet v0.12.0's v0.24.0


def _cr(name: str, typ: str, labels: tuple[str, ...], path: str, line: int, help: str) -> Metric:
    return Metric(name, typ, "seconds" if name.endswith("_seconds") else "1", labels, JOB_MANAGERS,
                  f"{CONTROLLER_RUNTIME}:{path}:{line}", f"controller-runtime: {help}")


METRICS += (
    # ------------------------------------------------------------------ controller-runtime (Kueue's and JobSet's managers)
    _cr("controller_runtime_reconcile_total", "counter", ("controller", "result"),
        "pkg/internal/controller/metrics/metrics.go", 33,
        "reconciles per controller by result (success, error, requeue, requeue_after); every label set starts at 0"),
    _cr("controller_runtime_reconcile_errors_total", "counter", ("controller",),
        "pkg/internal/controller/metrics/metrics.go", 40,
        "reconciles that returned an error (terminal ones and recovered panics included)"),
    _cr("workqueue_depth", "gauge", ("name", "controller", "priority"), "pkg/internal/metrics/workqueue.go", 49,
        "items waiting in the controller's work queue"),
    _cr("workqueue_longest_running_processor_seconds", "gauge", ("name", "controller"),
        "pkg/internal/metrics/workqueue.go", 90, "seconds the longest-running worker of the queue has been busy"),
    _cr("leader_election_master_status", "gauge", ("name",), "pkg/metrics/leaderelection.go", 14,
        "1 if this replica holds the leader Lease named, 0 if it is a standby (client-go@v0.36.2:"
        "tools/leaderelection/leaderelection.go:112,271)"),
)


KSM_NODE_GO = "kubernetes/kube-state-metrics@v2.20.0:internal/store/node.go"   # chart kube-state-metrics-8.4.0


def _ksm(name: str, labels: tuple[str, ...], line: int, help: str) -> Metric:
    # ``node`` comes from wrapNodeFunc (descNodeLabelsDefaultLabels, node.go:42); resource names are sanitized
    # (internal/store/utils.go:38,148: every character outside [a-zA-Z0-9_] becomes "_": nvidia.com/gpu ->
    # nvidia_com_gpu); condition status is "true", "false" or "unknown" (utils.go:40,68-79). Checked 2026-11-25.
    return Metric(name, "gauge", "1", ("node", *labels), JOB_KSM, f"{KSM_NODE_GO}:{line}", f"kube-state-metrics: {help}")


METRICS += (
    # ------------------------------------------------------------------ Kubernetes objects (kube-state-metrics 2.20.0)
    _ksm("kube_node_status_condition", ("condition", "status"), 509,
         "1 for the node's condition (Ready, MemoryPressure, ...) in the status given (true, false, unknown)"),
    _ksm("kube_node_status_allocatable", ("resource", "unit"), 338,
         "allocatable amount per resource (nvidia_com_gpu, aws_amazon_com_neuron, vpc_amazonaws_com_efa, ...)"),
    _ksm("kube_node_status_capacity", ("resource", "unit"), 422,
         "capacity per resource (a device plugin's devices, healthy or not; allocatable counts the healthy)"),
    # Kueue Workloads through kube-state-metrics' custom resource state (platform_constructs/exporters.py
    # KUEUE_WORKLOAD_STATE); customresource_group/kind/version labels are added by kube-state-metrics.
    Metric("openpod_kueue_workload_created_timestamp_seconds", "gauge", "seconds",
           ("namespace", "workload", "local_queue"), JOB_KSM, "platform_constructs/exporters.py (KUEUE_WORKLOAD_STATE)",
           "kube-state-metrics custom resource state: Unix time a Kueue Workload was created"),
    Metric("openpod_kueue_workload_condition", "gauge", "enum", ("namespace", "workload", "local_queue", "type"),
           JOB_KSM, "platform_constructs/exporters.py (KUEUE_WORKLOAD_STATE)",
           "kube-state-metrics custom resource state: 1 if the Workload's condition (QuotaReserved, Admitted, "
           "Finished, Evicted, ...) is True"),
    Metric("openpod_kueue_workload_condition_transition_timestamp_seconds", "gauge", "seconds",
           ("namespace", "workload", "local_queue", "type"), JOB_KSM,
           "platform_constructs/exporters.py (KUEUE_WORKLOAD_STATE)",
           "kube-state-metrics custom resource state: Unix time the Workload's condition last changed"),
    Metric("openpod_kueue_localqueue_info", "gauge", "1", ("namespace", "local_queue", "cluster_queue"), JOB_KSM,
           "platform_constructs/exporters.py (KUEUE_WORKLOAD_STATE)",
           "kube-state-metrics custom resource state: 1 per LocalQueue, labelled with its ClusterQueue"),
)


KSM_STORE = "kubernetes/kube-state-metrics@v2.20.0:internal/store"


def _ksm_obj(name: str, typ: str, labels: tuple[str, ...], store: str, line: int, help: str) -> Metric:
    return Metric(name, typ, "1", labels, JOB_KSM, f"{KSM_STORE}/{store}.go:{line}", f"kube-state-metrics: {help}")


METRICS += (
    # ------------------------------------------------------------------ the platform's workloads (kube-state-metrics)
    _ksm_obj("kube_deployment_spec_replicas", "gauge", ("namespace", "deployment"), "deployment", 268,
             "replicas the Deployment wants"),
    _ksm_obj("kube_deployment_status_replicas_available", "gauge", ("namespace", "deployment"), "deployment", 153,
             "replicas available (ready for minReadySeconds)"),
    _ksm_obj("kube_deployment_status_condition", "gauge", ("namespace", "deployment", "condition", "status"),
             "deployment", 237, "1 for the Deployment's condition (Available, Progressing, ...) in the status given"),
    _ksm_obj("kube_daemonset_status_desired_number_scheduled", "gauge", ("namespace", "daemonset"), "daemonset", 85,
             "nodes that should run the daemon pod"),
    _ksm_obj("kube_daemonset_status_current_number_scheduled", "gauge", ("namespace", "daemonset"), "daemonset", 67,
             "nodes running at least one daemon pod that should"),
    _ksm_obj("kube_daemonset_status_number_available", "gauge", ("namespace", "daemonset"), "daemonset", 103,
             "nodes whose daemon pod is available"),
    _ksm_obj("kube_daemonset_status_number_unavailable", "gauge", ("namespace", "daemonset"), "daemonset", 157,
             "nodes that should run the daemon pod and have none available"),
    _ksm_obj("kube_daemonset_status_updated_number_scheduled", "gauge", ("namespace", "daemonset"), "daemonset", 193,
             "nodes running the updated daemon pod"),
    _ksm_obj("kube_pod_container_status_restarts_total", "counter", ("namespace", "pod", "uid", "container"), "pod",
             441, "restarts of the container (the kubelet's restart count)"),
    _ksm_obj("kube_pod_info", "gauge", ("namespace", "pod", "uid", "host_ip", "pod_ip", "node", "created_by_kind",
                                        "created_by_name", "priority_class", "host_network"), "pod", 642,
             "1 per pod: its node (spec.nodeName, pod.go:661-662), IPs and owner"),
)


def _neuron(name: str, typ: str, unit: str, labels: tuple[str, ...], help: str) -> Metric:
    # Besides its own labels, each series carries the instance's (instance_id, instance_type, availability_zone,
    # region, subnet_id, instance_name); the counters' types are read from their _total names.
    return Metric(name, typ, unit, labels, JOB_EXPORTERS, "facts: neuron-monitor.metric-names",
                  f"neuron-monitor-prometheus.py: {help}")


METRICS += (
    # ------------------------------------------------------------------ AWS Neuron (the Neuron monitor on Trainium nodes)
    _neuron("neuroncore_utilization_ratio", "gauge", "ratio", ("neuroncore",), "NeuronCore utilization, 0..1"),
    _neuron("neuron_runtime_memory_used_bytes", "gauge", "bytes", ("memory_location",),
            "memory a Neuron application uses, on the host or the Neuron device"),
    _neuron("execution_errors_total", "counter", "1", ("error_type",),
            "Neuron executions that failed, by error type (generic, numerical, transient, model, runtime, hardware)"),
    _neuron("hardware_ecc_events_total", "counter", "1", ("event_type", "neuron_device_index"),
            "ECC events per Neuron device (mem_ecc_corrected/uncorrected, sram_ecc_corrected/uncorrected)"),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
assert len(BY_NAME) == len(METRICS), "duplicate metric names in METRICS"

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def family(series_name: str) -> Metric | None:
    """The table row a series name belongs to (``x_bucket`` -> histogram ``x``), or None."""
    if series_name in BY_NAME:
        return BY_NAME[series_name]
    for suffix in HISTOGRAM_SUFFIXES:
        base = series_name.removesuffix(suffix)
        if base != series_name and base in BY_NAME and BY_NAME[base].type == "histogram":
            return BY_NAME[base]
    return None
