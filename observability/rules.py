"""The platform's Prometheus recording rules and alerts, as data.

One list of :class:`Record` and one of :class:`Alert`, rendered by :func:`rule_groups`
to the Prometheus rule-file format. The same groups go to the Amazon Managed
Service for Prometheus workspace (platform_constructs/observability.py) and to
``docs/prometheus-rules.yaml`` for an in-cluster Prometheus. Every metric an
expression reads is a row of :mod:`observability.metrics` or another rule's
record; ``promtool check rules`` / ``promtool test rules`` run on the rendered
file in tests/observability/test_rules.py, with a firing and a silent case per alert.

Labels the scrape configuration adds (observability/scrape.py): ``node`` (the
node a pod runs on), ``namespace``, ``pod`` and, for training pods,
``training_job`` (the JobSet's or Job's name).
"""

from __future__ import annotations

import yaml

from node_agent.findings import Action
from node_agent.rules import RULES
from observability.metrics import JOB_CONTROLLER, JOB_DCGM, JOB_DETECTOR, JOB_JOBSET, JOB_KSM, JOB_KUEUE
from observability.platform_rules import platform_alerts
from observability.queue_rules import queue_alerts, queue_records
from observability.rule_base import (  # noqa: F401 (re-exported: the rule types and selectors)
    ACCELERATOR_RESOURCES, BY_JOB, CTL, DCGM, DET, GAP, JOB, KSM, LEADER, READY, RUNBOOKS, TRN, Alert, Record,
    runbook_url, with_manager_namespace)
from observability.thresholds import AlertThresholds

# Scrape jobs the rules read, whose absence would silence them (training jobs come and go: not listed).
REQUIRED_JOBS = (JOB_DETECTOR, JOB_CONTROLLER, JOB_KUEUE, JOB_JOBSET, JOB_KSM)
WATCHDOG = "OpenpodWatchdog"
JS = f'job="{JOB_JOBSET}"'
_JS_FAILED = f"max by (namespace, jobset_name) (jobset_failed_total{{{JS}}})"
# the most each JobSet's count was in the hour before the last minute, whatever pod served it
_JS_BEFORE = f"max by (namespace, jobset_name) (max_over_time(jobset_failed_total{{{JS}}}[1h] offset 1m))"
# a JobSet failing: its count appears, or rises above anything it was in the hour before (one step each)
_JS_NEW = (f"({_JS_FAILED} unless on (namespace, jobset_name) {_JS_BEFORE} "
           f"or {_JS_FAILED} > on (namespace, jobset_name) {_JS_BEFORE})")
# Devices whose nodes run the node agent (node_agent/deploy.py: its DaemonSets select openpod.io/accelerator
# nvidia or neuron), as kube-state-metrics names them; EFA alone does not make such a node.
AGENT_RESOURCES = "nvidia_com_gpu|aws_amazon_com_neuron|aws_amazon_com_neuroncore|aws_amazon_com_neurondevice"


# DCGM's PCIe health watch: replays a minute per lane of a link of each generation (a 1e-12 bit error rate at the
# generation's rate; Gen6 and above as Gen6), times the link's lanes, ceiled (NVIDIA/DCGM@v4.5.3:
# modules/health/DcgmHealthWatch.cpp:1346-1369; facts dcgm.health.pcie-replay-rate).
PCIE_REPLAYS_PER_LANE = {1: 0.15, 2: 0.3, 3: 0.48, 4: 0.96, 5: 1.92, 6: 3.84}


PCIE_BOUND = "openpod:gpu_pcie_replay_bound:per_minute"


def _pcie_replay_bound() -> str:
    """Each GPU's bound in replays a minute, from the fastest generation and widest width its link ran at in the
    10 minutes (DCGM reads the current ones)."""
    gen = f"max by (node, gpu) (max_over_time(DCGM_FI_DEV_PCIE_LINK_GEN{{{DCGM}}}[10m]))"
    width = f"max by (node, gpu) (max_over_time(DCGM_FI_DEV_PCIE_LINK_WIDTH{{{DCGM}}}[10m]))"
    top = max(PCIE_REPLAYS_PER_LANE)
    per_lane = " or ".join(f"({gen} {'>=' if g == top else '=='} {g}) * 0 + {r}"
                           for g, r in sorted(PCIE_REPLAYS_PER_LANE.items()))
    return f"ceil(({per_lane}) * on (node, gpu) {width})"


def _deep_check_rules() -> str:
    """The node agent's deep-check rules that take the node out of service (node_agent/rules.py)."""
    return "|".join(sorted(r.id for r in RULES.values() if r.probe == "deep-check" and r.action != Action.NONE))


def _fatal_xids() -> str:
    """Xid codes whose catalog action is a reboot or replacement (node_agent/catalog/xids.csv)."""
    from node_agent.rules import XID_ENTRIES

    return "|".join(str(c) for c, e in sorted(XID_ENTRIES.items()) if e.action != Action.NONE)


