"""DevicePlugins: the Helm charts that advertise EFA, NVIDIA GPUs and Neuron devices to Kubernetes."""

from __future__ import annotations

from typing import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from openpod_core import labels
from openpod_core.accelerator_stack import multi_node_nvlink
from openpod_core.instance_types import INSTANCE_TYPES, Accelerator
from platform_constructs.placement import require_label as _require, tolerate_all

# Device plugins must run on nodes that still carry the startup taint: the deep
# health check that removes it counts the devices they advertise.
_TOLERATE_ALL = tolerate_all()


# aws-efa-k8s-device-plugin builds its required node affinity from this list; the chart's own list
# (aws/eks-charts, v0.5.14) lacks some types in the table, e.g. p5.4xlarge. The table is the source.
EFA_INSTANCE_TYPES = sorted(t.name for t in INSTANCE_TYPES.values() if t.efa_supported)

NEURON_INSTANCE_TYPES = sorted(t.name for t in INSTANCE_TYPES.values() if t.accelerator is Accelerator.NEURON)

# GPUs only through the device plugin (issue 23). With the device plugin's default ``envvar`` strategy the NVIDIA
# container toolkit hands a container whatever NVIDIA_VISIBLE_DEVICES names - a pod requesting no GPU, or one
# whose CUDA image sets NVIDIA_VISIBLE_DEVICES=all, gets every GPU of a node it shares with another team.
# NVIDIA's fix (NVIDIA/k8s-device-plugin@v0.17.4 README.md:311-314, DEVICE_LIST_STRATEGY volume-mounts, whose
# rationale document is "Preventing unprivileged access to GPUs in Kubernetes"): the plugin passes the allocated
# devices as /dev/null mounts under /var/run/nvidia-container-devices, and the toolkit on each node reads those
# and ignores the variable from unprivileged containers (NVIDIA/nvidia-container-toolkit@v1.17.9
# internal/config/config.go:62-63 accept-nvidia-visible-devices-envvar-when-unprivileged /
# accept-nvidia-visible-devices-as-volume-mounts, defaults true/false at internal/config/toml.go:207-208;
# cmd/nvidia-container-runtime-hook/container_config.go:160-180 getDevices; only mounts whose host source is
# /dev/null count, internal/config/image/cuda_image.go DevicesFromMounts - team pods cannot mount host paths).
DEVICE_LIST_STRATEGY = "volume-mounts"
DEVICE_LIST_ROOT = "/var/run/nvidia-container-devices"
TOOLKIT_SETTINGS = {"accept-nvidia-visible-devices-envvar-when-unprivileged": "false",
                    "accept-nvidia-visible-devices-as-volume-mounts": "true"}
TOOLKIT_SCRIPT = """\
#!/bin/bash
# GPUs only through the device plugin: the NVIDIA container toolkit reads the plugin's volume mounts and ignores
# NVIDIA_VISIBLE_DEVICES from unprivileged containers (platform_constructs/device_plugins.py). Runs before
# nodeadm starts kubelet, so no pod starts under the toolkit's defaults.
set -euo pipefail
nvidia-ctk config --in-place {sets}
""".format(sets=" ".join(f"--set {k}={v}" for k, v in TOOLKIT_SETTINGS.items()))
# A pod outside the team namespaces that watches every GPU without allocating one (dcgm-exporter) asks the
# toolkit for all of them the same way the plugin does: /dev/null mounted at <root>/all.
ALL_GPUS_VOLUME = {"name": "nvidia-all-gpus", "hostPath": "/dev/null"}
ALL_GPUS_MOUNT = {"name": "nvidia-all-gpus", "mountPath": f"{DEVICE_LIST_ROOT}/all", "readOnly": True}

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
                "gfd": {"enabled": False}, "deviceListStrategy": DEVICE_LIST_STRATEGY},
    ),
    "neuron-helm-chart": dict(
        repository="oci://public.ecr.aws/neuron/neuron-helm-chart", chart="neuron-helm-chart",
        release="neuron",
        # The DaemonSet's required affinity is node.kubernetes.io/instance-type In neuronInstances (values.yaml:1,
        # 47-60 and templates/_helpers.tpl "neuron-device-plugin.affinity" at 1.1.2; hard-coded from the same list
        # at 1.0.0, which had no trn2 type): the table is the source, as for EFA. The scheduler extension stays
        # off (docs/platform.md, "Accelerator stack"): on EKS it is a second kube-scheduler.
        values={"npd": {"enabled": False}, "neuronInstances": NEURON_INSTANCE_TYPES,
                "scheduler": {"enabled": False},
                "devicePlugin": {"tolerations": _TOLERATE_ALL, "nodeSelector": {labels.ACCELERATOR: "neuron"}}},
    ),
    # NVIDIA's DRA driver, ComputeDomains only (facts: chart.nvidia-dra-driver-gpu, eks.p6e-gb200): a ComputeDomain
    # makes an IMEX domain over the nodes its pods land on, so GPUs of one UltraServer share memory over NVLink.
    # GPU allocation stays with the device plugin, as the EKS guide says (resources.gpus.enabled false).
    "nvidia-dra-driver-gpu": dict(
        repository="https://helm.ngc.nvidia.com/nvidia", chart="nvidia-dra-driver-gpu",
        release="nvidia-dra-driver-gpu", values={},  # dra_values(): the controller's placement depends on the spec
    ),
}

