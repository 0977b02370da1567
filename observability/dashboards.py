"""Grafana dashboards as code: panels as data, built with grafana-foundation-sdk (Grafana's own builders).

Every panel reads only metrics of observability/metrics.py or records of observability/rules.py
(tests/observability/test_dashboards.py checks each expression with promtool and against the table).
``openpod dashboards --out DIR`` writes one JSON file per dashboard for import into any Grafana with a
Prometheus-compatible data source; the ``datasource`` variable and every panel name the type Amazon Managed
Grafana gives an AMP workspace (DATASOURCE_TYPE).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from observability.platform_rules import CR, WL

DATASOURCE = "${datasource}"
# The data source type Amazon Managed Grafana gives an AMP workspace from version 12 on (facts:
# grafana.amp-datasource-plugin); the core "prometheus" type's SigV4 is deprecated for AMP.
DATASOURCE_TYPE = "grafana-amazonprometheus-datasource"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class PanelSpec:
    title: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"       # timeseries | stat
    description: str = ""
    width: int = 12


@dataclass(frozen=True)
class Variable:
    name: str
    query: str                    # label_values(...) against the data source


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    description: str
    rows: tuple[tuple[str, tuple[PanelSpec, ...]], ...]
    variables: tuple[Variable, ...] = field(default=())


P, Q = PanelSpec, Query
JOB = 'namespace="$namespace", training_job="$training_job"'

DASHBOARDS: tuple[DashboardSpec, ...] = (
    DashboardSpec(
        "openpod-cluster-health", "openpod / cluster health",
        "Node health and remediation: what the node agent found and what the controller does about it.",
        rows=(
            ("Nodes", (
                P("Nodes needing action", (Q("count(openpod_node_agent_node_action == 2) or vector(0)", "replace"),
                                           Q("count(openpod_node_agent_node_action == 1) or vector(0)", "reboot")),
                  kind="stat", width=8),
                P("Node agents down", (Q('count(up{job="openpod-node-agent"} == 0) or vector(0)', "down"),),
                  kind="stat", width=8),
                P("Findings by rule (1h)", (Q("sum by (rule) (increase(openpod_node_agent_findings_total[1h]))",
                                              "{{rule}}"),), width=8),
            )),
            ("Remediation", (
                P("Nodes in remediation / waiting for budget",
                  (Q("sum by (group) (openpod_remediations_in_flight)", "{{group}} in flight"),
                   Q("sum by (group) (openpod_remediation_budget_blocked)", "{{group}} waiting"))),
                P("Remediation actions (1h)",
                  (Q("sum by (group, action) (increase(openpod_remediations_total[1h]))", "{{group}} {{action}}"),
                   Q("sum by (group) (increase(openpod_hot_spare_promotions_total[1h]))", "{{group}} hot spare"))),
                P("Fault to back in service, p90 (6h)",
                  (Q("openpod:remediation_duration_seconds:p90_6h", "{{group}} {{action}}"),), unit="s",
                  description="Seconds from fault detection to the node back in service or replaced."),
                P("Remediation errors and drain deadlines (1h)",
                  (Q("sum by (group) (increase(openpod_remediation_errors_total[1h]))", "{{group}} errors"),
                   Q("sum by (group) (increase(openpod_drain_deadline_exceeded_total[1h]))",
                     "{{group}} drain deadline"))),
            )),
            ("Remediation outcomes", (
                P("Two-node checks by result (1h)",
                  (Q('sum by (group, result) (increase(openpod_pair_checks_total{job="openpod-remediation"}[1h]))',
                     "{{group}} {{result}}"),), width=8),
                P("Nodes the controller gave up on",
                  (Q('sum by (group) (openpod_remediation_failed_nodes{job="openpod-remediation"})', "{{group}}"),),
                  width=8),
                P("Controller replicas holding the Lease",
                  (Q('sum(openpod_remediation_leader{job="openpod-remediation"})', "leaders"),), kind="stat", width=8,
                  description="Exactly one: with none nothing is remediated (OpenpodRemediationLeaderless)."),
            )),
            ("Node state and the agent's own health", (
                P("Nodes not Ready", (Q('count(max by (node) (kube_node_status_condition{job="kube-state-metrics", '
                                        'condition="Ready", status="true"}) == 0) or vector(0)', "not Ready"),),
                  kind="stat", width=6),
                P("Ready changes per node (1h)",
                  (Q('changes((max by (node) (kube_node_status_condition{job="kube-state-metrics", '
                     'condition="Ready", status="true"}))[1h:1m]) > 0', "{{node}}"),), width=6,
                  description="A flapping node (OpenpodNodeReadyFlapping) changes many times."),
                P("Agent check errors (1h)",
                  (Q('sum by (node, check) (increase(openpod_node_agent_check_errors_total'
                     '{job="openpod-node-agent"}[1h])) > 0', "{{node}} {{check}}"),), width=6,
                  description="A check that cannot run leaves its faults undetected."),
                P("Nodes missing accelerators",
                  (Q('count(max by (node, resource) (kube_node_status_allocatable{job="kube-state-metrics", '
                     'resource=~"nvidia_com_gpu|aws_amazon_com_neuron|vpc_amazonaws_com_efa"}) < max by (node, '
                     'resource) (kube_node_status_capacity{job="kube-state-metrics", '
                     'resource=~"nvidia_com_gpu|aws_amazon_com_neuron|vpc_amazonaws_com_efa"})) or vector(0)',
                     "nodes"),), kind="stat", width=6,
                  description="Fewer allocatable GPUs, Neuron devices or EFA interfaces than the node has."),
                P("Watch-only findings (1h)",
                  (Q('sum by (node, rule) (increase(openpod_node_agent_findings_total{job="openpod-node-agent", '
                     'action="none"}[1h])) > 0', "{{node}} {{rule}}"),), width=6,
                  description="NVLink and EFA error counters, application Xids: OpenpodNodeFindingRepeated."),
            )),
            ("Platform controllers (Kueue, JobSet)", (
                P("Reconciles failing, by controller (5m)",
                  (Q(f"sum by (job, controller) (rate(controller_runtime_reconcile_errors_total{{{CR}}}[5m])) "
                     f"/ sum by (job, controller) (rate(controller_runtime_reconcile_total{{{CR}}}[5m]))",
                     "{{job}} {{controller}}"),), unit="percentunit", width=8,
                  description="OpenpodPlatformControllerReconcileErrors fires when it stays above its threshold."),
                P("Work queue depth and longest-running worker",
                  (Q(f"sum by (job, controller) (workqueue_depth{{{CR}}})", "{{job}} {{controller}} depth"),
                   Q(f"max by (job, controller) (workqueue_longest_running_processor_seconds{{{CR}}})",
                     "{{job}} {{controller}} longest (s)")), width=8,
                  description="A queue that never drains or a worker stuck on one item: "
                              "OpenpodPlatformControllerQueueBackedUp."),
                P("Replicas holding the leader Lease",
                  (Q(f"sum by (job) (leader_election_master_status{{{CR}}})", "{{job}}"),), kind="stat", width=8,
                  description="Exactly one per manager; none is OpenpodPlatformControllerLeaderless."),
            )),
            ("Platform workloads", (
                P("Deployments short of available replicas",
                  (Q(f"max by (namespace, deployment) (kube_deployment_spec_replicas{{{WL}}}) - max by "
                     f"(namespace, deployment) (kube_deployment_status_replicas_available{{{WL}}}) > 0",
                     "{{namespace}}/{{deployment}}"),
                   Q(f'max by (namespace, deployment) (kube_deployment_status_condition{{{WL}, '
                     f'condition="Progressing", status="false"}}) == 1', "{{namespace}}/{{deployment}} stuck")),
                  width=8),
                P("DaemonSets: pods not scheduled, unavailable, not updated",
                  (Q(f"sum by (namespace, daemonset) (kube_daemonset_status_desired_number_scheduled{{{WL}}} - "
                     f"kube_daemonset_status_current_number_scheduled{{{WL}}}) > 0", "{{daemonset}} not scheduled"),
                   Q(f"sum by (namespace, daemonset) (kube_daemonset_status_number_unavailable{{{WL}}}) > 0",
                     "{{daemonset}} unavailable"),
                   Q(f"sum by (namespace, daemonset) (kube_daemonset_status_desired_number_scheduled{{{WL}}} - "
                     f"kube_daemonset_status_updated_number_scheduled{{{WL}}}) > 0", "{{daemonset}} not updated"),
                   Q(f"sum by (namespace, daemonset) (kube_daemonset_status_number_available{{{WL}}})",
                     "{{daemonset}} available")), width=8),
                P("Platform container restarts (1h)",
                  (Q(f"max by (namespace, pod, container) (increase(kube_pod_container_status_restarts_total"
                     f"{{{WL}}}[1h])) > 0", "{{namespace}}/{{pod}} {{container}}"),), width=8,
                  description="OpenpodPlatformPodCrashLooping fires at its threshold."),
            )),
        )),
    DashboardSpec(
        "openpod-teams-queues", "openpod / teams and queues",
        "Per team (ClusterQueue): pending and admitted workloads, admission wait, borrowing.",
        rows=(
            ("Queues", (
                P("Pending workloads", (Q("openpod:team_pending_workloads:sum", "{{cluster_queue}} {{status}}"),)),
                P("Admitted active workloads",
                  (Q('sum by (cluster_queue) (kueue_admitted_active_workloads{replica_role!="follower"})',
                     "{{cluster_queue}}"),)),
                P("Admitted workloads (1h)",
                  (Q('sum by (cluster_queue) (increase(kueue_admitted_workloads_total{job="kueue", '
                     'replica_role!="follower"}[1h]))', "{{cluster_queue}}"),)),
                P("Oldest waiting workload per LocalQueue",
                  (Q("time() - min by (namespace, local_queue) (openpod:kueue_workload_pending_since:seconds)",
                     "{{namespace}}/{{local_queue}}"),), unit="s",
                  description="OpenpodWorkloadStarving fires above its threshold."),
                P("Admission wait, p90 (1h)",
                  (Q("openpod:team_admission_wait_seconds:p90_1h", "{{cluster_queue}}"),), unit="s"),
                P("Evictions and preemptions (1h)",
                  (Q('sum by (cluster_queue, reason) (increase(kueue_evicted_workloads_total{replica_role!="follower"}'
                     "[1h]))", "{{cluster_queue}} {{reason}}"),
                   Q('sum by (preempting_cluster_queue) (increase(kueue_preempted_workloads_total'
                     '{replica_role!="follower"}[1h]))', "by {{preempting_cluster_queue}}"))),
            )),
            ("Quota", (
                P("Usage against nominal quota",
                  (Q('sum by (cluster_queue, resource) (kueue_cluster_queue_resource_usage{replica_role!="follower"})',
                     "{{cluster_queue}} {{resource}} used"),
                   Q('sum by (cluster_queue, resource) (kueue_cluster_queue_nominal_quota{replica_role!="follower"})',
                     "{{cluster_queue}} {{resource}} nominal")),
                  description="Needs Kueue's metrics.enableClusterQueueResources."),
                P("Borrowed beyond nominal", (Q("openpod:team_borrowed:sum", "{{cluster_queue}} {{resource}}"),)),
                P("ClusterQueues not active",
                  (Q('max by (cluster_queue) (kueue_cluster_queue_status{job="kueue", replica_role!="follower", '
                     'status="active"}) == 0', "{{cluster_queue}}"),),
                  description="An inactive ClusterQueue admits nothing (OpenpodClusterQueueInactive)."),
            )),
        )),
    DashboardSpec(
        "openpod-job", "openpod / training job",
        "One job: steps, step time, goodput and where the rest of the time went, checkpoints.",
        variables=(Variable("namespace", "label_values(openpod_training_step, namespace)"),
                   Variable("training_job", 'label_values(openpod_training_step{namespace="$namespace"}, '
                                            "training_job)")),
        rows=(
            ("Progress", (
                P("Step", (Q(f"openpod:job_training_step:max{{{JOB}}}", "step"),), width=8),
                P("Step time (10m mean) and its 6h median",
                  (Q(f"openpod:job_step_seconds:avg_10m{{{JOB}}}", "10m mean"),
                   Q(f"openpod:job_step_seconds:median_6h{{{JOB}}}", "6h median")), unit="s", width=8),
                P("Goodput (window) and over the job's life",
                  (Q(f"openpod:job_goodput:ratio_window{{{JOB}}}", "window"),
                   Q(f"max(openpod_goodput_ratio{{{JOB}}})", "whole job")), unit="percentunit", width=8),
            )),
            ("Where the time went", (
                P("Ledger seconds by category",
                  (Q(f"openpod:job_training_seconds:max{{{JOB}}}", "{{category}}"),), unit="s",
                  description="productive, startup, restore, checkpoint_blocking, replayed, rescheduling"),
                P("Checkpoint save failures (all incarnations) and restore fallbacks (this one)",
                  (Q(f"max(openpod_checkpoint_failures{{{JOB}}})", "save failures"),
                   Q(f"max(openpod_checkpoint_restored_older{{{JOB}}})", "restored an older step"),
                   Q(f"max(openpod_checkpoint_restore_source_failures{{{JOB}}})", "unreadable restore sources")),
                  kind="stat"),
            )),
            ("Checkpoint tiers", (
                P("Saves each tier is behind, and the bound",
                  (Q(f"max by (tier) (openpod_checkpoint_tier_lag_saves{{{JOB}}})", "{{tier}}"),
                   Q(f"max(openpod_checkpoint_tier_lag_bound_saves{{{JOB}}})", "bound")),
                  description="OpenpodCheckpointTierLagging fires when a tier stays above the bound."),
                P("Tiers lacking the last step at the job's end",
                  (Q(f"max by (tier) (max_over_time(openpod_checkpoint_final_step_not_durable{{{JOB}}}[1h]))",
                     "{{tier}}"),), kind="stat",
                  description="1: the job ended (exit 4) with its last step missing there "
                              "(OpenpodJobEndedNotDurable); a rerun promotes it."),
            )),
            ("Health", (
                P("Last durable checkpoint age",
                  (Q(f"time() - min(openpod_checkpoint_last_durable_timestamp_seconds{{{JOB}}})", "age"),), unit="s",
                  width=6, description="OpenpodCheckpointTooOld fires above its threshold."),
                P("Compute seconds by rank",
                  (Q(f"max by (rank) (openpod_train_compute_seconds{{{JOB}}})", "rank {{rank}}"),), unit="s", width=6,
                  description="A rank's compute before the gradient collective; the slowest holds up the rest."),
                P("Straggler score by rank",
                  (Q(f"max by (rank) (openpod_train_straggler_score{{{JOB}}})", "rank {{rank}}"),), width=6,
                  description="A rank's compute time over its node's median (1.0 = typical)."),
                P("Starts of the job (restarts)", (Q(f"max(openpod_training_incarnations{{{JOB}}})", "starts"),),
                  width=6, description="OpenpodJobCrashLooping counts the rise within an hour."),
                P("Pods serving metrics", (Q(f'sum(up{{job="openpod-training", {JOB}}})', "up"),
                                           Q(f'count(up{{job="openpod-training", {JOB}}})', "targets")), width=6),
            )),
        )),
)


DASHBOARDS += (
    DashboardSpec(
        "openpod-accelerators", "openpod / accelerators",
        "NVIDIA GPUs per node (dcgm-exporter): utilization, tensor activity, memory, power, temperature, errors; "
        "EFA per node (the node agent); Trainium per node (the Neuron monitor): NeuronCore utilization, device memory, "
        "execution errors, ECC.",
        rows=(
            ("Utilization", (
                P("GPU utilization by node", (Q("avg by (node) (DCGM_FI_DEV_GPU_UTIL)", "{{node}}"),), unit="percent"),
                P("Tensor pipe active by node", (Q("avg by (node) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)", "{{node}}"),),
                  unit="percentunit"),
                P("Framebuffer used by node", (Q("sum by (node) (DCGM_FI_DEV_FB_USED)", "{{node}}"),), unit="decmbytes"),
            )),
            ("Health", (
                P("Power by node", (Q("sum by (node) (DCGM_FI_DEV_POWER_USAGE)", "{{node}}"),), unit="watt"),
                P("Hottest GPU by node", (Q("max by (node) (DCGM_FI_DEV_GPU_TEMP)", "{{node}}"),), unit="celsius"),
                P("Last Xid per GPU (non-zero)", (Q("DCGM_FI_DEV_XID_ERRORS > 0", "{{node}} gpu {{gpu}}"),)),
                P("Rows remapped for uncorrectable errors", (Q("sum by (node) (DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)",
                                                              "{{node}}"),)),
                P("PCIe replays a minute, worst GPU by node, and the lowest bound",
                  (Q("max by (node) (rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[10m])) * 60", "{{node}}"),
                   Q("min by (node) (openpod:gpu_pcie_replay_bound:per_minute)", "{{node}} bound")),
                  description="Above its link's bound (DCGM's: 16 on Gen4 x16, 31 on Gen5 x16) for 15 minutes: "
                              "OpenpodGPUPCIeReplaysHigh."),
                P("NVLink bandwidth counter rate by node",
                  (Q("sum by (node) (rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL[5m]))", "{{node}}"),)),
            )),
            ("EFA (node agent)", (
                P("EFA traffic by node", (Q('sum by (node) (rate(openpod_node_agent_efa_counter{counter=~"tx_bytes|rx_bytes"}'
                                            "[5m]))", "{{node}}"),), unit="Bps"),
                P("EFA receive drops and errors (1h)",
                  (Q('sum by (node, counter) (increase(openpod_node_agent_efa_counter{counter=~"rx_drops|.*_err|'
                     '.*_events"}[1h])) > 0', "{{node}} {{counter}}"),)),
                P("EFA ports not active", (Q("count(openpod_node_agent_efa_port_active == 0) or vector(0)", "ports"),),
                  kind="stat"),
            )),
            ("Trainium (Neuron monitor)", (
                P("NeuronCore utilization by node", (Q("avg by (node) (neuroncore_utilization_ratio)", "{{node}}"),),
                  unit="percentunit"),
                P("Neuron memory used by node", (Q("sum by (node, memory_location) (neuron_runtime_memory_used_bytes)",
                                                   "{{node}} {{memory_location}}"),), unit="bytes"),
                P("Neuron execution errors (1h)", (Q("sum by (node, error_type) (increase(execution_errors_total[1h]))",
                                                     "{{node}} {{error_type}}"),)),
                P("Neuron ECC events (1h)",
                  (Q("sum by (node, event_type) (increase(hardware_ecc_events_total[1h]))", "{{node}} {{event_type}}"),),
                  description="Uncorrected events need a node action; the node agent reads the same faults "
                              "from the Neuron driver's kernel log."),
            )),
        )),
)


def _panel(p: PanelSpec):
    from grafana_foundation_sdk.builders import prometheus, stat, timeseries
    from grafana_foundation_sdk.models.dashboard import DataSourceRef

    builder = (stat.Panel() if p.kind == "stat" else timeseries.Panel()).title(p.title).unit(p.unit).span(p.width)
    if p.description:
        builder = builder.description(p.description)
    for i, q in enumerate(p.queries):
        builder = builder.with_target(prometheus.Dataquery().expr(q.expr).legend_format(q.legend)
                                      .ref_id(chr(ord("A") + i))
                                      .datasource(DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE)))
    return builder.datasource(DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE)).height(8)


def build(d: DashboardSpec):
    """The dashboard model (grafana_foundation_sdk.models.dashboard.Dashboard) of ``d``."""
    from grafana_foundation_sdk.builders import dashboard
    from grafana_foundation_sdk.models.dashboard import DataSourceRef

    b = (dashboard.Dashboard(d.title).uid(d.uid).description(d.description).tags(["openpod"])
         .time("now-6h", "now").refresh("1m").readonly()
         .with_variable(dashboard.DatasourceVariable("datasource").label("Data source").type(DATASOURCE_TYPE)))
    for v in d.variables:
        b = b.with_variable(dashboard.QueryVariable(v.name).label(v.name).query(v.query)
                            .datasource(DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE)))
    for title, panels in d.rows:
        b = b.with_row(dashboard.Row(title))
        for p in panels:
            b = b.with_panel(_panel(p))
    return b.build()


def dashboard_json(d: DashboardSpec) -> dict:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    return json.loads(JSONEncoder(sort_keys=True).encode(build(d)))


def expressions(d: DashboardSpec) -> list[str]:
    return [q.expr for _, panels in d.rows for p in panels for q in p.queries]
