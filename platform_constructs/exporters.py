"""MetricsExporters: the pinned Helm charts that export node and cluster-object metrics to Prometheus.

- prometheus-node-exporter on every node (host CPU, memory, disks, network; its infiniband collector
  reads the RDMA devices under /sys/class/infiniband, where EFA devices appear);
- kube-state-metrics on the system group (pods, nodes, jobs as series).

Both are annotated ``prometheus.io/scrape``/``prometheus.io/port`` so the ``kubernetes-pods`` scrape job
(observability/scrape.py) finds them. Values keys read at the pinned versions:
prometheus-community/helm-charts@prometheus-node-exporter-4.56.1:charts/prometheus-node-exporter/values.yaml
(service.port 131, podAnnotations 429, tolerations 471) and
prometheus-community/helm-charts@kube-state-metrics-8.4.0:charts/kube-state-metrics/values.yaml
(service.port 64, nodeSelector 360, podAnnotations 389), checked 2026-11-23.
"""

from __future__ import annotations

from typing import Mapping

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

NAMESPACE = "openpod-monitoring"
REPOSITORY = "https://prometheus-community.github.io/helm-charts"
NODE_EXPORTER_PORT = 9100       # values.yaml service.port
KUBE_STATE_METRICS_PORT = 8080  # values.yaml service.port


def _scrape(port: int) -> dict[str, str]:
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port)}


def chart_values(system_node_selector: Mapping[str, str]) -> dict[str, dict]:
    """Helm values per chart (keys of ``CHARTS``)."""
    return {
        # Every node, tainted or not: a node in its startup health check is one we want to see.
        "prometheus-node-exporter": {"podAnnotations": _scrape(NODE_EXPORTER_PORT),
                                     "tolerations": [{"operator": "Exists"}]},
        "kube-state-metrics": {"podAnnotations": _scrape(KUBE_STATE_METRICS_PORT),
                               "nodeSelector": dict(system_node_selector)},
    }


CHARTS = ("prometheus-node-exporter", "kube-state-metrics")


class MetricsExporters(Construct):
    """Installs ``CHARTS`` at the versions of ``chart_versions`` into the ``openpod-monitoring`` namespace."""

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, chart_versions: Mapping[str, str],
                 system_node_selector: Mapping[str, str] | None = None) -> None:
        super().__init__(scope, id)
        missing = [c for c in CHARTS if c not in chart_versions]
        if missing:
            raise ValueError(f"MetricsExporters: chart_versions lacks a version for {', '.join(missing)}")
        values = chart_values(system_node_selector or {})
        self.charts: dict[str, eks.HelmChart] = {}
        for name in CHARTS:
            self.charts[name] = eks.HelmChart(
                self, name, cluster=cluster, namespace=NAMESPACE, create_namespace=True,
                version=chart_versions[name], repository=REPOSITORY, chart=name, release=name,
                values=values[name], wait=False, timeout=Duration.minutes(10))