# The chart's default kubelet-plugin affinity wants NFD/GFD labels or nvidia.com/gpu.present (values.yaml:245-265
# at v25.12.0); the platform pins it to the instance types with multi-node NVLink instead, from the table.
MULTI_NODE_NVLINK_TYPES = sorted(t.name for t in INSTANCE_TYPES.values() if multi_node_nvlink(t))


def dra_values(controller_node_selector: Mapping[str, str],
               controller_tolerations: Sequence[Mapping[str, str]] = ()) -> dict:
    """Values of ``nvidia-dra-driver-gpu``: the controller on the system group, tolerating its taints (the chart's
    default wants a control-plane node, which EKS never shows, and tolerates only that node's taint:
    values.yaml:187-207), the kubelet plugin on every node with multi-node NVLink, tolerating every taint (it must
    be up before the startup taint goes)."""
    return {
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        "controller": {"nodeSelector": dict(controller_node_selector),
                       "tolerations": [dict(t) for t in controller_tolerations],
                       "affinity": _require(*next(iter(controller_node_selector.items())))},
        "kubeletPlugin": {"tolerations": _TOLERATE_ALL,
                          "affinity": _require(labels.INSTANCE_TYPE, *MULTI_NODE_NVLINK_TYPES)},
    }


class DevicePlugins(Construct):
    """Installs the device plugin charts the cluster's instance groups need, at pinned versions.

    Props: ``efa`` / ``nvidia`` / ``neuron`` / ``compute_domains`` switch each chart (``compute_domains``: NVIDIA's
    DRA driver for IMEX ComputeDomains, for groups with multi-node NVLink; its controller runs on the nodes
    ``controller_node_selector`` selects, one label, tolerating ``controller_tolerations``); ``chart_versions`` maps chart name (keys of ``CHARTS``)
    to version.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, chart_versions: Mapping[str, str],
                 efa: bool = False, nvidia: bool = False, neuron: bool = False, compute_domains: bool = False,
                 controller_node_selector: Mapping[str, str] | None = None,
                 controller_tolerations: Sequence[Mapping[str, str]] = ()) -> None:
        super().__init__(scope, id)
        wanted = [name for name, on in (("aws-efa-k8s-device-plugin", efa), ("nvidia-device-plugin", nvidia),
                                        ("neuron-helm-chart", neuron), ("nvidia-dra-driver-gpu", compute_domains))
                  if on]
        missing = [n for n in wanted if n not in chart_versions]
        if missing:
            raise ValueError(f"DevicePlugins: chart_versions lacks a version for {', '.join(missing)}")
        if compute_domains and (not controller_node_selector or len(controller_node_selector) != 1):
            raise ValueError("DevicePlugins: compute_domains needs controller_node_selector, one label of the "
                             "nodes the DRA controller runs on (e.g. the system group's)")
        self.charts: dict[str, eks.HelmChart] = {}
        for name in wanted:
            c = CHARTS[name]
            values = (dra_values(controller_node_selector, controller_tolerations) if name == "nvidia-dra-driver-gpu"
                      else c["values"])
            self.charts[name] = eks.HelmChart(
                self, name, cluster=cluster, namespace="kube-system", version=chart_versions[name],
                repository=c["repository"], chart=c["chart"], release=c["release"], values=values,
                wait=False, timeout=Duration.minutes(10),
            )
