"""IMEX ComputeDomains for jobs on multi-node-NVLink groups (P6e-GB200 UltraServers).

A multi-node job on such a group gets its own ComputeDomain (NVIDIA's DRA driver, installed by
``platform_constructs/device_plugins.py``): the driver's controller makes a ResourceClaimTemplate for the
domain's IMEX channel, every trainer pod of the job claims it (``trainer_pod``, :func:`pod_claim`), and the
driver starts an IMEX daemon on exactly the nodes the pods land on, so GPUs of the job's nodes share memory over NVLink. ``openpod submit`` creates the
ComputeDomain next to the JobSet, owned by it (deleted with it): one domain per job, as the EKS guide advises.

Kueue 0.19.2 admits a pod that claims a ResourceClaimTemplate only when the template's device class is
mapped to a quota resource (facts: ``kueue.dra-device-class-mapping``): the platform maps the channel class to
``IMEX_CHANNEL`` and gives each multi-node-NVLink flavor one channel per node of quota
(``infra/governance/queues.py``), so a job's channels are counted like its GPUs.
"""

from __future__ import annotations

from typing import Any

from openpod_core.accelerator_stack import multi_node_nvlink

# NVIDIA/k8s-dra-driver-gpu@v25.12.0: api/nvidia.com/resource/v1beta1/computedomain.go:88-105 (spec.numNodes,
# spec.channel.resourceClaimTemplate.name), deployments/helm/nvidia-dra-driver-gpu/templates/
# deviceclass-compute-domain-default-channel.yaml (the channel's DeviceClass), templates/
# compute-domain-workload-claim-template.tmpl.yaml (one device of that class per claim, ExactCount).
API = "resource.nvidia.com/v1beta1"
KIND = "ComputeDomain"
PLURAL = "computedomains"
CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
# Kueue's logical resource for the channel class (Configuration resources.deviceClassMappings[].name).
IMEX_CHANNEL = "openpod.io/imex-channel"
CLAIM = "imex-channel"


def needed(spec, req) -> bool:
    """A job spanning nodes of a multi-node-NVLink group: IMEX between them needs a ComputeDomain."""
    return multi_node_nvlink(spec.group(req.group).type) and req.nodes > 1


def name(job: str) -> str:
    return f"{job}-imex"


def channel_template(job: str) -> str:
    return f"{job}-imex-channel"


def compute_domain(req) -> dict[str, Any]:
    """The job's ComputeDomain; ``numNodes: 0`` = elastic, it follows the pods (driver >= 25.8)."""
    return {"apiVersion": API, "kind": KIND,
            "metadata": {"name": name(req.name), "namespace": req.team,
                         "labels": {"app.kubernetes.io/name": req.name}},
            "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": channel_template(req.name)}}}}


def pod_claim(req) -> dict[str, Any]:
    """The trainer pod's claim on the job's IMEX channel (``infra/governance/trainer_pod.py`` adds it)."""
    return {"name": CLAIM, "resourceClaimTemplateName": channel_template(req.name)}


def device_class_mappings(spec) -> list[dict[str, Any]]:
    """Kueue's ``resources.deviceClassMappings`` for ``spec``: the channel class when a group needs it."""
    if not any(multi_node_nvlink(g.type) for g in spec.instance_groups):
        return []
    return [{"name": IMEX_CHANNEL, "deviceClassNames": [CHANNEL_DEVICE_CLASS]}]
