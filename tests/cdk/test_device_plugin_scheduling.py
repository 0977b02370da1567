"""Each device plugin DaemonSet must be schedulable on exactly the nodes that have its devices.

The pod's placement is the chart's defaults (tests/fixtures/charts/, recorded at the pinned chart
versions with their source) coalesced with the values the platform passes, as Helm does (maps merge,
lists and scalars replace), then matched against the labels a node of each created group carries
(the node group's labels plus kubelet's well-known ones) with Kubernetes' nodeSelector and
required-node-affinity rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from openpod_core import labels
from platform_constructs.instance_group import node_labels

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "charts"


def coalesce(defaults, overrides):
    """Helm's values coalescing: nested maps merge, anything else in ``overrides`` replaces."""
    if isinstance(defaults, dict) and isinstance(overrides, dict):
        out = dict(defaults)
        for k, v in overrides.items():
            out[k] = coalesce(defaults.get(k), v) if k in defaults else v
        return out
    return overrides


def _expr_matches(node: dict[str, str], e: dict) -> bool:
    key, op, values = e["key"], e["operator"], [str(v) for v in e.get("values", [])]
    if op == "In":
        return key in node and node[key] in values
    if op == "NotIn":
        return key not in node or node[key] not in values
    if op == "Exists":
        return key in node
    if op == "DoesNotExist":
        return key not in node
    raise AssertionError(f"operator {op} not modelled")


def schedulable(node: dict[str, str], pod: dict) -> bool:
    """Kubernetes: every nodeSelector pair matches AND (if set) one of the required terms matches fully."""
    if any(node.get(k) != str(v) for k, v in (pod.get("nodeSelector") or {}).items()):
        return False
    terms = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if not terms:
        return True
    return any(all(_expr_matches(node, e) for e in t.get("matchExpressions", [])) for t in terms)


def efa_chart_pod(values: dict) -> dict:
    """What aws-efa-k8s-device-plugin's DaemonSet template renders from its values (see the fixture)."""
    sil = values["supportedInstanceLabels"]
    return {"nodeSelector": values.get("nodeSelector"),
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": k, "operator": "In", "values": sil["values"]},
                                      {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn",
                                       "values": ["auto"]}]}
                for k in sil["keys"]]}}}}


def chart_values(synth, chart: str) -> dict:
    for r in synth.resources("Custom::AWSCDK-EKS-HelmChart").values():
        if r["Properties"]["Chart"] == chart:
            return json.loads(r["Properties"]["Values"])
    raise KeyError(chart)


def pod_placement(synth, chart: str) -> dict:
    version = synth.stack.spec.eks.chart_versions[chart]
    defaults = yaml.safe_load((FIXTURES / f"{chart}-{version}.yaml").read_text())
    values = coalesce(defaults, chart_values(synth, chart))
    return efa_chart_pod(values) if chart == "aws-efa-k8s-device-plugin" else values


def nodes(synth) -> dict[str, dict[str, str]]:
    """Labels of a node of each group the stack creates."""
    out = {}
    for g in synth.stack.spec.instance_groups:
        if g.awaits_capacity_block:
            continue
        t = g.type
        out[g.name] = {**node_labels(g.name, t, g.labels), labels.INSTANCE_TYPE: t.name,
                       "kubernetes.io/arch": "arm64" if t.arch == "arm64" else "amd64",
                       "kubernetes.io/os": "linux", labels.HOSTNAME: f"ip-10-0-0-1.{g.name}"}
    return out


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_nvidia_device_plugin_lands_on_every_nvidia_node_and_nowhere_else(synthesized, example):
    synth = synthesized[example]
    pod = pod_placement(synth, "nvidia-device-plugin")
    for name, node in nodes(synth).items():
        nvidia = synth.stack.spec.group(name).type.accelerator.value == "nvidia"
        assert schedulable(node, pod) is nvidia, (name, node, pod.get("affinity"))


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_efa_device_plugin_lands_on_every_efa_node(synthesized, example):
    synth = synthesized[example]
    pod = pod_placement(synth, "aws-efa-k8s-device-plugin")
    for name, node in nodes(synth).items():
        efa = synth.stack.spec.group(name).type.efa_supported
        assert schedulable(node, pod) is efa, (name, node[labels.INSTANCE_TYPE])