def records() -> list[Record]:
    seconds_by_job = "openpod:job_training_seconds:max"
    step_by_job = "openpod:job_training_step:max"
    return [
        Record(seconds_by_job, f"max by (namespace, training_job, category) (openpod_training_seconds{{{TRN}}})",
               "the goodput ledger per job and category; continuous across the job's pods and restarts"),
        Record(step_by_job, f"max {BY_JOB} (openpod_training_step{{{TRN}}})", "a job's last completed step"),
        Record("openpod:job_goodput:ratio_window",
               f'sum {BY_JOB} (delta({seconds_by_job}{{category="productive"}}[{{window}}])) '
               f"/ sum {BY_JOB} (delta({seconds_by_job}[{{window}}]))",
               "a job's goodput over the alert window: productive seconds / all ledger seconds"),
        Record("openpod:cluster_goodput:ratio_window",
               f'sum (delta({seconds_by_job}{{category="productive"}}[{{window}}])) '
               f"/ sum (delta({seconds_by_job}[{{window}}]))",
               "goodput of all jobs together over the alert window"),
        Record("openpod:job_step_seconds:avg_10m",
               f'sum {BY_JOB} (delta({seconds_by_job}{{category="productive"}}[10m])) '
               f"/ (sum {BY_JOB} (delta({step_by_job}[10m])) > 0)",
               "a job's mean productive seconds per step over 10 minutes"),
        Record("openpod:job_step_seconds:median_6h",
               "quantile_over_time(0.5, openpod:job_step_seconds:avg_10m[6h] offset 10m)",
               "a job's own baseline step time: the median of its 10-minute means over the 6 hours before"),
        *queue_records(),
        Record("openpod:remediation_duration_seconds:p90_6h",
               "histogram_quantile(0.9, sum by (group, action, le) "
               f"(rate(openpod_remediation_duration_seconds_bucket{{{CTL}}}[6h])))",
               "90th percentile of fault detection to node back in service or replaced, per group and action"),
        Record(PCIE_BOUND, _pcie_replay_bound(),
               "each GPU's PCIe replays a minute DCGM's health watch allows its link: ceil(per lane of its "
               "generation x its lanes), from the fastest generation and widest width of the last 10 minutes"),
        Record("openpod:gpu_last_xid:by_node",
               f'count_values by (node, gpu) ("xid", max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS{{{DCGM}}} > 0))',
               "the last Xid each GPU holds, as the label xid (dcgm-exporter's pod labels aggregated away: a new "
               "pod on the GPU is the same series)"),
    ]


