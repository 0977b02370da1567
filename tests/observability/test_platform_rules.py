"""The platform-workload alerts read the namespaces the platform deploys to, and their runbooks name the
controller managers' Deployments as the installs create them."""

from __future__ import annotations

from infra.governance import install
from node_agent import deploy
from observability.platform_rules import LOGS, PLATFORM_NAMESPACES, platform_alerts
from observability.thresholds import AlertThresholds
from platform_constructs import exporters


def test_the_platform_namespaces_are_where_the_platform_deploys():
    assert {deploy.NAMESPACE, exporters.NAMESPACE, install.KUEUE_NAMESPACE, install.JOBSET_NAMESPACE,
            "kube-system"} == set(PLATFORM_NAMESPACES)   # kube-system: device plugins (device_plugins.py)


def test_the_runbooks_name_the_managers_deployments():
    """Kueue: <release>-controller-manager (install.KUEUE_CONTROLLER); JobSet: <fullname>-controller
    (jobset@v0.12.0 charts/jobset/templates/controller/_helpers.tpl:20-22,57-59)."""
    assert f"-n {install.KUEUE_NAMESPACE} logs deploy/{install.KUEUE_CONTROLLER}" in LOGS
    assert f"-n {install.JOBSET_NAMESPACE} logs deploy/{install.JOBSET_RELEASE}-controller`" in LOGS


def test_every_workload_selector_is_scoped_to_the_platform_namespaces():
    """A team's Deployment, DaemonSet or pod (namespaces of its own) must not raise a platform alert."""
    import re

    for a in platform_alerts(AlertThresholds()):
        for sel in re.findall(r"kube_\w+\{([^}]*)\}", a.expr):
            assert 'job="kube-state-metrics"' in sel and f'namespace=~"{"|".join(PLATFORM_NAMESPACES)}"' in sel, a.name