def test_the_efa_plugin_knows_every_efa_type_in_the_table(default):
    from openpod_core.instance_types import INSTANCE_TYPES

    pod = pod_placement(default, "aws-efa-k8s-device-plugin")
    for t in INSTANCE_TYPES.values():
        node = {labels.EFA: "true" if t.efa_supported else "false", labels.INSTANCE_TYPE: t.name}
        if t.efa_supported:
            assert schedulable(node, pod), t.name


def test_the_model_rejects_what_kubernetes_rejects():
    pod = {"nodeSelector": {"a": "1"},
           "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
               "nodeSelectorTerms": [{"matchExpressions": [{"key": "b", "operator": "In", "values": ["x"]}]}]}}}}
    assert schedulable({"a": "1", "b": "x"}, pod)
    assert not schedulable({"a": "1"}, pod)           # affinity unmet
    assert not schedulable({"b": "x"}, pod)           # nodeSelector unmet
    assert coalesce({"m": {"x": 1, "l": [1]}}, {"m": {"l": [2]}}) == {"m": {"x": 1, "l": [2]}}


# ------------------------------------------------------------------ NVIDIA DRA driver (IMEX ComputeDomains)
DRA = "nvidia-dra-driver-gpu"


def dra_values(synth) -> dict:
    version = synth.stack.spec.eks.chart_versions[DRA]
    defaults = yaml.safe_load((FIXTURES / f"{DRA}-{version}.yaml").read_text())
    return coalesce(defaults, chart_values(synth, DRA))


def _multi_node_nvlink(t) -> bool:
    return t.accelerator.value == "nvidia" and t.ultraserver is not None


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_dra_driver_is_installed_for_gb200_groups_with_compute_domains_only(synthesized, example):
    """facts: eks.p6e-gb200 - the EKS guide installs NVIDIA's DRA driver for ComputeDomains (IMEX) and keeps
    GPU allocation on the device plugin (resources.gpus.enabled false); both example specs declare a GB200 group."""
    values = dra_values(synthesized[example])
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_dra_kubelet_plugin_lands_on_every_gb200_node_and_nowhere_else(synthesized, example):
    synth = synthesized[example]
    pod = dra_values(synth)["kubeletPlugin"]
    for name, node in nodes(synth).items():
        assert schedulable(node, pod) is _multi_node_nvlink(synth.stack.spec.group(name).type), (name, node)
    # it must run while the node still carries the startup taint (like the device plugins)
    assert {"operator": "Exists"} in pod["tolerations"]


def test_the_dra_kubelet_plugin_matches_every_multi_node_nvlink_type_of_the_table(default):
    """Against a node of every type in the table, not only the examples' groups (the default example's GB200
    group awaits a capacity block, so no GB200 node of it is created)."""
    from openpod_core.instance_types import INSTANCE_TYPES

    pod = dra_values(default)["kubeletPlugin"]
    for t in INSTANCE_TYPES.values():
        node = {**node_labels("g", t), labels.INSTANCE_TYPE: t.name}
        assert schedulable(node, pod) is _multi_node_nvlink(t), t.name


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_dra_controller_runs_on_the_system_group(synthesized, example):
    """The chart's default controller affinity wants a control-plane node, which EKS never shows
    (fixture: values.yaml:201-207): the controller would stay Pending and no IMEX domain would ever form."""
    synth = synthesized[example]
    pod = dra_values(synth)["controller"]
    for name, node in nodes(synth).items():
        g = synth.stack.spec.group(name)
        assert schedulable(node, pod) is (name == "system"), (name, pod)


# ------------------------------------------------------------------ Neuron device plugin
def neuron_chart_pod(values: dict) -> dict:
    """What the Neuron chart's DaemonSet renders (see the fixture): its nodeSelector as given, its affinity with
    the two placeholders replaced by the instance-type key and ``neuronInstances``."""
    dp = values["devicePlugin"]
    text = json.dumps(dp.get("affinity") or {})
    text = text.replace('"__INSTANCE_TYPE_KEY__"', json.dumps(labels.INSTANCE_TYPE))
    text = text.replace('"__NEURON_INSTANCES__"', json.dumps(values["neuronInstances"]))
    return {"nodeSelector": dp.get("nodeSelector"), "affinity": json.loads(text), "tolerations": dp["tolerations"]}


