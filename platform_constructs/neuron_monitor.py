"""The Neuron monitor exporter on Trainium nodes: ``neuron-monitor`` piped into its Prometheus exporter.

Built as our own DaemonSet from AWS's documented manifest rather than from the neuron-helm-chart:
the chart's ``monitor`` template renders ``monitor.exporter.podAnnotations`` as
``metadata.tolerations`` (aws-neuron/neuron-helm-charts@5c70d9d:charts/neuron-helm-chart/
templates/monitor-exporter-daemonset.yaml:19-22), so its pods cannot carry the
``prometheus.io/*`` annotations the ``kubernetes-pods`` scrape job keeps (observability/scrape.py),
the only version of that template in the index (facts: chart.neuron-helm-chart.monitor-template).

Image, command, arguments, port, resources and the privileged security context are those of
aws-neuron/aws-neuron-sdk@v2.32.0:src/k8/k8s-neuron-monitor-daemonset.yml:43-64 (the manifest the
Neuron "Deploy Neuron Monitor DaemonSet" guide applies, deploy/infrastructure/monitoring.rst:16),
checked 2026-11-23. What differs, and why:

- node affinity on ``openpod.io/accelerator=neuron`` (the label every node of a Trainium group carries,
  platform_constructs/instance_group.py ``node_labels``) instead of AWS's instance-type list, which
  lacks trn2;
- tolerations of every taint: a node in its startup health check (``openpod.io/health-check``)
  is one we want to see;
- the ``prometheus.io/scrape``/``prometheus.io/port`` pod annotations and an ``app.kubernetes.io/name``
  label.

The container is privileged as in AWS's manifest: the monitor reads the Neuron devices. It runs in the
platform's monitoring namespace, which team users cannot create pods in. AWS states the monitor does not
support clusters that allocate Neuron devices with the Neuron DRA driver (deploy/infrastructure/monitoring.rst:9):
the platform uses the device plugin.
"""

from __future__ import annotations

from openpod_core import labels
from openpod_core.facts.register import value
from platform_constructs.placement import require_label, tolerate_all

NAME = "neuron-monitor"
PORT = 8000  # k8s-neuron-monitor-daemonset.yml:45,50 (and neuron-monitor-prometheus.py's default --port)


def image() -> str:
    return value("neuron-monitor.image")


def affinity() -> dict:
    """Required node affinity: only nodes of Trainium (Neuron) groups."""
    return require_label(labels.ACCELERATOR, "neuron")


def daemonset(namespace: str) -> dict:
    """The DaemonSet manifest."""
    match = {"app.kubernetes.io/name": NAME}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(match)},
        "spec": {
            "selector": {"matchLabels": dict(match)},
            "template": {
                "metadata": {"labels": dict(match),
                             "annotations": labels.scrape_annotations(PORT)},
                "spec": {
                    "affinity": affinity(),
                    "tolerations": tolerate_all(),
                    "containers": [{
                        "name": NAME, "image": image(),
                        "command": ["/opt/bin/entrypoint.sh"],
                        "args": ["--port", str(PORT),
                                 "--neuron-monitor-config", "/opt/aws/neuron/bin/neuron-monitor.conf"],
                        "ports": [{"containerPort": PORT, "name": "metrics"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                                      "requests": {"cpu": "256m", "memory": "128Mi"}},
                        "env": [{"name": "GOMEMLIMIT", "value": "160MiB"}],
                        "securityContext": {"privileged": True},
                    }],
                },
            },
        },
    }
