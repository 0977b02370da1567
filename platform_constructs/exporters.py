"""MetricsExporters: the pinned Helm charts that export node and cluster-object metrics to Prometheus.

- prometheus-node-exporter on every node (host CPU, memory, disks, network; for EFA devices its infiniband
  collector gives only port state and rate, none of the efa driver's counters - the node agent exports
  those: facts node-exporter.infiniband-efa);
- kube-state-metrics on the system group (pods, nodes, jobs as series);
- dcgm-exporter on NVIDIA nodes, when the spec has any (GPU utilization, memory, temperature, power,
  NVLink and ECC counters, Xid errors).

Both are annotated ``prometheus.io/scrape``/``prometheus.io/port`` so the ``kubernetes-pods`` scrape job
(observability/scrape.py) finds them. Values keys read at the pinned versions:
prometheus-community/helm-charts@prometheus-node-exporter-4.56.1:charts/prometheus-node-exporter/values.yaml
(service.port 131, podAnnotations 429, tolerations 471) and
prometheus-community/helm-charts@kube-state-metrics-8.4.0:charts/kube-state-metrics/values.yaml
(service.port 64, nodeSelector 360, tolerations 376 - rendered by templates/deployment.yaml:359-361,
podAnnotations 389), and
NVIDIA/dcgm-exporter@4.5.3-4.8.2:deployment/values.yaml (podAnnotations 85, service.port 114,
serviceMonitor.enabled 129 - true by default, which needs the Prometheus Operator CRDs, so off here), checked 2026-11-23.
- the Neuron monitor on Trainium nodes, when the spec has any (NeuronCore utilization, device memory,
  execution errors, hardware ECC events): our own DaemonSet from AWS's manifest, not the chart
  (platform_constructs/neuron_monitor.py says why).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from platform_constructs.device_plugins import ALL_GPUS_MOUNT, ALL_GPUS_VOLUME
from openpod_core import labels
from platform_constructs import neuron_monitor

NAMESPACE = "openpod-monitoring"
REPOSITORY = "https://prometheus-community.github.io/helm-charts"
DCGM_REPOSITORY = "https://nvidia.github.io/dcgm-exporter/helm-charts"  # NVIDIA/dcgm-exporter README.md:38-39
NODE_EXPORTER_PORT = 9100       # values.yaml service.port
KUBE_STATE_METRICS_PORT = 8080  # values.yaml service.port
DCGM_EXPORTER_PORT = 9400       # values.yaml service.port


# kube-state-metrics' custom resource state (its CustomResourceStateMetrics format, kubernetes/kube-state-metrics@
# v2.20.0:docs/metrics/extend/customresourcestate-metrics.md: metricNamePrefix + "_" + name; RFC3339 strings parsed
# to Unix time; a path to a list yields one series per element) for Kueue's Workloads, the served storage version
# (kubernetes-sigs/kueue@v0.19.2:config/components/crd/bases/kueue.x-k8s.io_workloads.yaml:9479,19142): when each
# was created and the state and last transition of each of its conditions (QuotaReserved, Admitted, Finished,
# ...). Kueue's own metrics count pending workloads but give none an age (pkg/metrics/metrics.go:411-420): the
# starvation alert reads these. Chart keys customResourceState.{enabled,config} and rbac.extraRules
# (prometheus-community/helm-charts@kube-state-metrics-8.4.0:charts/kube-state-metrics/values.yaml), checked
# 2026-11-25.
KUEUE_WORKLOAD_PREFIX = "openpod_kueue_workload"
KUEUE_LOCALQUEUE_PREFIX = "openpod_kueue_localqueue"
KUEUE_WORKLOAD_STATE = {
    "kind": "CustomResourceStateMetrics",
    "spec": {"resources": [{
        "groupVersionKind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "Workload"},
        "metricNamePrefix": KUEUE_WORKLOAD_PREFIX,
        "labelsFromPath": {"namespace": ["metadata", "namespace"], "workload": ["metadata", "name"],
                           "local_queue": ["spec", "queueName"]},
        "metrics": [
            {"name": "created_timestamp_seconds", "help": "Unix time the Workload was created",
             "each": {"type": "Gauge", "gauge": {"path": ["metadata", "creationTimestamp"]}}},
            {"name": "condition", "help": "1 if the Workload's condition (label type) is True",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "conditions"],
                                                 "labelsFromPath": {"type": ["type"]}, "valueFrom": ["status"]}}},
            {"name": "condition_transition_timestamp_seconds",
             "help": "Unix time the Workload's condition (label type) last changed",
             "each": {"type": "Gauge", "gauge": {"path": ["status", "conditions"],
                                                 "labelsFromPath": {"type": ["type"]},
                                                 "valueFrom": ["lastTransitionTime"]}}},
        ]},
        # A LocalQueue's ClusterQueue (spec.clusterQueue, immutable: kueue@v0.19.2 apis/kueue/v1beta2/
        # localqueue_types.go:33-37; Kueue's own LocalQueue metrics name no ClusterQueue, pkg/metrics/metrics.go:431):
        # what joins a Workload's LocalQueue to its ClusterQueue's alerts. An Info metric, value 1, labels from
        # the object (kubernetes/kube-state-metrics@v2.20.0:docs/metrics/extend/customresourcestate-metrics.md:725-731).
        {"groupVersionKind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "LocalQueue"},
         "metricNamePrefix": KUEUE_LOCALQUEUE_PREFIX,
         "labelsFromPath": {"namespace": ["metadata", "namespace"], "local_queue": ["metadata", "name"]},
         "metrics": [
             {"name": "info", "help": "1 per LocalQueue, labelled with the ClusterQueue that backs it",
              "each": {"type": "Info", "info": {"labelsFromPath": {"cluster_queue": ["spec", "clusterQueue"]}}}},
         ]},
    ]},
}
KUEUE_WORKLOAD_RBAC = [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"],
                        "verbs": ["list", "watch"]}]


# What dcgm-exporter collects: its chart's customMetrics, the whole list in its CSV format (field, type, help;
# NVIDIA/dcgm-exporter@4.5.3-4.8.2:deployment/values.yaml:266-268, rendered into the chart's ConfigMap by
# templates/metrics-configmap.yaml:9-11): the chart's default rows (metrics-configmap.yaml; each row of
# observability/engine_metrics/dcgm.py not marked "not collected") and the PCIe link's current generation and
# width (NVIDIA/DCGM@v4.5.3:dcgmlib/dcgm_fields.h:810,815; go-dcgm knows both names, pkg/dcgm/const_fields.go:
# 1374-1375 at dcgm-exporter's pin), which DCGM's replay bound reads (modules/health/DcgmHealthWatch.cpp:1346-1347)
# and OpenpodGPUPCIeReplaysHigh reads the same way. Checked 2026-11-29.
DCGM_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock (MHz)"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "memory clock (MHz)"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "memory temperature (C)"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (C)"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "power draw (W)"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "energy since boot (mJ)"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe retries"),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation now"),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe link lanes now"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (%)"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "memory utilization (%)"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "encoder utilization (%)"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "decoder utilization (%)"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "last Xid error"),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "framebuffer free (MiB)"),
    ("DCGM_FI_DEV_FB_USED", "gauge", "framebuffer used (MiB)"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "NVLink bandwidth counter (all lanes)"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU license status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "rows remapped for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "rows remapped for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "1 if a row remap failed"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "ratio of time the graphics engine is active"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "ratio of cycles the tensor pipe is active"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "ratio of cycles the memory interface is active"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe bytes sent per second"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe bytes received per second"),
)


def dcgm_counters_csv() -> str:
    """DCGM_COUNTERS in dcgm-exporter's CSV format."""
    return "".join(f"{name}, {typ}, {help}\n" for name, typ, help in DCGM_COUNTERS)


