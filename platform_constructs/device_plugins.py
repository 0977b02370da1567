"""DevicePlugins: the Helm charts that advertise EFA, NVIDIA GPUs and Neuron devices to Kubernetes."""

from __future__ import annotations

from typing import Mapping

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from openpod_core import labels
from openpod_core.instance_types import INSTANCE_TYPES

# Device plugins must run on nodes that still carry the startup taint: the deep
# health check that removes it counts the devices they advertise.
_TOLERATE_ALL = [{"operator": "Exists"}]


def _require(key: str, *values: str) -> dict:
    """A required node affinity on one label: replaces a chart's default affinity (Helm replaces lists)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}}}


# aws-efa-k8s-device-plugin builds its required node affinity from this list; the chart's own list
# (aws/eks-charts, v0.5.14) lacks some types in the table, e.g. p5.4xlarge. The table is the source.
EFA_INSTANCE_TYPES = sorted(t.name for t in INSTANCE_TYPES.values() if t.efa_supported)

CHARTS: dict[str, dict] = {
    "aws-efa-k8s-device-plugin": dict(
        repository="https://aws.github.io/eks-charts", chart="aws-efa-k8s-device-plugin",
        release="efa-device-plugin",
        values={"tolerations": _TOLERATE_ALL, "nodeSelector": {labels.EFA: "true"},
                "supportedInstanceLabels": {"keys": [labels.INSTANCE_TYPE], "values": EFA_INSTANCE_TYPES}},
    ),
    "nvidia-device-plugin": dict(
        repository="https://nvidia.github.io/k8s-device-plugin", chart="nvidia-device-plugin",
        release="nvidia-device-plugin",
        # The chart's default affinity requires NFD labels or nvidia.com/gpu.present (values.yaml:63-84 at
        # v0.17.4); without NFD/GFD no node has them and no GPU would be advertised. Our node groups label
        # NVIDIA nodes themselves, so the affinity names that label instead.
        values={"tolerations": _TOLERATE_ALL, "nodeSelector": {labels.ACCELERATOR: "nvidia"},
                "affinity": _require(labels.ACCELERATOR, "nvidia"),
                "gfd": {"enabled": False}},
    ),
    "neuron-helm-chart": dict(
        repository="oci://public.ecr.aws/neuron/neuron-helm-chart", chart="neuron-helm-chart",
        release="neuron",
        values={"npd": {"enabled": False},
                "devicePlugin": {"tolerations": _TOLERATE_ALL, "nodeSelector": {labels.ACCELERATOR: "neuron"}}},
    ),
}


class DevicePlugins(Construct):
    """Installs the device plugin charts the cluster's instance groups need, at pinned versions.

    Props: ``efa`` / ``nvidia`` / ``neuron`` switch each chart; ``chart_versions``
    maps chart name (keys of ``CHARTS``) to version.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, chart_versions: Mapping[str, str],
                 efa: bool = False, nvidia: bool = False, neuron: bool = False) -> None:
        super().__init__(scope, id)
        wanted = [name for name, on in (("aws-efa-k8s-device-plugin", efa), ("nvidia-device-plugin", nvidia),
                                        ("neuron-helm-chart", neuron)) if on]
        missing = [n for n in wanted if n not in chart_versions]
        if missing:
            raise ValueError(f"DevicePlugins: chart_versions lacks a version for {', '.join(missing)}")
        self.charts: dict[str, eks.HelmChart] = {}
        for name in wanted:
            c = CHARTS[name]
            self.charts[name] = eks.HelmChart(
                self, name, cluster=cluster, namespace="kube-system", version=chart_versions[name],
                repository=c["repository"], chart=c["chart"], release=c["release"], values=c["values"],
                wait=False, timeout=Duration.minutes(10),
            )
