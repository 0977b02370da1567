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
        ]}]},
}
KUEUE_WORKLOAD_RBAC = [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "watch"]}]


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
