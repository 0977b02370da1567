"""The alert cases the promtool unit tests run (tests/observability/test_rules.py): per alert, the series of its
fault and of its near miss, with the labels each must fire with. Data only; the tests that run them live beside."""

from __future__ import annotations
from tests.observability.rule_case_base import (  # noqa: F401 (re-exported)
    CTL, DCGM, DCGM_POD, DET, JOB, JS, KSM, KUEUE, ROOT, RULES_FILE, TRAIN, Case, s)
from tests.observability.rule_cases_platform import PLATFORM, PLATFORM_CASES


def link(labels: dict, gen: str, width: str, replays: str) -> list[dict]:
    """One GPU's PCIe link generation and width (gauges) and its replay counter, as dcgm-exporter serves them."""
    return [s("DCGM_FI_DEV_PCIE_LINK_GEN", labels, gen), s("DCGM_FI_DEV_PCIE_LINK_WIDTH", labels, width),
            s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", labels, replays)]


WL = {**KSM, "namespace": "team-a", "local_queue": "main", "customresource_group": "kueue.x-k8s.io",
      "customresource_kind": "Workload", "customresource_version": "v1beta2"}
CRS_LQ = {"customresource_group": "kueue.x-k8s.io", "customresource_kind": "LocalQueue",
          "customresource_version": "v1beta2"}




def _hist(labels: dict, le_values: dict[str, str]) -> list[dict]:
    return [s("openpod_remediation_duration_seconds_bucket", {**labels, "le": le}, v) for le, v in le_values.items()]


def CQ(team: str) -> dict:
    return {**KUEUE, "cohort": "org", "cluster_queue": team, "flavor": "p5", "resource": "nvidia.com/gpu"}


REMEDIATION = {"job": "openpod-remediation", "group": "gpu", "action": "replace", "outcome": "replaced"}
STEP_BASE = "0+6x399 2400+3x40"        # 10 s/step for 400 minutes, then 20 s/step

CASES = [
    # -------------------------------------------------------------- nodes
    Case("OpenpodNodePendingReplacement", "35m",
         [s("openpod_node_agent_node_action", {**DET, "node": "n1"}, "2x40")],
         [{"node": "n1"}], ["Node n1 has waited for replacement for 30 minutes"]),
    Case("OpenpodNodePendingReplacement", "35m",
         [s("openpod_node_agent_node_action", {**DET, "node": "n2"}, "2x20 0x20"),      # replaced in time
          s("openpod_node_agent_node_action", {**DET, "node": "n3"}, "1x40")]),         # reboot, not replace
    Case("OpenpodNodePendingReboot", "35m",
         [s("openpod_node_agent_node_action", {**DET, "node": "n1"}, "0 1x40")],
         [{"node": "n1"}], ["Node n1 has waited for a reboot for 30 minutes"]),
    Case("OpenpodNodePendingReboot", "35m",   # the agent's pod replaced at 15m (a gap, a new pod label): one alert
         [s("openpod_node_agent_node_action", {**DET, "node": "n1", "pod": "a"}, "0 1x14 stale"),
          s("openpod_node_agent_node_action", {**DET, "node": "n1", "pod": "b"}, "_x17 1x40")],
         [{"node": "n1"}], ["Node n1 has waited for a reboot for 30 minutes"], also_at=("45m",)),
    Case("OpenpodNodePendingReboot", "35m",
         [s("openpod_node_agent_node_action", {**DET, "node": "n2"}, "1x10 0x30"),      # rebooted in time
          s("openpod_node_agent_node_action", {**DET, "node": "n3"}, "0x40")]),
    Case("OpenpodNodeNotReady", "20m",
         [s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "Ready", "status": "true"}, "1x3 0x30"),
          s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "Ready", "status": "unknown"},
            "0x3 1x30"),
          s("kube_node_status_condition", {**KSM, "node": "n8", "condition": "Ready", "status": "true"}, "1x40")],
         [{"node": "n7"}], ["Node n7 has not been Ready for 10 minutes"]),
    Case("OpenpodNodeNotReady", "20m",   # a reboot: back within the window
         [s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "Ready", "status": "true"},
            "1x3 0x6 1x30"),
          s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "MemoryPressure", "status": "true"},
            "0x40")]),
    Case("OpenpodNodeNotReady", "20m",   # kube-state-metrics restarted at 9m (stale, then a new instance)
         [s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "Ready", "status": "true"},
            "1x3 0x5 stale"),
          s("kube_node_status_condition", {**KSM, "instance": "10.0.0.9:8080", "node": "n7", "condition": "Ready",
                                           "status": "true"}, "_x11 0x20")],
         [{"node": "n7"}], ["Node n7 has not been Ready for 10 minutes"]),
    Case("OpenpodNodeReadyFlapping", "60m",   # Ready / Unknown every 2 minutes: no spell lasts 10 minutes
         [s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "Ready", "status": "true"},
            " ".join(["1 1 0 0"] * 17))],
         [{"node": "n7"}], ["Node n7 changed Ready state 30 times in an hour"]),
    Case("OpenpodNodeReadyFlapping", "60m",   # one reboot: down and up once
         [s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "Ready", "status": "true"},
            "1x20 0x5 1x40")]),
    Case("OpenpodNodeNotReady", "60m",   # flapping is OpenpodNodeReadyFlapping's; NotReady stays quiet
         [s("kube_node_status_condition", {**KSM, "node": "n7", "condition": "Ready", "status": "true"},
            " ".join(["1 1 0 0"] * 17))]),
    Case("OpenpodManyNodesNotReady", "20m",   # 4 of 10 nodes lost at once (an AZ event)
         [s("kube_node_status_condition", {**KSM, "node": f"n{i}", "condition": "Ready", "status": "true"},
            "1x3 0x30" if i < 4 else "1x33") for i in range(10)],
         [{}], ["4 nodes are not Ready"]),
    Case("OpenpodManyNodesNotReady", "20m",   # 2 of 10 nodes: each node on its own
         [s("kube_node_status_condition", {**KSM, "node": f"n{i}", "condition": "Ready", "status": "true"},
            "1x3 0x30" if i < 2 else "1x33") for i in range(10)]),
    Case("OpenpodManyNodesNotReady", "20m",   # 3 of 40 nodes: under 10 % of the fleet
         [s("kube_node_status_condition", {**KSM, "node": f"m{i}", "condition": "Ready", "status": "true"},
              "1x3 0x30" if i < 3 else "1x33") for i in range(40)]),
    Case("OpenpodNodeAcceleratorsLost", "30m",
         [s("kube_node_status_allocatable", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x10 7x30"),
          s("kube_node_status_capacity", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x40"),
          s("kube_node_status_allocatable", {**KSM, "node": "n2", "resource": "vpc_amazonaws_com_efa",
                                             "unit": "integer"}, "32x10 28x30"),      # the plugin re-registered
          s("kube_node_status_capacity", {**KSM, "node": "n2", "resource": "vpc_amazonaws_com_efa",
                                          "unit": "integer"}, "32x10 28x30")],
         [{"node": "n1", "resource": "nvidia_com_gpu"}, {"node": "n2", "resource": "vpc_amazonaws_com_efa"}],
         ["Node n1: nvidia_com_gpu allocatable dropped to 7", "Node n2: vpc_amazonaws_com_efa allocatable dropped to 28"]),
    Case("OpenpodNodeAcceleratorsLost", "30m",
         [s("kube_node_status_allocatable", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x10 0x4 8x30"),                                                          # rebooted: back in 4 minutes
          s("kube_node_status_capacity", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x40"),
          s("kube_node_status_allocatable", {**KSM, "node": "n3", "resource": "cpu", "unit": "core"}, "192x10 96x30"),
          s("kube_node_status_capacity", {**KSM, "node": "n3", "resource": "cpu", "unit": "core"}, "192x40")]),
    Case("OpenpodGPUXidError", "55m",   # a double-bit ECC error (Xid 48) the platform did not clear
         [s("DCGM_FI_DEV_XID_ERRORS", {**DCGM, "node": "n4", "Hostname": "n4", "gpu": "3"}, "0x20 48x40"),
          s("DCGM_FI_DEV_XID_ERRORS", {**DCGM, "node": "n4", "Hostname": "n4", "gpu": "2"}, "0x60")],
         [{"node": "n4", "gpu": "3", "xid": "48"}], ["Node n4 GPU 3: Xid 48 not cleared"]),
    # Still active 4 hours on, and a new pod on that GPU (dcgm-exporter's pod labels change) is the same alert:
    # the old rule resolved after 30 minutes and then fired anew for the new pod's series.
    Case("OpenpodGPUXidError", "250m",
         [s("DCGM_FI_DEV_XID_ERRORS", {**DCGM, **DCGM_POD, "node": "n4", "Hostname": "n4", "gpu": "3"},
            "0x5 48x235"),
          s("DCGM_FI_DEV_XID_ERRORS", {**DCGM, **DCGM_POD, "pod": "llm-node-3-0-b", "node": "n4", "Hostname": "n4",
                                       "gpu": "3"}, "_x240 48x20")],
         [{"node": "n4", "gpu": "3", "xid": "48"}], ["Node n4 GPU 3: Xid 48 not cleared"], also_at=("200m",)),
    Case("OpenpodGPUXidError", "70m",
         [s("DCGM_FI_DEV_XID_ERRORS", {**DCGM, "node": "n4", "Hostname": "n4", "gpu": "3"}, "0x5 13x80"),  # app Xid
          s("DCGM_FI_DEV_XID_ERRORS", {**DCGM, "node": "n5", "Hostname": "n5", "gpu": "1"},   # rebooted in time
            "0x5 79x10 stale _x5 0x60")]),
    # DCGM_FI_DEV_PCIE_REPLAY_COUNTER as dcgm-exporter serves it: a counter per GPU, labelled with the pod on it
    Case("OpenpodGPUPCIeReplaysHigh", "30m",   # 40 replays a minute on GPU 1; GPU 0 at 2 a minute is healthy
         [s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", {**DCGM, **DCGM_POD, "node": "n3", "Hostname": "n3", "gpu": "1",
                                                "device": "nvidia1"}, "100+40x40"),
          s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", {**DCGM, **DCGM_POD, "node": "n3", "Hostname": "n3", "gpu": "0",
                                                "device": "nvidia0"}, "7+2x40")],
         [{"node": "n3", "gpu": "1"}], ["Node n3 GPU 1: 40 PCIe replays a minute"]),
    Case("OpenpodGPUPCIeReplaysHigh", "30m",   # a 10-minute burst, a healthy GPU, a team pod serving the name
         [s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", {**DCGM, "node": "n3", "Hostname": "n3", "gpu": "1"}, "0+40x10 400x30"),
          s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", {**DCGM, "node": "n3", "Hostname": "n3", "gpu": "0"}, "0+20x40"),
          s("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", {"job": "kubernetes-pods", "node": "n3", "gpu": "2"}, "0+500x40")]),
    # Each GPU judged by its own link's bound, as DCGM's health watch does: ceil(rate per lane x lanes) of the
    # link's generation and width (DCGM_FI_DEV_PCIE_LINK_GEN / _WIDTH, which the platform's counters add). The
    # old rule held every GPU to the Gen5 x16 bound (31) and missed a Gen4 link at 20 a minute.
    *[Case("OpenpodGPUPCIeReplaysHigh", "30m", [
        *link({**DCGM, "modelName": "NVIDIA A100-SXM4-40GB", "node": "n5", "Hostname": "n5", "gpu": "0"},
              "4x40", "16x40", "0+20x40"),                        # Gen4 x16: bound 16
        *link({**DCGM, "modelName": "NVIDIA A100-SXM4-40GB", "node": "n5", "Hostname": "n5", "gpu": "1"},
              "4x40", "8x40", "0+10x40"),                         # Gen4 trained at x8: bound 8
        *link({**DCGM, "node": "n6", "Hostname": "n6", "gpu": "0"}, "5x40", "16x40", "0+35x40"),   # Gen5 x16: 31
        ], [{"node": "n5", "gpu": "0"}, {"node": "n5", "gpu": "1"}, {"node": "n6", "gpu": "0"}],
        ["Node n5 GPU 0: 20 PCIe replays a minute", "Node n5 GPU 1: 10 PCIe replays a minute",
         "Node n6 GPU 0: 35 PCIe replays a minute"]),
      Case("OpenpodGPUPCIeReplaysHigh", "30m", [
        *link({**DCGM, "node": "n6", "Hostname": "n6", "gpu": "0"}, "5x40", "16x40", "0+20x40"),   # Gen5, under 31
        *link({**DCGM, "node": "n5", "Hostname": "n5", "gpu": "0"}, "4x40", "16x40", "0+15x40"),   # Gen4, under 16
        # idle, the link drops to Gen1 now and then: judged by the fastest it ran in the 10 minutes
        *link({**DCGM, "node": "n5", "Hostname": "n5", "gpu": "2"}, " ".join(["4 4 1"] * 14), "16x40", "0+12x40"),
      ])],
    # kube_node_status_capacity as kube-state-metrics serves it (resource sanitized, unit "integer")
    Case("OpenpodNodeAgentMissing", "25m",   # n1 has GPUs and no agent; n2 has its agent; n3 only EFA
         [s("kube_node_status_capacity", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x30"),
          s("kube_node_status_capacity", {**KSM, "node": "n2", "resource": "aws_amazon_com_neuron",
                                          "unit": "integer"}, "16x30"),
          s("kube_node_status_capacity", {**KSM, "node": "n3", "resource": "vpc_amazonaws_com_efa",
                                          "unit": "integer"}, "1x30"),
          s("up", {**DET, "node": "n2", "pod": "node-health-agent-amd64-x2"}, "1x30")],
         [{"node": "n1"}], ["Node n1 has accelerators and no node agent"]),
    Case("OpenpodNodeAgentMissing", "25m",   # n1's agent restarts (a 3-minute gap), n2's is down (AgentDown's)
         [s("kube_node_status_capacity", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x30"),
          s("kube_node_status_capacity", {**KSM, "node": "n2", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x30"),
          s("up", {**DET, "node": "n1", "pod": "node-health-agent-amd64-x1"}, "1x15 _x3 1x12"),
          s("up", {**DET, "node": "n2", "pod": "node-health-agent-amd64-x2"}, "0x30")]),
    Case("OpenpodNodeAgentMissing", "25m",   # no agent anywhere: OpenpodScrapeJobAbsent's, not one per node
         [s("kube_node_status_capacity", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x30")]),
    Case("OpenpodNodeFindingRepeated", "50m",   # NVLink error counters rising, found every 10 minutes
         [s("openpod_node_agent_findings_total", {**DET, "node": "n2", "pod": "a", "rule": "gpu-nvlink-errors",
                                                  "fault": "gpu-nvlink-errors", "action": "none"}, "0+0.1x60")],
         [{"node": "n2", "rule": "gpu-nvlink-errors"}], ["Node n2: gpu-nvlink-errors found 5 times in an hour"]),
    Case("OpenpodNodeFindingRepeated", "50m",   # the same Xid again, across an agent restart (new pod)
         [s("openpod_node_agent_findings_total", {**DET, "node": "n2", "pod": "a", "rule": "xid-13",
                                                  "fault": "gpu-xid-13", "action": "none"}, "0x10 1x10 2x5 stale"),
          s("openpod_node_agent_findings_total", {**DET, "node": "n2", "pod": "b", "rule": "xid-13",
                                                  "fault": "gpu-xid-13", "action": "none"}, "_x26 0x10 1x30")],
         [{"node": "n2", "rule": "xid-13"}], ["Node n2: xid-13 found 3 times in an hour"]),
    Case("OpenpodNodeFindingRepeated", "50m",
         [s("openpod_node_agent_findings_total", {**DET, "node": "n2", "rule": "gpu-nvlink-errors",
                                                  "fault": "gpu-nvlink-errors", "action": "none"}, "0x10 1x50"),
          s("openpod_node_agent_findings_total", {**DET, "node": "n3", "rule": "xid-79",   # acted on: not watched
                                                  "fault": "gpu-fallen-off-bus", "action": "replace"}, "0+1x60")]),
    Case("OpenpodNodeAgentCheckErroring", "40m",   # the GPU check errors on every poll
         [s("openpod_node_agent_check_errors_total", {**DET, "node": "n6", "check": "gpu"}, "0+2x60")],
         [{"node": "n6", "check": "gpu"}], ["Node n6: the agent's gpu check keeps failing to run"]),
    Case("OpenpodNodeAgentCheckErroring", "40m",
         [s("openpod_node_agent_check_errors_total", {**DET, "node": "n6", "check": "gpu"}, "0x10 2x50")]),
    Case("OpenpodRemediationBudgetExhausted", "20m",
         [s("openpod_remediation_budget_blocked", {**CTL, "group": "gpu"}, "0 2x30")],
         [{"group": "gpu"}], ["Group gpu: 2 nodes wait for a remediation slot"]),
    Case("OpenpodRemediationBudgetExhausted", "20m",
         [s("openpod_remediation_budget_blocked", {**CTL, "group": "gpu"}, "0 2x10 0x20")]),
    Case("OpenpodRemediationStuck", "70m",
         [s("openpod_remediations_in_flight", {**CTL, "group": "gpu"}, "1x90")],
         [{"group": "gpu"}], ["Group gpu has had nodes in remediation for 60 minutes"]),
    Case("OpenpodRemediationStuck", "70m",
         [s("openpod_remediations_in_flight", {**CTL, "group": "gpu"}, "1x40 0 1x40")]),  # each one finished
    Case("OpenpodDrainDeadlineExceeded", "20m",
         [s("openpod_drain_deadline_exceeded_total", {**CTL, "group": "gpu"}, "0x10 1x30")],
         [{"group": "gpu"}], ["Group gpu: a drain hit its deadline"]),
    Case("OpenpodDrainDeadlineExceeded", "100m",
         [s("openpod_drain_deadline_exceeded_total", {**CTL, "group": "gpu"}, "0x10 1x120")]),  # 90 minutes ago
    Case("OpenpodPairCheckFailed", "20m",
         [s("openpod_pair_checks_total", {**CTL, "group": "p5", "result": "BelowFloor"}, "0x10 1x30")],
         [{"group": "p5", "result": "BelowFloor"}],
         ["Group p5: a new or rebooted node failed its two-node check (BelowFloor)"]),
    Case("OpenpodPairCheckFailed", "20m",  # passed, or retried because a pod was never scheduled
         [s("openpod_pair_checks_total", {**CTL, "group": "p5", "result": "passed"}, "0x10 1x30"),
          s("openpod_pair_checks_total", {**CTL, "group": "p5", "result": "NotScheduled"}, "0x10 1x30")]),
    Case("OpenpodRemediationErrors", "10m",
         [s("openpod_remediation_errors_total", {**CTL, "group": "gpu"}, "0+1x4 5x30")],
         [{"group": "gpu"}], ["Group gpu: remediation steps keep failing"]),
    Case("OpenpodRemediationErrors", "10m",
         [s("openpod_remediation_errors_total", {**CTL, "group": "gpu"}, "0+1x2 2x30")]),
    Case("OpenpodRemediationSlow", "370m",
         _hist(REMEDIATION, {"600": "0x400", "3600": "0x400", "7200": "0+1x400", "+Inf": "0+1x400"}),
         [{"group": "gpu", "action": "replace"}], ["Group gpu: replace takes 1h 54m 0s (p90)"]),
    Case("OpenpodRemediationSlow", "370m",
         _hist(REMEDIATION, {"600": "0+1x400", "3600": "0+1x400", "7200": "0+1x400", "+Inf": "0+1x400"})),
    Case("OpenpodDeepCheckFailing", "20m",
         [s("openpod_node_agent_findings_total",
            {**DET, "node": f"n{i}", "rule": "dcgm-diag-fail", "fault": "gpu-diagnostic-failed", "action": "replace"},
            "0x5 1x30") for i in (1, 2, 3)],
         [{}], ["Deep health checks failed on 3 nodes in 6 hours"]),
    Case("OpenpodDeepCheckFailing", "420m",   # failed was 7 hours ago, outside the window (old rule: fired)
         [s("openpod_node_agent_findings_total",
            {**DET, "node": f"n{i}", "rule": "dcgm-diag-fail", "fault": "gpu-diagnostic-failed", "action": "replace"},
            "0x5 1x420") for i in (1, 2, 3)]),
    Case("OpenpodDeepCheckFailing", "20m",
         [s("openpod_node_agent_findings_total",
            {**DET, "node": f"n{i}", "rule": "nccl-wrong", "fault": "nccl-wrong", "action": "replace"}, "1x30")
          for i in (1, 2)]
         + [s("openpod_node_agent_findings_total",   # a kernel-log fault is no deep-check failure
              {**DET, "node": "n3", "rule": "xid-79", "fault": "gpu-fallen-off-bus", "action": "replace"}, "1x30")]),
    Case("OpenpodNodeAgentDown", "15m",
         [s("up", {**DET, "node": "n1", "pod": "node-health-agent-amd64-x1"}, "0x20")],
         [{"node": "n1"}],
         ["The node agent on n1 is not answering scrapes"]),
    Case("OpenpodNodeAgentDown", "15m",
         [s("up", {**DET, "node": "n1", "pod": "node-health-agent-amd64-x1"}, "0x5 1x15")]),
    Case("OpenpodRemediationControllerDown", "15m", [s("up", CTL, "0x20")], [{"job": "openpod-remediation"}],
         ["The remediation controller is not answering scrapes"]),
    Case("OpenpodRemediationControllerDown", "15m", [s("up", CTL, "1x20")]),
    Case("OpenpodRemediationGaveUp", "5m", [s("openpod_remediation_failed_nodes", {**CTL, "group": "gpu"}, "0 1x10")],
         [{"group": "gpu"}], ["Group gpu: 1 node(s) in the terminal failed remediation state"]),
    Case("OpenpodRemediationGaveUp", "5m", [s("openpod_remediation_failed_nodes", {**CTL, "group": "gpu"}, "0x10")]),
    Case("OpenpodRemediationLeaderless", "10m",
         [s("openpod_remediation_leader", {**CTL, "pod": "a"}, "0x15"),
          s("openpod_remediation_leader", {**CTL, "pod": "b"}, "0x15")],
         [{}], ["0 remediation controller replicas hold the Lease (want exactly one)"]),
    Case("OpenpodRemediationLeaderless", "10m",
         [s("openpod_remediation_leader", {**CTL, "pod": "a"}, "1x5 0x10"),      # failover: b took over
          s("openpod_remediation_leader", {**CTL, "pod": "b"}, "0x5 1x10")]),
    # -------------------------------------------------------------- the monitoring itself
    Case("OpenpodWatchdog", "1m", [], [{}], ["The alerting pipeline is alive (always firing)"]),
    Case("OpenpodScrapeJobAbsent", "15m",
         [s("up", DET | {"node": "n1", "pod": "a"}, "1x20"), s("up", CTL, "1x20"), s("up", KSM, "1x20"),
          s("kube_node_status_allocatable", {**KSM, "node": "n1", "resource": "nvidia_com_gpu", "unit": "integer"},
            "8x20")],
         # the managers' with their namespace: an alert about their pods or Deployment there silences theirs
         [{"job": "kueue", "namespace": "kueue-system"}, {"job": "jobset", "namespace": "jobset-system"},
          {"job": "dcgm-exporter"}],
         ["Scrape job kueue has no targets", "Scrape job jobset has no targets",
          "Scrape job dcgm-exporter has no targets"]),
    Case("OpenpodScrapeJobAbsent", "15m",   # everything scraped; no NVIDIA node, so no dcgm-exporter either
         [s("up", DET | {"node": "n1", "pod": "a"}, "1x20"), s("up", CTL, "0x20"), s("up", KSM, "1x20"),
          s("up", {"job": "kueue", "pod": "kueue-controller-manager-0"}, "1x20"),
          s("up", {"job": "jobset", "pod": "jobset-controller-7f5"}, "1x20"),
          s("kube_node_status_allocatable", {**KSM, "node": "n1", "resource": "aws_amazon_com_neuron",
                                             "unit": "integer"}, "16x20")]),
    Case("OpenpodScrapeTargetDown", "15m",
         [s("up", {"job": "kueue", "instance": "10.0.0.5:8443", "pod": "kueue-controller-manager-0"}, "0x20")],
         [{"job": "kueue", "namespace": "kueue-system"}], ["kueue is not answering scrapes"]),
    Case("OpenpodScrapeTargetDown", "15m",   # the JobSet controller down (the failure mode that had no alert)
         [s("up", {"job": "jobset", "instance": "10.0.0.6:8443", "pod": "jobset-controller-7f5"}, "0x20")],
         [{"job": "jobset", "namespace": "jobset-system"}], ["jobset is not answering scrapes"]),
    Case("OpenpodScrapeTargetDown", "15m",
         [s("up", {"job": "kueue", "instance": "10.0.0.5:8443"}, "0x3 1x20"),
          s("up", {"job": "openpod-training", "instance": "10.0.0.9:9000"}, "0x20")]),   # restarting job pods
    # -------------------------------------------------------------- jobs
    # jobset_failed_total as the JobSet controller serves it: a label set appears at its JobSet's first failure
    Case("OpenpodJobSetFailed", "80m",   # llm failed at 60m, gpt failed again; bert failed over an hour ago
         [s("jobset_failed_total", {**JS, "jobset_name": "llm", "namespace": "team-a"}, "_x60 1x30"),
          s("jobset_failed_total", {**JS, "jobset_name": "gpt", "namespace": "team-b"}, "1x60 2x30"),
          s("jobset_failed_total", {**JS, "jobset_name": "bert", "namespace": "team-b"}, "1x90")],
         [{"namespace": "team-a", "training_job": "llm"}, {"namespace": "team-b", "training_job": "gpt"}],
         ["JobSet team-a/llm failed for good", "JobSet team-b/gpt failed for good"]),
    # The JobSet controller restarted 10 minutes after llm failed: the new pod's counts start at zero and serve no
    # llm series. The alert holds for the hour all the same (the old rule ended at the restart).
    Case("OpenpodJobSetFailed", "100m",
         [s("jobset_failed_total", {**JS, "jobset_name": "llm", "namespace": "team-a"}, "_x60 1x10 stale"),
          s("jobset_failed_total", {**JS, "pod": "jobset-controller-8a1", "instance": "10.0.0.8:8443",
                                    "jobset_name": "gpt", "namespace": "team-b"}, "_x71 1x40")],
         [{"namespace": "team-a", "training_job": "llm"}, {"namespace": "team-b", "training_job": "gpt"}],
         ["JobSet team-a/llm failed for good", "JobSet team-b/gpt failed for good"], also_at=("75m", "115m")),
    Case("OpenpodJobSetFailed", "125m",   # an hour after llm's failure, with the controller restarted between
         [s("jobset_failed_total", {**JS, "jobset_name": "llm", "namespace": "team-a"}, "_x60 1x10 stale")]),
    Case("OpenpodJobSetFailed", "150m",   # an hour on; a team pod serving the name
         [s("jobset_failed_total", {**JS, "jobset_name": "llm", "namespace": "team-a"}, "_x60 1x100"),
          s("jobset_failed_total", {**TRAIN, "jobset_name": "x", "namespace": "team-a"}, "_x120 1x40")]),
    Case("OpenpodTrainingStraggler", "20m",
         [s("openpod_train_straggler_score", {**TRAIN, "rank": "3"}, "1.8x30"),
          s("openpod_train_straggler_score", {**TRAIN, "rank": "0"}, "1x30")],
         [{"namespace": "team-a", "training_job": "llm", "rank": "3"}],
         ["Job team-a/llm: rank 3 computes 1.8x the median rank"]),
    Case("OpenpodTrainingStraggler", "20m",
         [s("openpod_train_straggler_score", {**TRAIN, "rank": "3"}, "1.8x5 1x25")]),   # a short blip
    Case("OpenpodTrainingStraggler", "20m",   # a whole slow node: its ranks agree, the job's median does not
         [s("openpod_train_compute_seconds", {**TRAIN, "pod": f"llm-node-{r // 4}-0", "rank": str(r)},
            "0.9x30" if 4 <= r < 8 else "0.4x30") for r in range(12)],
         [{**JOB, "rank": str(r)} for r in (4, 5, 6, 7)],
         ["Job team-a/llm: rank 4 computes 2.25x the median rank", "Job team-a/llm: rank 5 computes 2.25x the "
          "median rank", "Job team-a/llm: rank 6 computes 2.25x the median rank",
          "Job team-a/llm: rank 7 computes 2.25x the median rank"]),
    Case("OpenpodTrainingStraggler", "20m",   # lock-step: step times equal, compute times within the norm
         [s("openpod_train_compute_seconds", {**TRAIN, "pod": f"llm-node-{r // 4}-0", "rank": str(r)},
            "0.45x30" if r == 2 else "0.4x30") for r in range(8)]
         + [s("openpod_train_straggler_score", {**TRAIN, "rank": str(r)}, "1x30") for r in range(4)]),
    Case("OpenpodJobHung", "30m", [s("openpod_training_step", TRAIN, "0+1x10 10x30")], [JOB],
         ["Job team-a/llm has not finished a step for 15 minutes"]),
    Case("OpenpodJobHung", "30m",   # one incident, one alert: the same hung job seen by each of its 64 pods
         [s("openpod_training_step", {**TRAIN, "pod": f"llm-node-{i}-0", "node": f"n{i}"}, "0+1x10 10x30")
          for i in range(64)],
         [JOB], ["Job team-a/llm has not finished a step for 15 minutes"]),
    Case("OpenpodJobHung", "30m",
         [s("openpod_training_step", TRAIN, "0+1x40"),                                   # advancing
          s("openpod_training_step", {**TRAIN, "training_job": "starting"}, "0x40")]),   # still restoring
    # A crash loop that never reaches step 1: each incarnation's pod serves briefly, with gaps between (the old
    # rules: the hang alert needs step > 0, the goodput alert's for: restarts at every gap).
    Case("OpenpodJobCrashLooping", "40m",
         [s("openpod_training_incarnations", {**TRAIN, "pod": f"llm-node-0-0-{i}"},
            f"{'_x' + str(8 * i) + ' ' if i else ''}{i + 1}x3 stale") for i in range(5)]
         + [s("openpod_training_step", {**TRAIN, "pod": f"llm-node-0-0-{i}"},
              f"{'_x' + str(8 * i) + ' ' if i else ''}0x3 stale") for i in range(5)],
         [JOB], ["Job team-a/llm restarted 4 times in an hour"], also_at=("35m",)),
    Case("OpenpodJobCrashLooping", "40m",   # one restart after a node fault; 8 pods of one incarnation
         [s("openpod_training_incarnations", {**TRAIN, "pod": "llm-node-0-0"}, "1x10 stale"),
          s("openpod_training_incarnations", {**TRAIN, "pod": "llm-node-0-0-b"}, "_x12 2x40")]
         + [s("openpod_training_incarnations", {**TRAIN, "pod": f"llm-node-{i}-0"}, "3x40") for i in range(1, 8)]
         + [s("openpod_training_incarnations", {**TRAIN, "training_job": "other", "pod": f"o-{i}"}, "3x40")
            for i in range(8)]),
    Case("OpenpodJobMetricsDown", "20m",   # every pod of the job stopped answering
         [s("up", {**TRAIN, "pod": f"llm-node-{i}-0", "instance": f"10.0.2.{i}:9400"}, "1x3 0x30") for i in range(4)],
         [JOB], ["Job team-a/llm: no pod serves its metrics"]),
    Case("OpenpodJobMetricsDown", "20m",
         [s("up", {**TRAIN, "pod": "llm-node-0-0", "instance": "10.0.2.0:9400"}, "1x3 0x30"),   # one pod of two
          s("up", {**TRAIN, "pod": "llm-node-1-0", "instance": "10.0.2.1:9400"}, "1x33"),
          s("up", {**TRAIN, "training_job": "loop", "pod": "loop-0", "instance": "10.0.2.5:9400"},  # restarting
            " ".join(["0 0 0 1"] * 9))]),
    Case("OpenpodCheckpointSaveFailing", "20m",   # reported by every pod of the job: one alert
         [s("openpod_checkpoint_failures", {**TRAIN, "pod": f"llm-node-{i}-0"}, "0x10 1x20") for i in range(8)],
         [JOB], ["Job team-a/llm: checkpoint saves are failing"]),
    Case("OpenpodCheckpointSaveFailing", "20m",   # restarted: the new pod starts at the job's total, no new failure
         [s("openpod_checkpoint_failures", {**TRAIN, "pod": "llm-node-0-0"}, "2x5"),
          s("openpod_checkpoint_failures", {**TRAIN, "pod": "llm-node-0-0-b"}, "_x6 2x30")]),
    Case("OpenpodCheckpointTooOld", "130m",
         [s("openpod_checkpoint_last_durable_timestamp_seconds", {**TRAIN, "pod": f"llm-node-{i}-0"}, "0x140")
          for i in range(4)],
         [JOB], ["Job team-a/llm: no durable checkpoint for 2h 10m 0s"]),
    Case("OpenpodCheckpointTooOld", "130m",   # durable every 30 minutes; the job 'young' started 60 minutes ago
         [s("openpod_checkpoint_last_durable_timestamp_seconds", TRAIN,
            "0x29 1800x30 3600x30 5400x30 7200x30"),
          s("openpod_checkpoint_last_durable_timestamp_seconds", {**TRAIN, "training_job": "young"},
            "_x70 4200x70")]),
    # S3 slower than the saves on one node (the other ranks export 0): its lag saw-tooths over the bound (2),
    # dipping to it for a minute after each copy, with a 3-minute scrape gap; one alert per job and tier.
    Case("OpenpodCheckpointTierLagging", "25m",
         [s("openpod_checkpoint_tier_lag_saves", {**TRAIN, "tier": "s3"}, "0 1 2 " + "3 4 2 " * 2 + "_x3 "
            + "3 4 2 " * 8),
          s("openpod_checkpoint_tier_lag_saves", {**TRAIN, "tier": "fsx"}, "0 1 " * 16),
          s("openpod_checkpoint_tier_lag_saves", {**TRAIN, "pod": "llm-node-1-0", "tier": "s3"}, "0x35"),
          s("openpod_checkpoint_tier_lag_bound_saves", TRAIN, "2x35"),
          s("openpod_checkpoint_tier_lag_bound_saves", {**TRAIN, "pod": "llm-node-1-0"}, "2x35")],
         [{**JOB, "tier": "s3"}], ["Job team-a/llm: checkpoint tier s3 is 4 saves behind"], also_at=("32m",)),
    Case("OpenpodCheckpointTierLagging", "40m",
         # one slow copy: 8 minutes over the bound, then caught up; a job whose bound is higher than its lag
         [s("openpod_checkpoint_tier_lag_saves", {**TRAIN, "tier": "s3"}, "0 1 2 3 4 5 6 7 8 9 10 0 " + "1 2 " * 15),
          s("openpod_checkpoint_tier_lag_bound_saves", TRAIN, "2x45"),
          s("openpod_checkpoint_tier_lag_saves", {**TRAIN, "training_job": "big", "tier": "s3"}, "5x45"),
          s("openpod_checkpoint_tier_lag_bound_saves", {**TRAIN, "training_job": "big"}, "8x45")]),
    # The job's end, read by one scrape of each node's pod before the pods end (then stale: not scraped).
    Case("OpenpodJobEndedNotDurable", "10m",
         [s("openpod_checkpoint_final_step_not_durable", {**TRAIN, "pod": f"llm-node-{i}-0", "tier": t},
            f"_x5 {int(t == 's3')} stale") for i in range(2) for t in ("fsx", "s3")],
         [{**JOB, "tier": "s3"}], ["Job team-a/llm ended with its last checkpoint missing from s3"],
         also_at=("50m",)),
    Case("OpenpodJobEndedNotDurable", "70m",
         [s("openpod_checkpoint_final_step_not_durable", {**TRAIN, "tier": "s3"}, "_x5 1 stale"),   # over an hour ago
          s("openpod_checkpoint_final_step_not_durable", {**TRAIN, "training_job": "ok", "tier": "s3"},
            "_x60 0 stale"),                                                                     # durable everywhere
          s("openpod_checkpoint_final_step_not_durable", {**TRAIN, "training_job": "ok", "tier": "fsx"},
            "_x60 0 stale")]),
    Case("OpenpodCheckpointSaveFailing", "35m",
         [s("openpod_checkpoint_failures", TRAIN, "2x40"),                                # old failures only
          s("openpod_checkpoint_failures", {**TRAIN, "training_job": "ok"}, "0x40")]),
    Case("OpenpodCheckpointSaveFailing", "20m",   # a restore fell back to an older step; saves are fine
         [s("openpod_checkpoint_failures", TRAIN, "0x40"),
          s("openpod_checkpoint_restored_older", TRAIN, "0x3 1x40"),
          s("openpod_checkpoint_restore_source_failures", TRAIN, "0x3 1x40")]),
    Case("OpenpodCheckpointRestoredOlder", "30m", [s("openpod_checkpoint_restored_older", TRAIN, "0x3 1x40")],
         [{"namespace": "team-a", "training_job": "llm"}],
         ["Job team-a/llm resumed from an older checkpoint than its newest"]),
    Case("OpenpodCheckpointRestoredOlder", "90m",
         [s("openpod_checkpoint_restored_older", TRAIN, "0x3 1x100"),                     # over an hour ago
          s("openpod_checkpoint_restored_older", {**TRAIN, "training_job": "ok"}, "0x100")]),
    Case("OpenpodCheckpointSourceUnreadable", "30m",
         [s("openpod_checkpoint_restore_source_failures", TRAIN, "0x3 2x40")],
         [{"namespace": "team-a", "training_job": "llm"}],
         ["Job team-a/llm: 2 checkpoint source(s) unreadable at restore"]),
    Case("OpenpodCheckpointSourceUnreadable", "90m",
         [s("openpod_checkpoint_restore_source_failures", TRAIN, "1x100"),                # over an hour ago
          s("openpod_checkpoint_restore_source_failures", {**TRAIN, "training_job": "ok"}, "0x100")]),
    Case("OpenpodGoodputBelowTarget", "90m",
         [s("openpod_training_seconds", {**TRAIN, "category": "productive"}, "10000+48x120"),
          s("openpod_training_seconds", {**TRAIN, "category": "restore"}, "100+12x120")],
         [{"namespace": "team-a", "training_job": "llm"}], ["Job team-a/llm: goodput 80% over 60m, target 0.9"]),
    Case("OpenpodGoodputBelowTarget", "90m",
         [s("openpod_training_seconds", {**TRAIN, "category": "productive"}, "10000+57x120"),   # 95 %
          s("openpod_training_seconds", {**TRAIN, "category": "startup"}, "100+3x120"),
          s("openpod_training_seconds", {**TRAIN, "training_job": "young", "category": "productive"}, "0+30x120"),
          s("openpod_training_seconds", {**TRAIN, "training_job": "young", "category": "startup"}, "0+30x120")]),
    Case("OpenpodStepTimeRegression", "440m",
         [s("openpod_training_seconds", {**TRAIN, "category": "productive"}, "0+60x440"),
          s("openpod_training_step", TRAIN, STEP_BASE)],
         [{"namespace": "team-a", "training_job": "llm"}],
         ["Job team-a/llm: steps are slower than its 6-hour median"]),
    Case("OpenpodStepTimeRegression", "440m",
         [s("openpod_training_seconds", {**TRAIN, "category": "productive"}, "0+60x440"),
          s("openpod_training_step", TRAIN, "0+6x440")]),
    # -------------------------------------------------------------- teams (Kueue)
    Case("OpenpodTeamQueueStalled", "40m",
         [s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-a", "status": "active"}, "2x60"),
          s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-a", "priority_class": ""}, "5x60")],
         [{"cluster_queue": "team-a", "status": "active"}],
         ["Team team-a: workloads pending, none admitted for 30 minutes"]),
    Case("OpenpodTeamQueueStalled", "40m",
         [s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-b", "status": "active"}, "2x60"),
          s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-b", "priority_class": ""}, "0+1x60"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-c", "status": "active"}, "0x60"),
          s("kueue_pending_workloads", {"job": "kueue", "replica_role": "follower", "cluster_queue": "team-d", "status": "active"},
            "3x60")]),   # an HA follower's copy is not the leader's truth
    Case("OpenpodTeamQueueStalled", "40m",   # busy teams at quota: running work, or all of a resource's quota used
         [s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-e", "status": "active"}, "2x60"),
          s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-e", "priority_class": ""}, "5x60"),
          s("kueue_admitted_active_workloads", {**KUEUE, "cluster_queue": "team-e"}, "3x60"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-f", "status": "active"}, "1x60"),
          s("kueue_cluster_queue_resource_usage", {**KUEUE, "cohort": "org", "cluster_queue": "team-f",
                                                   "flavor": "p5", "resource": "nvidia.com/gpu"}, "64x60"),
          s("kueue_cluster_queue_nominal_quota", {**KUEUE, "cohort": "org", "cluster_queue": "team-f",
                                                  "flavor": "p5", "resource": "nvidia.com/gpu"}, "64x60")]),
    Case("OpenpodClusterQueueInactive", "20m",
         [s("kueue_cluster_queue_status", {**KUEUE, "cluster_queue": "team-a", "status": "active"}, "0x30"),
          s("kueue_cluster_queue_status", {**KUEUE, "cluster_queue": "team-a", "status": "pending"}, "1x30"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-a", "status": "inadmissible"}, "2x30")],
         [{"cluster_queue": "team-a"}], ["Team team-a: its ClusterQueue is not active and has workloads waiting"]),
    Case("OpenpodClusterQueueInactive", "20m",
         [s("kueue_cluster_queue_status", {**KUEUE, "cluster_queue": "team-b", "status": "active"}, "0x30"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-b", "status": "active"}, "0x30"),  # idle
          s("kueue_cluster_queue_status", {**KUEUE, "cluster_queue": "team-c", "status": "active"}, "1x30"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-c", "status": "active"}, "3x30")]),
    Case("OpenpodTeamStarvedUnderQuota", "40m",   # team-a uses 8 of 16 and waits; team-b borrows 8 over its 16
         [s("kueue_cluster_queue_nominal_quota", CQ("team-a"), "16x50"),
          s("kueue_cluster_queue_resource_usage", CQ("team-a"), "8x50"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-a", "status": "active"}, "1x50"),
          s("kueue_cluster_queue_nominal_quota", CQ("team-b"), "16x50"),
          s("kueue_cluster_queue_resource_usage", CQ("team-b"), "24x50")],
         [{"cohort": "org", "cluster_queue": "team-a", "resource": "nvidia.com/gpu"}],
         ["Team team-a: 8 nvidia.com/gpu of its quota unused while workloads wait and another team borrows"]),
    Case("OpenpodTeamStarvedUnderQuota", "40m",   # nobody borrows; or the waiting team is the one at quota
         [s("kueue_cluster_queue_nominal_quota", CQ("team-a"), "16x50"),
          s("kueue_cluster_queue_resource_usage", CQ("team-a"), "8x50"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-a", "status": "active"}, "1x50"),
          s("kueue_cluster_queue_nominal_quota", CQ("team-b"), "16x50"),
          s("kueue_cluster_queue_resource_usage", CQ("team-b"), "16x50"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-b", "status": "active"}, "2x50")]),
    Case("OpenpodWorkloadsEvictedRepeatedly", "50m",   # pods never ready in time: admitted, evicted, again
         [s("kueue_evicted_workloads_total", {**KUEUE, "cluster_queue": "team-a", "reason": "PodsReadyTimeout",
                                              "underlying_cause": "", "priority_class": ""}, "0x5 1x10 2x10 3x10 4x20")],
         [{"cluster_queue": "team-a", "reason": "PodsReadyTimeout"}],
         ["Team team-a: workloads evicted 4 times in an hour (PodsReadyTimeout)"]),
    Case("OpenpodWorkloadsEvictedRepeatedly", "50m",   # preemption by a higher priority is by design
         [s("kueue_evicted_workloads_total", {**KUEUE, "cluster_queue": "team-a", "reason": "Preempted",
                                              "underlying_cause": "", "priority_class": ""}, "0+1x60"),
          s("kueue_evicted_workloads_total", {**KUEUE, "cluster_queue": "team-b", "reason": "PodsReadyTimeout",
                                              "underlying_cause": "", "priority_class": ""}, "0x5 1x55")]),
    Case("OpenpodWorkloadStarving", "260m",   # a large job waits since t=0 while smaller ones are admitted
         [s("openpod_kueue_workload_created_timestamp_seconds", {**WL, "workload": "big"}, "0x270"),
          s("openpod_kueue_workload_condition", {**WL, "workload": "big", "type": "QuotaReserved"}, "0x270"),
          s("openpod_kueue_workload_condition_transition_timestamp_seconds",
            {**WL, "workload": "big", "type": "QuotaReserved"}, "0x270")]
         + [s("openpod_kueue_workload_created_timestamp_seconds", {**WL, "workload": f"small-{i}"}, f"{i * 1800}x270")
            for i in range(8)]
         + [s("openpod_kueue_workload_condition", {**WL, "workload": f"small-{i}", "type": "QuotaReserved"},
              "1x270") for i in range(8)]
         + [s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-a", "priority_class": ""},
              "0+1x270"),
            # its LocalQueue's ClusterQueue (two kube-state-metrics replicas: one series after the max)
            *(s("openpod_kueue_localqueue_info", {**KSM, "instance": i, "namespace": "team-a", "local_queue": "main",
                                                  "cluster_queue": "team-a-cq", **CRS_LQ}, "1x270")
              for i in ("10.0.0.3:8080", "10.0.0.4:8080"))],
         [{"namespace": "team-a", "local_queue": "main", "cluster_queue": "team-a-cq"}],
         ["Queue team-a/main: its oldest workload has waited 4h 20m 0s for quota"]),
    Case("OpenpodWorkloadStarving", "260m",   # its LocalQueue has no series (it does not exist): no cluster_queue
         [s("openpod_kueue_workload_created_timestamp_seconds", {**WL, "workload": "big"}, "0x270"),
          s("openpod_kueue_workload_condition", {**WL, "workload": "big", "type": "QuotaReserved"}, "0x270"),
          s("openpod_kueue_localqueue_info", {**KSM, "namespace": "team-a", "local_queue": "other",
                                              "cluster_queue": "team-a-cq", **CRS_LQ}, "1x270")],
         [{"namespace": "team-a", "local_queue": "main"}],
         ["Queue team-a/main: its oldest workload has waited 4h 20m 0s for quota"]),
    Case("OpenpodWorkloadStarving", "260m",
         [s("openpod_kueue_workload_created_timestamp_seconds", {**WL, "workload": "ran"}, "0x270"),   # admitted
          s("openpod_kueue_workload_condition", {**WL, "workload": "ran", "type": "QuotaReserved"}, "0x30 1x240"),
          s("openpod_kueue_workload_created_timestamp_seconds", {**WL, "workload": "evicted"}, "0x270"),
          s("openpod_kueue_workload_condition", {**WL, "workload": "evicted", "type": "QuotaReserved"},
            "1x200 0x70"),                                     # evicted at 200m: waits again from then
          s("openpod_kueue_workload_condition_transition_timestamp_seconds",
            {**WL, "workload": "evicted", "type": "QuotaReserved"}, "600x200 12000x70"),
          s("openpod_kueue_workload_created_timestamp_seconds", {**WL, "workload": "done"}, "0x270"),
          s("openpod_kueue_workload_condition", {**WL, "workload": "done", "type": "Finished"}, "1x270")]),
    Case("OpenpodTeamQueueStarving", "300m",   # Kueue's counts only: 3 pending 4 hours ago, 1 admitted since
         [s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-a", "status": "active"}, "3x120 2x200"),
          s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-a", "priority_class": ""},
            "10x120 11x200")],
         [{"cluster_queue": "team-a"}], ["Team team-a: a workload has waited over 240 minutes"]),
    Case("OpenpodTeamQueueStarving", "300m",
         [s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-b", "status": "active"}, "2x320"),
          s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-b", "priority_class": ""},
            "0+1x320"),                                    # a busy queue turning over: one admitted a minute
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-c", "status": "active"}, "3x100 0 3x220"),
          s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-c", "priority_class": ""}, "5x320"),
          s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-d", "status": "active"}, "3x320"),
          s("kueue_admitted_workloads_total", {**KUEUE, "cluster_queue": "team-d", "priority_class": ""}, "5x320"),
          s("openpod_kueue_workload_created_timestamp_seconds", {**WL, "workload": "x"}, "18000x320")]),
    Case("OpenpodWorkloadsInadmissible", "35m",
         [s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-a", "status": "inadmissible"}, "1x40")],
         [{"cluster_queue": "team-a", "status": "inadmissible"}], ["Team team-a: 1 workloads Kueue cannot admit"]),
    Case("OpenpodWorkloadsInadmissible", "35m",
         [s("kueue_pending_workloads", {**KUEUE, "cluster_queue": "team-a", "status": "inadmissible"},
            "1x20 0x20")]),
] + PLATFORM_CASES