def alerts(t: AlertThresholds) -> list[Alert]:
    w = f"{t.goodput_window_minutes}m"
    node = ("node",)
    group = ("group",)
    job = JOB
    not_ready = f"max by (node) (last_over_time({READY}[{GAP}])) == 0"
    return [
        # ---------------------------------------------------------------- nodes and remediation
        Alert("OpenpodNodePendingReplacement",
              f"max by (node) (last_over_time(openpod_node_agent_node_action{{{DET}}}[{GAP}])) == 2",
              f"{t.node_replacement_pending_minutes}m", "warning",
              "Node {{ $labels.node }} has waited for replacement for "
              f"{t.node_replacement_pending_minutes} minutes",
              "The node agent marked the node for replacement; the remediation controller has not replaced it.",
              "Check OpenpodRemediationBudgetExhausted for its group and the openpod-remediation logs; "
              "if the group has no capacity (capacity block, ICE), the node stays cordoned until capacity returns.",
              node),
        Alert("OpenpodNodePendingReboot",
              f"max by (node) (last_over_time(openpod_node_agent_node_action{{{DET}}}[{GAP}])) == 1",
              f"{t.node_reboot_pending_minutes}m", "warning",
              "Node {{ $labels.node }} has waited for a reboot for "
              f"{t.node_reboot_pending_minutes} minutes",
              "The node agent found a fault a reboot clears; the remediation controller has not rebooted the node.",
              "Check OpenpodRemediationBudgetExhausted and OpenpodRemediationControllerDown; "
              "`kubectl describe node {{ $labels.node }}` shows the openpod.io/remediation annotation and the "
              "finding; reboot it by hand if the controller cannot.", node),
        Alert("OpenpodNodeNotReady", not_ready, f"{t.node_not_ready_minutes}m", "warning",
              "Node {{ $labels.node }} has not been Ready for "
              f"{t.node_not_ready_minutes} minutes",
              "The kubelet does not report the node Ready (false or unknown); its pods are lost to their jobs. "
              f"A gap in kube-state-metrics' series shorter than {GAP} does not restart the wait.",
              "`kubectl describe node {{ $labels.node }}` (conditions, kubelet heartbeat); an instance that does "
              "not come back is replaced by marking it (openpod.io/remediation=replace) or terminating it.", node),
        Alert("OpenpodNodeReadyFlapping",
              f"changes((max by (node) ({READY}))[1h:1m]) >= {t.node_flap_changes}", "0m", "warning",
              "Node {{ $labels.node }} changed Ready state {{ $value }} times in an hour",
              "The node goes in and out of Ready (kubelet heartbeats lost and regained, a flapping network): "
              "OpenpodNodeNotReady never fires, since no spell lasts its window, yet every spell kills its pods.",
              "`kubectl describe node {{ $labels.node }}` (the Ready condition's transitions and reasons) and the "
              "kubelet's and the VPC CNI's logs on the node; cordon it and mark it for replacement "
              "(openpod.io/remediation=replace) if it keeps flapping.", node),
        Alert("OpenpodManyNodesNotReady",
              f"count({not_ready}) >= {t.fleet_not_ready_nodes} "
              f"and on () count({not_ready}) >= {t.fleet_not_ready_fraction} * count(max by (node) ({READY}))",
              "5m", "critical",
              "{{ $value }} nodes are not Ready",
              f"At least {t.fleet_not_ready_nodes} nodes and {t.fleet_not_ready_fraction:.0%} of the fleet are not "
              "Ready at once: a common cause (an AZ or network event, the control plane, a bad AMI or driver "
              "rollout), not one node each. The per-node alerts it explains are inhibited.",
              "Look for what the nodes share (AZ, instance group, AMI, launch time) and at the AWS Health "
              "dashboard and the EKS control plane; pause remediation (its budget holds the rest) until the cause "
              "is known.", ()),
        Alert("OpenpodNodeAcceleratorsLost",
              f'max by (node, resource) (kube_node_status_allocatable{{{KSM}, resource=~"{ACCELERATOR_RESOURCES}"}}) '
              f'< max by (node, resource) (kube_node_status_capacity{{{KSM}, resource=~"{ACCELERATOR_RESOURCES}"}}) '
              f'or max by (node, resource) (kube_node_status_allocatable{{{KSM}, resource=~"{ACCELERATOR_RESOURCES}"}}) '
              f'< max by (node, resource) (max_over_time(kube_node_status_allocatable'
              f'{{{KSM}, resource=~"{ACCELERATOR_RESOURCES}"}}[6h]))',
              f"{t.allocatable_drop_minutes}m", "warning",
              "Node {{ $labels.node }}: {{ $labels.resource }} allocatable dropped to {{ $value }}",
              "The device plugin reports fewer healthy GPUs, Neuron devices or EFA interfaces than the node has (or "
              "had): jobs that need the full node cannot be placed on it.",
              "Look for the node agent's findings and an Xid on the node (OpenpodGPUXidError); restart the device "
              "plugin pod only if the hardware checks pass, else mark the node for replacement.",
              ("node", "resource")),
        Alert("OpenpodGPUXidError", f'openpod:gpu_last_xid:by_node{{xid=~"{_fatal_xids()}"}}',
              f"{t.xid_minutes}m", "warning",
              "Node {{ $labels.node }} GPU {{ $labels.gpu }}: Xid {{ $labels.xid }} not cleared",
              f"DCGM holds an Xid whose catalog action is a reboot or a replacement (a double-bit ECC error, a GPU "
              f"fallen off the bus, ...) for {t.xid_minutes} minutes: the platform did not clear it. It stays "
              "active until the node's dcgm-exporter pod restarts or the node is rebooted or replaced (the "
              "exporter's DCGM keeps the last Xid in memory; a GPU reset writes no new value); a new pod on the "
              "GPU does not re-fire it.",
              "Look the Xid up in docs/node-agent-rules.md; check OpenpodNodePendingReboot/Replacement and the "
              "node agent's finding on the node; reset the GPU and then delete the node's dcgm-exporter pod "
              "(the alert clears), or mark the node for replacement.",
              ("node", "gpu", "xid")),
        Alert("OpenpodGPUPCIeReplaysHigh",
              f"max by (node, gpu) (rate(DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{DCGM}}}[10m])) * 60 "
              f"> on (node, gpu) ({PCIE_BOUND} or max by (node, gpu) "
              f"(DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{DCGM}}}) * 0 + {t.pcie_replays_per_minute})", "15m", "warning",
              "Node {{ $labels.node }} GPU {{ $labels.gpu }}: {{ $value | humanize }} PCIe replays a minute",
              "For 15 minutes the GPU's PCIe link has retried transfers more often (over 10 minutes) than DCGM's "
              "health watch allows its link: ceil(replays per lane of its generation x its lanes), 16 a minute "
              "on Gen4 x16, 31 on Gen5 x16 (from the fastest generation and widest width the link ran at in the "
              f"10 minutes; {t.pcie_replays_per_minute} where the exporter reports no link): a marginal link or "
              "riser. Its width "
              "can be intact, so the node agent's gpu-pcie-degraded does not see it, and every host-device copy "
              "(input batches, checkpoint saves) slows; a new pod on the GPU is the same alert.",
              "DCGM's advice (reseat the card, run the field diagnostic) means a new host on EC2: check whether the "
              "job on the node is a straggler (OpenpodTrainingStraggler), then mark the node for replacement at "
              "the job's next checkpoint (`kubectl annotate node {{ $labels.node }} openpod.io/remediation=replace`).",
              ("node", "gpu")),
        Alert("OpenpodNodeAgentMissing",
              f'max by (node) (kube_node_status_capacity{{{KSM}, resource=~"{AGENT_RESOURCES}"}}) > 0 '
              f"unless on (node) max by (node) (max_over_time(up{{{DET}}}[{GAP}])) "
              f"and on () count(up{{{DET}}}) > 0", f"{t.node_agent_missing_minutes}m", "warning",
              "Node {{ $labels.node }} has accelerators and no node agent",
              "The node reports GPUs or Neuron devices, but no node agent is scraped on it: its DaemonSet pod is "
              "pending (the node's CPU or memory taken), was evicted, or was never created (the node lacks the "
              "openpod.io/accelerator label its DaemonSets select). Its faults go undetected, and OpenpodNodeAgentDown "
              "cannot fire without a target. With no agent anywhere, OpenpodScrapeJobAbsent says so instead.",
              "`kubectl -n openpod-system get pods -o wide --field-selector spec.nodeName={{ $labels.node }}` and "
              "`kubectl -n openpod-system get daemonsets` (desired against ready); `kubectl describe node "
              "{{ $labels.node }}` for its labels and taints.", node),
        Alert("OpenpodNodeFindingRepeated",
              f'sum by (node, rule) (increase(openpod_node_agent_findings_total{{{DET}, action="none"}}[1h])) '
              f">= {t.watched_finding_repeats}", "0m", "warning",
              "Node {{ $labels.node }}: {{ $labels.rule }} found {{ printf \"%.0f\" $value }} times in an hour",
              "A fault the node agent only watches (NVLink error counters rising, EFA error counters, an "
              "application Xid, a correctable ECC storm) keeps coming back on this node: counted, not merely "
              "present, so the same Xid repeated is seen.",
              "Read the rule in docs/node-agent-rules.md and the node's Events (`kubectl describe node "
              "{{ $labels.node }}`); if it rises with a job's slowdown (OpenpodTrainingStraggler), cordon the node "
              "and mark it for reboot.", ("node", "rule")),
        Alert("OpenpodNodeAgentCheckErroring",
              f"sum by (node, check) (increase(openpod_node_agent_check_errors_total{{{DET}}}[30m])) "
              f">= {t.check_errors}", "0m", "warning",
              "Node {{ $labels.node }}: the agent's {{ $labels.check }} check keeps failing to run",
              f"The check could not run {t.check_errors} times or more in 30 minutes (a tool missing, a GPU "
              "gone from NVML/DCGM, a device that does not answer): the faults it looks for go undetected.",
              "`kubectl -n openpod-system logs` of the node-health-agent pod on the node names the error; a GPU "
              "missing from the driver is a fault itself (mark the node for reboot).", ("node", "check")),
        Alert("OpenpodRemediationBudgetExhausted",
              f"max by (group) (last_over_time(openpod_remediation_budget_blocked{{{CTL}}}[{GAP}])) > 0",
              f"{t.budget_exhausted_minutes}m", "critical",
              "Group {{ $labels.group }}: {{ $value }} nodes wait for a remediation slot",
              "The group's remediation budget is in use; more faulty nodes queue behind it (their own "
              "pending-reboot and pending-replacement alerts are inhibited).",
              "Look for a common cause (AZ event, bad AMI, driver rollout) before raising the budget; "
              "check OpenpodRemediationStuck for nodes that never finish.", group),
        Alert("OpenpodRemediationStuck",
              f"max by (group) (last_over_time(openpod_remediations_in_flight{{{CTL}}}[{GAP}])) > 0",
              f"{t.remediation_stuck_minutes}m", "warning",
              "Group {{ $labels.group }} has had nodes in remediation for "
              f"{t.remediation_stuck_minutes} minutes",
              "Nodes of the group have been in remediation continuously; one may be stuck in drain or replacement.",
              "List nodes with the openpod remediation labels (`kubectl get nodes -l openpod.io/remediation`); "
              "a drain blocked by a PodDisruptionBudget or an ASG that cannot launch keeps a slot forever.", group),
        Alert("OpenpodDrainDeadlineExceeded",
              f"sum by (group) (increase(openpod_drain_deadline_exceeded_total{{{CTL}}}[1h])) > 0", "0m",
              "warning", "Group {{ $labels.group }}: a drain hit its deadline",
              "Pods did not leave a node within the drain deadline; the node was remediated with them on it.",
              "Find the job whose pods ignored SIGTERM or whose PodDisruptionBudget blocked eviction; "
              "its checkpoint-on-SIGTERM did not finish in time.", group),
        Alert("OpenpodPairCheckFailed",
              f'sum by (group, result) (increase(openpod_pair_checks_total{{{CTL}, '
              f'result=~"BelowFloor|NoResult|JobFailed|TimedOut"}}[1h])) > 0', "0m",
              "warning", "Group {{ $labels.group }}: a new or rebooted node failed its two-node check "
              "({{ $labels.result }})",
              "The node all-reduced with a healthy peer below the floor, printed no result or timed out; it is held "
              "out of service (taint openpod.io/pair-check=failed) and not replaced automatically.",
              "`kubectl get nodes -l openpod.io/instance-group={{ $labels.group }}` and the PairCheckFailed "
              "condition (reason, peer); check the peer, then remove the openpod.io/pair-check annotation to check "
              "again, or replace the node.", ("group", "result")),
        Alert("OpenpodRemediationErrors",
              f"sum by (group) (increase(openpod_remediation_errors_total{{{CTL}}}[30m])) >= {t.remediation_errors}",
              "0m", "warning", "Group {{ $labels.group }}: remediation steps keep failing",
              "Cloud or Kubernetes API calls of the remediation controller failed repeatedly (retried).",
              "Read the openpod-remediation logs for the failing call (IAM, throttling, ASG limits).", group),
        Alert("OpenpodRemediationSlow",
              f"openpod:remediation_duration_seconds:p90_6h > {t.remediation_p90_minutes * 60}", "0m", "warning",
              "Group {{ $labels.group }}: {{ $labels.action }} takes {{ $value | humanizeDuration }} (p90)",
              "The time from fault detection to a node back in service is above its objective.",
              "Compare with the group's capacity source (warm pool, hot spares, capacity block) and instance boot "
              "time; add hot spares if replacement is the slow part.", ("group", "action")),
        Alert("OpenpodDeepCheckFailing",
              f'count(sum by (node) (increase(openpod_node_agent_findings_total{{{DET}, rule=~"{_deep_check_rules()}"}}'
              f"[6h])) > 0) >= {t.deep_check_failed_nodes}", "0m", "warning",
              "Deep health checks failed on {{ $value }} nodes in 6 hours",
              "Several new or rebooted nodes failed the deep check (DCGM diag, NCCL test, EFA loopback, Neuron).",
              "If they share an instance type, AZ or AMI, suspect the batch or the image, not each node: "
              "hold the rollout and open a case with the capacity provider.", ()),
        Alert("OpenpodNodeAgentDown", f"max by (node) (up{{{DET}}}) == 0", "10m", "warning",
              "The node agent on {{ $labels.node }} is not answering scrapes",
              "Faults on this node are not detected while the agent is down.",
              "`kubectl -n openpod-system get pods -o wide --field-selector spec.nodeName={{ $labels.node }}`: "
              "crash loop, OOM, or a node too sick to run it (then replace the node).", node),
        Alert("OpenpodRemediationControllerDown", f"max by (job) (up{{{CTL}}}) == 0", "10m", "critical",
              "The remediation controller is not answering scrapes",
              "Marked nodes are not drained, rebooted or replaced while it is down.",
              "`kubectl -n openpod-system get deploy node-remediation`; check its logs and the system group.",
              ("job",)),
        Alert("OpenpodRemediationGaveUp", f"max by (group) (openpod_remediation_failed_nodes{{{CTL}}}) > 0", "0m",
              "warning",
              "Group {{ $labels.group }}: {{ $value }} node(s) in the terminal failed remediation state",
              "The controller could not act on these nodes (EC2 instance gone, no provider ID); they stay "
              "cordoned and out of the budget until an operator looks.",
              "`kubectl get nodes -l openpod.io/instance-group={{ $labels.group }}` and the RemediationFailed "
              "condition; delete a node whose instance is gone, or remove the remediation annotation to retry.",
              group),
        Alert("OpenpodRemediationLeaderless", f"sum(openpod_remediation_leader{{{CTL}}}) != 1", "5m", "critical",
              "{{ $value }} remediation controller replicas hold the Lease (want exactly one)",
              "With none, no node is drained, rebooted or replaced; two would mean the Lease is not honoured.",
              "`kubectl -n openpod-system get lease` and the controller logs (API server reachability, clock).", ()),
        # ---------------------------------------------------------------- the monitoring itself
        Alert(WATCHDOG, "vector(1)", "0m", "info",
              "The alerting pipeline is alive (always firing)",
              "A dead-man's switch: it always fires, so its notifications stop when rule evaluation, the alert "
              "manager or the route to the receiver breaks.",
              "Nothing to do while it fires; when the dead-man's switch alarm says it stopped, check the "
              "Prometheus workspace's rule evaluation and alert manager (AMP logs) and the SNS topic.", ()),
        Alert("OpenpodScrapeJobAbsent",
              with_manager_namespace(" or ".join(f'absent(up{{job="{j}"}})' for j in REQUIRED_JOBS))
              + f' or (absent(up{{job="{JOB_DCGM}"}}) and on () '
              f'(count(kube_node_status_allocatable{{{KSM}, resource="nvidia_com_gpu"}} > 0) > 0))',
              f"{t.scrape_down_minutes}m", "critical",
              "Scrape job {{ $labels.job }} has no targets",
              "Prometheus finds nothing to scrape for a job the alerts read (a deleted controller, a broken "
              "service discovery or RBAC): its alerts are silent however bad things are.",
              "`kubectl get pods -A -l app.kubernetes.io/name` for the job's pods; check the scraper's "
              "configuration (observability/scrape.py) and its RBAC (openpod-aps-collector ClusterRole).",
              ("job", "namespace")),
        Alert("OpenpodScrapeTargetDown",
              with_manager_namespace(f'max by (job) (up{{job=~"{JOB_KUEUE}|{JOB_JOBSET}|{JOB_KSM}"}}) == 0')
              + f" or max by (job, node) (up{{{DCGM}}}) == 0", f"{t.scrape_down_minutes}m", "warning",
              "{{ $labels.job }} is not answering scrapes",
              "A target the alerts read is down or refuses the scrape (TLS, token, RBAC for Kueue and JobSet); "
              "for dcgm-exporter, the exporter of one node. For JobSet, its controller: while it is down no JobSet "
              "is started, restarted or finished, and Kueue's admitted jobs never get pods.",
              "`kubectl describe pod` of the target (`kubectl -n jobset-system get pods` for JobSet); for Kueue and "
              "JobSet, the metrics Service's certificate and the scraper's ClusterRole (GET /metrics).",
              ("job", "node", "namespace")),
        # ---------------------------------------------------------------- jobs
        Alert("OpenpodTrainingStraggler",
              f"max by (namespace, training_job, rank) (openpod_train_straggler_score{{{TRN}}}) > {t.straggler_score} "
              f"or max by (namespace, training_job, rank) (openpod_train_compute_seconds{{{TRN}}}) / on (namespace, "
              f"training_job) group_left () quantile {BY_JOB} (0.5, openpod_train_compute_seconds{{{TRN}}}) "
              f"> {t.straggler_score}",
              "15m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: rank {{ $labels.rank }} "
              "computes {{ $value | humanize }}x the median rank",
              "One rank takes longer than the others to reach the gradient collective (against its node's ranks "
              "or the whole job's); every other rank waits for it every step.",
              "Check that node's GPU (clocks, thermal and power throttling, Xids) in the accelerator dashboard "
              "and the node agent's findings; cordon and drain it if it persists.", (*job, "rank")),
        Alert("OpenpodJobHung",
              f"max {BY_JOB} (changes(openpod_training_step{{{TRN}}}[{t.job_hang_minutes}m])) == 0 "
              f"and max {BY_JOB} (openpod_training_step{{{TRN}}}) > 0", "1m",
              "critical",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }} has not finished a step for "
              f"{t.job_hang_minutes} minutes",
              "Every pod of the job reports the same step; the in-job watchdog did not restart it (or restarts do "
              "not help).",
              "Read the stack dumps (stacks-rank-*.txt in the run directory) and the NCCL logs; "
              "look for a node the agent flagged; delete the pod to force a restart from the last checkpoint.", job),
        Alert("OpenpodJobCrashLooping",
              f"max {BY_JOB} (max_over_time(openpod_training_incarnations{{{TRN}}}[1h])) "
              f"- min {BY_JOB} (min_over_time(openpod_training_incarnations{{{TRN}}}[1h])) "
              f">= {t.job_restarts_per_hour}", "0m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }} restarted {{ $value }} times in an hour",
              "The job keeps starting again (its pods crash, are evicted or the JobSet restarts them): counted "
              "from the job's own incarnation number, so gaps while pods are recreated do not hide it and a loop "
              "that never reaches step 1 is seen.",
              "`kubectl -n {{ $labels.namespace }} get pods` of the job and the last incarnation's log (exit code, "
              "OOM, a restore that fails, a bad node: OpenpodNodeFindingRepeated); suspend the JobSet if it "
              "burns quota without progress.", job),
        Alert("OpenpodJobSetFailed",
              'max by (namespace, training_job) (label_replace('
              f"max_over_time({_JS_NEW}[1h:1m]), "
              '"training_job", "$1", "jobset_name", "(.+)"))', "0m", "warning",
              "JobSet {{ $labels.namespace }}/{{ $labels.training_job }} failed for good",
              "The JobSet controller marked the JobSet Failed: its restarts are spent (ReachedMaxRestarts), a "
              "failure-policy rule failed it at once (FailJobSetFailurePolicyAction), or it had no failure policy (FailedJobs). "
              "Nothing restarts it, and with its pods gone the job's own alerts fall silent. Fires for the hour "
              "after, held from the moment its count rose, so a restart of the JobSet controller (whose counts start "
              "again at zero) does not end it; a JobSet of the same name failing again within the hour after such a "
              "restart is not seen anew.",
              "`kubectl -n {{ $labels.namespace }} get jobset {{ $labels.training_job }} -o yaml`: the Failed "
              "condition's reason and message name the first failed Job; read its pods' last log and whether "
              "OpenpodJobCrashLooping or a node alert came before. A platform cause (nodes, storage): fix it, "
              "then resubmit; the job's own error: tell the team.", job),
        Alert("OpenpodJobMetricsDown",
              f"max {BY_JOB} (max_over_time(up{{{TRN}}}[{GAP}])) == 0", f"{t.job_metrics_down_minutes}m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: no pod serves its metrics",
              f"None of the job's scrape targets answered for {t.job_metrics_down_minutes} minutes and {GAP} "
              "before: its hang, goodput and checkpoint alerts are blind (a wedged process, a crash before the "
              "metrics server started, a port or NetworkPolicy change). Finished pods are not scraped.",
              "`kubectl -n {{ $labels.namespace }} get pods -o wide` of the job; `curl` a pod's metrics port from "
              "the node; the job's log shows whether the runtime started (`--metrics-port`).", job),
        Alert("OpenpodCheckpointSaveFailing",
              f"max {BY_JOB} (delta(openpod_checkpoint_failures{{{TRN}}}[30m])) > 0", "0m",
              "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: checkpoint saves are failing",
              "Checkpoint saves or tier promotions failed in the last 30 minutes; a failure now would lose "
              "more progress than planned.",
              "Check the job's log for the tier (local NVMe full, FSx quota, S3 permissions or throttling); "
              "free space or fix access before the next failure.", job),
        Alert("OpenpodCheckpointTooOld",
              f"time() - min {BY_JOB} (openpod_checkpoint_last_durable_timestamp_seconds{{{TRN}}}) "
              f"> {t.checkpoint_age_minutes * 60}", "5m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: no durable checkpoint for "
              "{{ $value | humanizeDuration }}",
              f"The job's last checkpoint in a durable tier (FSx, S3) is over {t.checkpoint_age_minutes} minutes "
              "old (or it never wrote one): a failure now loses that much training.",
              "Check OpenpodCheckpointSaveFailing and the job's checkpoint cadence and tiers (`--checkpoint-every`, "
              "the durable tier's interval); a job that only keeps node memory copies loses them with the node.",
              job),
        Alert("OpenpodCheckpointTierLagging",
              f"max by (namespace, training_job, tier) "
              f"(max_over_time(openpod_checkpoint_tier_lag_saves{{{TRN}}}[{GAP}])) "
              f"> on (namespace, training_job) group_left () "
              f"max {BY_JOB} (max_over_time(openpod_checkpoint_tier_lag_bound_saves{{{TRN}}}[{GAP}]))",
              f"{t.tier_lag_minutes}m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: checkpoint tier {{ $labels.tier }} is "
              "{{ $value }} saves behind",
              f"For {t.tier_lag_minutes} minutes the tier has been further behind the job's newest saves than its "
              "bound (checkpoint.tier_lag_saves): its copies are slower than the saves (or keep failing), so a "
              "restore from it would replay more than planned. Each tier copies on its own thread, so the "
              f"others go on. A scrape gap or a lag dipping to the bound for less than {GAP} does not restart the "
              "wait; a restart of the job does (its copies start again from its newest step).",
              "The job's log names the tier (`checkpoint tier ... is N saves behind`); check OpenpodCheckpointSaveFailing "
              "(copies failing), then the tier's speed: S3 throttling or the node's network, FSx throughput "
              "capacity; if its copies cannot keep up, promote less often to it (`--fsx-every`, `--s3-every`).", (*job, "tier")),
        Alert("OpenpodJobEndedNotDurable",
              f"max by (namespace, training_job, tier) "
              f"(max_over_time(openpod_checkpoint_final_step_not_durable{{{TRN}}}[1h])) > 0", "0m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }} ended with its last checkpoint missing from "
              "{{ $labels.tier }}",
              "The job ran all its steps, but its last step is not durable in this shared tier (its copies there "
              "failed or the tier was unreachable at the end): the launcher exited 4 (or 0 with "
              "--allow-tier-behind), and the step lives only in node memory, NVMe or the other tiers until a "
              "rerun promotes it. Read once at the job's end, so it fires for the hour after.",
              "The job's log has the line `the steps are done but the last checkpoint, step N, is not durable in "
              "...`; fix the tier (OpenpodCheckpointSaveFailing names the failures: S3 permissions or throttling, "
              "FSx full or unmounted), then rerun the same command (the JobSet's restart does so): it promotes the "
              "step and exits 0. Before the nodes go, the step is still in their memory tier.", (*job, "tier")),
        Alert("OpenpodCheckpointRestoredOlder",
              f"max {BY_JOB} (openpod_checkpoint_restored_older{{{TRN}}}) > 0 "
              f"unless max {BY_JOB} (openpod_checkpoint_restored_older{{{TRN}}} offset 1h) > 0", "0m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }} resumed from an older checkpoint than its "
              "newest",
              "The newest step some rank saw could not be restored (a snapshot lost with its node, a corrupt or "
              "unreadable copy); the job went on from an older one and replays the steps in between. Fires for "
              "the first hour of such an incarnation.",
              "The job's log names the step and why (`newest checkpoint step N cannot be restored`); check the "
              "tier it names (node memory lost with a node, FSx or S3 access) before the next restart.", job),
        Alert("OpenpodCheckpointSourceUnreadable",
              f"max {BY_JOB} (openpod_checkpoint_restore_source_failures{{{TRN}}}) > 0 "
              f"unless max {BY_JOB} (openpod_checkpoint_restore_source_failures{{{TRN}}} offset 1h) > 0", "0m",
              "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: {{ $value }} checkpoint source(s) "
              "unreadable at restore",
              "At the last restart, a checkpoint tier or peer could not be listed even after retries; the job "
              "restored from another source (or refused to start). Fires for the first hour of such an "
              "incarnation.",
              "The job's log names the source and its error (`checkpoint source ... could not be read`): "
              "FSx mount, S3 permissions or throttling, an unreachable peer.", job),
        Alert("OpenpodGoodputBelowTarget",
              f"openpod:job_goodput:ratio_window < {t.goodput_target} "
              f"and on (namespace, training_job) sum {BY_JOB} (openpod:job_training_seconds:max) "
              f"> {2 * t.goodput_window_minutes * 60}",
              "15m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: goodput {{ $value | humanizePercentage }} "
              f"over {w}, target {t.goodput_target:g}",
              "Less of the job's wall-clock time than the target became training progress.",
              "Open the job dashboard's goodput breakdown: restore/rescheduling -> failures (check node alerts); "
              "checkpoint_blocking -> checkpoint interval or tier; replayed -> checkpoint too rare.", job),
        Alert("OpenpodStepTimeRegression",
              f"openpod:job_step_seconds:avg_10m > {t.step_time_regression} * openpod:job_step_seconds:median_6h",
              "15m", "warning",
              "Job {{ $labels.namespace }}/{{ $labels.training_job }}: steps are slower than its 6-hour median",
              f"The job's 10-minute step time is over {t.step_time_regression:g}x its own median.",
              "A straggler node (thermal or power slowdown, degraded PCIe or EFA) or a slow storage tier: "
              "check the job's nodes in the accelerator dashboard and the node agent's findings.", job),
        *queue_alerts(t),
        *platform_alerts(t),
    ]


def _fmt(expr: str, t: AlertThresholds) -> str:
    return expr.replace("{window}", f"{t.goodput_window_minutes}m")


def rule_groups(t: AlertThresholds | None = None) -> dict:
    """The Prometheus rule file (``groups:``) for thresholds ``t`` (the defaults when None)."""
    t = t or AlertThresholds()
    recs = [{"record": r.record, "expr": _fmt(r.expr, t)} for r in records()]
    als = [{"alert": a.name, "expr": a.expr, **({"for": a.for_} if a.for_ != "0m" else {}),
            "labels": {"severity": a.severity},
            "annotations": {"summary": a.summary, "description": a.description, "runbook": a.runbook,
                            "runbook_url": runbook_url(a.name)}}
           for a in alerts(t)]
    return {"groups": [{"name": "openpod.records", "interval": "1m", "rules": recs},
                       {"name": "openpod.alerts", "interval": "1m", "rules": als}]}


def rules_yaml(t: AlertThresholds | None = None) -> str:
    head = ("# Generated from observability/rules.py by `python -m infra docs`; do not edit by hand.\n"
            "# The openpod platform's Prometheus recording rules and alerts (default thresholds).\n")
    return head + yaml.safe_dump(rule_groups(t), sort_keys=False, width=200)