def chart_values(system_node_selector: Mapping[str, str],
                 system_tolerations: Sequence[Mapping[str, str]] = ()) -> dict[str, dict]:
    """Helm values per chart (keys of ``CHARTS``): kube-state-metrics on the system group, tolerating its taints."""
    return {
        # Every node, tainted or not: a node in its startup health check is one we want to see.
        "prometheus-node-exporter": {"podAnnotations": labels.scrape_annotations(NODE_EXPORTER_PORT),
                                     "tolerations": [{"operator": "Exists"}]},
        "kube-state-metrics": {"podAnnotations": labels.scrape_annotations(KUBE_STATE_METRICS_PORT),
                               "nodeSelector": dict(system_node_selector),
                               "tolerations": [dict(t) for t in system_tolerations],
                               "customResourceState": {"enabled": True, "config": KUEUE_WORKLOAD_STATE},
                               "rbac": {"extraRules": KUEUE_WORKLOAD_RBAC}},
        "dcgm-exporter": {"podAnnotations": labels.scrape_annotations(DCGM_EXPORTER_PORT),
                          "nodeSelector": {labels.ACCELERATOR: "nvidia"}, "tolerations": [{"operator": "Exists"}],
                          "serviceMonitor": {"enabled": False},
                          "customMetrics": dcgm_counters_csv(),
                          # Every GPU without allocating one, now that the toolkit ignores NVIDIA_VISIBLE_DEVICES
                          # from unprivileged containers (device_plugins.py). extraVolumeMounts replaces the
                          # chart's default list, so its counters mount is repeated (values.yaml:167-182).
                          "extraHostVolumes": [dict(ALL_GPUS_VOLUME)],
                          "extraVolumeMounts": [
                              {"name": "exporter-metrics-volume",
                               "mountPath": "/etc/dcgm-exporter/default-counters.csv",
                               "subPath": "default-counters.csv"},
                              dict(ALL_GPUS_MOUNT)]},
    }