def neuron_pod(synth) -> dict:
    return neuron_chart_pod(pod_placement(synth, "neuron-helm-chart"))


@pytest.mark.parametrize("example", ["default", "large"])
def test_the_neuron_device_plugin_lands_on_every_trainium_node_and_nowhere_else(synthesized, example):
    synth = synthesized[example]
    pod = neuron_pod(synth)
    for name, node in nodes(synth).items():
        neuron = synth.stack.spec.group(name).type.accelerator.value == "neuron"
        assert schedulable(node, pod) is neuron, (name, node, pod["affinity"])
    assert {"operator": "Exists"} in pod["tolerations"]  # up while the startup taint is on


def test_the_neuron_device_plugin_knows_every_neuron_type_in_the_table(default):
    """trn2u.48xlarge groups await a capacity block in the examples, so check every Neuron type of the table."""
    from openpod_core.instance_types import INSTANCE_TYPES

    pod = neuron_pod(default)
    for t in INSTANCE_TYPES.values():
        node = {**node_labels("g", t), labels.INSTANCE_TYPE: t.name}
        assert schedulable(node, pod) is (t.accelerator.value == "neuron"), t.name


def test_the_neuron_scheduler_extension_is_not_installed(default):
    """On EKS the chart's extension runs a second kube-scheduler (docs/platform.md, "Accelerator stack"): off."""
    assert not pod_placement(default, "neuron-helm-chart")["scheduler"]["enabled"]


# neuronInstances of chart 1.0.0 (aws-neuron/neuron-helm-charts@8172e5e:charts/neuron-helm-chart/values.yaml:1), where
# the DaemonSet's affinity is that list, hard-coded in templates/device-plugin-daemonset.yaml: no trn2 type at all.
NEURON_1_0_0_INSTANCES = ["trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "inf1.xlarge", "inf1.2xlarge",
                          "inf1.6xlarge", "inf1.24xlarge", "inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge",
                          "inf2.48xlarge", "inf2e.32xlarge"]


def test_neuron_placement_does_not_rest_on_the_charts_own_instance_list(default):
    """Charts before 1.1 listed no trn2 type (a later chart may drop or rename one). The
    platform passes the table's Neuron types, so a chart list without trn2 still places the plugin on trn2."""
    from openpod_core.instance_types import INSTANCE_TYPES

    version = default.stack.spec.eks.chart_versions["neuron-helm-chart"]
    defaults = yaml.safe_load((FIXTURES / f"neuron-helm-chart-{version}.yaml").read_text())
    defaults["neuronInstances"] = NEURON_1_0_0_INSTANCES
    pod = neuron_chart_pod(coalesce(defaults, chart_values(default, "neuron-helm-chart")))
    for t in INSTANCE_TYPES.values():
        if t.accelerator.value == "neuron":
            assert schedulable({**node_labels("g", t), labels.INSTANCE_TYPE: t.name}, pod), t.name


def test_no_dra_driver_without_a_multi_node_nvlink_group(tmp_path):
    from infra.spec.loading import parse_spec
    from infra.app.stacks import build_app
    from tests.conftest import example_data

    data = example_data()
    data["instance_groups"] = [g for g in data["instance_groups"] if g["name"] != "gb200"]
    for t in data["teams"]:
        t["quotas"].pop("gb200", None)
    _, stack = build_app(parse_spec(data), outdir=str(tmp_path))   # constructed, not synthesized
    assert set(stack.device_plugins.charts) == {"aws-efa-k8s-device-plugin", "nvidia-device-plugin",
                                                "neuron-helm-chart"}


def test_the_dra_controller_needs_one_node_label():
    import aws_cdk as cdk
    from aws_cdk import aws_eks_v2 as eks

    from platform_constructs.device_plugins import DevicePlugins

    stack = cdk.Stack(cdk.App(), "Probe", env=cdk.Environment(region="us-east-2"))
    cluster = eks.Cluster.from_cluster_attributes(stack, "C", cluster_name="probe")
    with pytest.raises(ValueError, match="compute_domains needs controller_node_selector, one label"):
        DevicePlugins(stack, "D", cluster=cluster, chart_versions={DRA: "25.12.0"}, compute_domains=True)
