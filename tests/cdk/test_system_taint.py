"""The system group is tainted, every controller the platform places there tolerates the taint, and a pod that
does not tolerate it never lands there (issue 28).

Placement is read from the synthesized template: the node groups' ``Taints`` and labels, each Helm chart's values
(coalesced with the chart's recorded defaults where the chart has one in tests/fixtures/charts/, as Helm does) and
the manifests the stack applies; labels match with tests/cdk/test_device_plugin_scheduling.schedulable, taints
with Kubernetes' toleration rules (tests/scheduling.py).
"""

from __future__ import annotations

import pytest
import yaml

from infra.governance.system_group import system_groups
from openpod_core import labels
from tests.cdk.test_device_plugin_scheduling import FIXTURES, chart_values, coalesce, nodes, schedulable
from tests.cdk.test_platform import applied
from tests.scheduling import node_taint, untolerated

SYSTEM_TAINT = {"Key": labels.SYSTEM_TAINT, "Value": labels.SYSTEM_TAINT_VALUE, "Effect": "NO_SCHEDULE"}
# Chart -> where its controller's pod fields sit in the values (kueue@v0.19.2:charts/kueue/values.yaml:104-107;
# jobset@v0.12.0:charts/jobset/values.yaml:70,74; kube-state-metrics-8.4.0 values.yaml:360,376;
# nvidia-dra-driver-gpu 25.12.0 values.yaml:187-265, tests/fixtures/charts/).
SYSTEM_CHARTS = {"kueue": ("controllerManager",), "jobset": ("controller",), "kube-state-metrics": (),
                 "nvidia-dra-driver-gpu": ("controller",)}


def taints(synth, group: str) -> list[dict]:
    return [node_taint(t) for t in synth.nodegroup(group)["Properties"].get("Taints", [])]


def chart_pod(synth, chart: str) -> dict:
    values = chart_values(synth, chart)
    fixture = FIXTURES / f"{chart}-{synth.stack.spec.eks.chart_versions.get(chart)}.yaml"
    if fixture.exists():
        values = coalesce(yaml.safe_load(fixture.read_text()), values)
    for key in SYSTEM_CHARTS[chart]:
        values = values[key]
    return values


def installed(synth) -> set[str]:
    return {r["Properties"]["Chart"] for r in synth.resources("Custom::AWSCDK-EKS-HelmChart").values()}


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_system_group_and_only_it_carries_the_system_taint(synthesized, example):
    synth = synthesized[example]
    system = {g.name for g in system_groups(synth.stack.spec)}
    assert system == {"system"}
    for name in synth.stack.instance_groups:
        tainted = SYSTEM_TAINT in synth.nodegroup(name)["Properties"].get("Taints", [])
        assert tainted is (name in system), name


@pytest.mark.parametrize("example", ["default", "large"])
def test_every_controller_on_the_system_group_selects_it_and_tolerates_its_taints(synthesized, example):
    synth = synthesized[example]
    node, node_taints = nodes(synth)["system"], taints(synth, "system")
    assert {"key": labels.SYSTEM_TAINT, "value": "true", "effect": "NoSchedule"} in node_taints
    charts = [c for c in SYSTEM_CHARTS if c in installed(synth)]
    assert {"kueue", "jobset", "kube-state-metrics", "nvidia-dra-driver-gpu"} <= set(charts)
    pods = {c: chart_pod(synth, c) for c in charts}
    (controller,) = [o for _, o, _ in applied(synth)
                     if o["kind"] == "Deployment" and o["metadata"]["name"] == "node-remediation"]
    pods["node-remediation"] = controller["spec"]["template"]["spec"]
    for name, pod in pods.items():
        assert pod.get("nodeSelector") == {labels.INSTANCE_GROUP: "system"} or name == "node-remediation", name
        assert schedulable(node, pod), name
        assert untolerated(node_taints, pod.get("tolerations")) == [], name
        for other in nodes(synth):  # and nowhere else
            if other != "system":
                assert not schedulable(nodes(synth)[other], pod), (name, other)


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_node_exporter_still_runs_on_the_system_nodes(synthesized, example):
    synth = synthesized[example]
    values = chart_values(synth, "prometheus-node-exporter")
    assert untolerated(taints(synth, "system"), values["tolerations"]) == []


def test_a_pod_without_the_toleration_is_never_placed_on_the_system_nodes(large):
    """A pod nothing pins (a Deployment an admin creates outside team namespaces, say) may go to an untainted
    CPU group, never to the system group."""
    bare = {"containers": [{"name": "app", "image": "nginx"}]}
    assert schedulable(nodes(large)["system"], bare)       # the labels would allow it: only the taint stops it
    assert untolerated(taints(large, "system"), bare.get("tolerations")) == [
        {"key": labels.SYSTEM_TAINT, "value": "true", "effect": "NoSchedule"}]
    assert untolerated(taints(large, "data-prep"), None) == []
    # A toleration of an unrelated taint, or of the system key with another value, does not help.
    assert untolerated(taints(large, "system"), [{"key": "dedicated", "operator": "Exists"},
                                                {"key": labels.SYSTEM_TAINT, "operator": "Equal", "value": "x"}])