CHARTS = ("prometheus-node-exporter", "kube-state-metrics")
NVIDIA_CHARTS = ("dcgm-exporter",)
REPOSITORIES = {"prometheus-node-exporter": REPOSITORY, "kube-state-metrics": REPOSITORY,
                "dcgm-exporter": DCGM_REPOSITORY}


class MetricsExporters(Construct):
    """Installs ``CHARTS`` (and ``NVIDIA_CHARTS`` when ``nvidia``) at the versions of ``chart_versions`` into the
    ``openpod-monitoring`` namespace, and the Neuron monitor DaemonSet when ``neuron``."""

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, chart_versions: Mapping[str, str],
                 system_node_selector: Mapping[str, str] | None = None,
                 system_tolerations: Sequence[Mapping[str, str]] = (), nvidia: bool = False,
                 neuron: bool = False) -> None:
        super().__init__(scope, id)
        wanted = list(CHARTS) + (list(NVIDIA_CHARTS) if nvidia else [])
        missing = [c for c in wanted if c not in chart_versions]
        if missing:
            raise ValueError(f"MetricsExporters: chart_versions lacks a version for {', '.join(missing)}")
        values = chart_values(system_node_selector or {}, system_tolerations)
        self.charts: dict[str, eks.HelmChart] = {}
        for name in wanted:
            self.charts[name] = eks.HelmChart(
                self, name, cluster=cluster, namespace=NAMESPACE, create_namespace=True,
                version=chart_versions[name], repository=REPOSITORIES[name], chart=name, release=name,
                values=values[name], wait=False, timeout=Duration.minutes(10))
        self.neuron_monitor: eks.KubernetesManifest | None = None
        if neuron:
            self.neuron_monitor = cluster.add_manifest("NeuronMonitor", neuron_monitor.daemonset(NAMESPACE))
            # the node exporter's release creates the namespace (create_namespace)
            self.neuron_monitor.node.add_dependency(self.charts["prometheus-node-exporter"])
