"""TaskGovernance on its own in a minimal stack: charts, readiness gate, manifests, ordering."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.governance import all_objects, install
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.xdist_group("cdk")


@pytest.fixture(scope="module")
def synth():
    from aws_cdk import App, Stack, assertions
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer

    from platform_constructs.governance import TaskGovernance

    spec = load_spec(EXAMPLES / "default.yaml")
    app = App()
    stack = Stack(app, "Gov")
    cluster = eks.Cluster(stack, "Cluster", version=eks.KubernetesVersion.V1_34,
                          kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV34Layer(stack, "K")))
    gov = TaskGovernance(stack, "Governance", cluster=cluster, spec=spec)
    return spec, gov, assertions.Template.from_stack(stack)


def _by_type(template, t):
    return template.find_resources(t)


def _logical_id(resources, needle):
    ids = [k for k in resources if needle in k]
    assert len(ids) == 1, (needle, list(resources))
    return ids[0]


def test_charts_pinned_from_spec_with_wait(synth):
    spec, _, template = synth
    charts = _by_type(template, "Custom::AWSCDK-EKS-HelmChart")
    by_release = {c["Properties"]["Release"]: c["Properties"] for c in charts.values()}
    assert set(by_release) == {"kueue", "jobset"}
    k, j = by_release["kueue"], by_release["jobset"]
    assert k["Repository"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert j["Repository"] == "oci://registry.k8s.io/jobset/charts/jobset"
    assert k["Version"] == spec.eks.chart_versions["kueue"] == "0.19.2"
    assert j["Version"] == spec.eks.chart_versions["jobset"] == "0.12.0"
    assert k["Wait"] is True and j["Wait"] is True
    values = json.loads(k["Values"]) if isinstance(k["Values"], str) else k["Values"]
    gates = values["controllerManager"]["featureGates"]
    assert {"name": "TopologyAwareScheduling", "enabled": True} in gates
    assert "fairSharing:" in values["managerConfig"]["controllerManagerConfigYaml"]
    assert "jobset.x-k8s.io/jobset" in values["managerConfig"]["controllerManagerConfigYaml"]
    assert values["controllerManager"]["nodeSelector"] == {"openpod.io/instance-group": "system"}
    jvalues = json.loads(j["Values"]) if isinstance(j["Values"], str) else j["Values"]
    assert jvalues["prometheus"] == {"enable": False}  # a ServiceMonitor without its CRD fails the install


def test_manifests_are_the_same_objects_as_openpod_manifests(synth):
    spec, gov, template = synth
    manifests = _by_type(template, "Custom::AWSCDK-EKS-KubernetesResource")
    gate_rbac = Stack_of(gov).resolve(gov.webhook_gate.rbac.node.default_child.logical_id)
    applied = []
    for lid, res in manifests.items():
        if lid == gate_rbac:  # the CDK-only gate's own RBAC (GitOps tools retry instead)
            continue
        applied += json.loads(res["Properties"]["Manifest"])
    for obj in applied:  # the label CDK adds for `kubectl apply --prune`
        obj["metadata"]["labels"] = {k: v for k, v in obj["metadata"]["labels"].items()
                                     if not k.startswith("aws.cdk.eks/prune-")}
    key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])  # noqa: E731
    assert sorted(applied, key=key) == sorted(all_objects(spec), key=key)


def test_order_jobset_then_kueue_then_webhook_gate_then_queues(synth):
    _, _, template = synth
    res = template.to_json()["Resources"]
    kueue = _logical_id({k: v for k, v in res.items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"}, "Kueue")
    jobset = _logical_id({k: v for k, v in res.items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"}, "JobSet")
    gate = _logical_id({k: v for k, v in res.items() if v["Type"] == "Custom::OpenpodWebhookGate"},
                       "KueueWebhookGate")
    manifests = {k: v for k, v in res.items() if v["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"}
    queues, core = _logical_id(manifests, "Queues"), _logical_id(manifests, "Core")
    deps = lambda lid: set(res[lid].get("DependsOn", []))  # noqa: E731
    assert jobset in deps(kueue)
    assert kueue in deps(gate)
    assert {gate, core} <= deps(queues)
    gate_props = res[gate]["Properties"]
    assert gate_props["Path"] == install.KUEUE_WEBHOOK_PROBE_PATH
    assert json.loads(gate_props["Probe"]) == install.KUEUE_WEBHOOK_PROBE
    # Kueue objects never ride in the core manifest (the webhook would not be ready for them).
    core_kinds = {o["kind"] for o in json.loads(res[core]["Properties"]["Manifest"])}
    assert core_kinds <= {"Namespace", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                          "PersistentVolumeClaim", "ServiceAccount", "ValidatingAdmissionPolicy",
                          "ValidatingAdmissionPolicyBinding", "NetworkPolicy"}
    assert {"Namespace", "NetworkPolicy"} <= core_kinds
    queue_kinds = {o["kind"] for o in json.loads(res[queues]["Properties"]["Manifest"])}
    assert "LocalQueue" in queue_kinds and "Namespace" not in queue_kinds
    # Cluster-scoped objects kubectl's prune would miss have a resource each (test_lifecycle.py);
    # the Kueue ones wait for the webhook gate like the shared Kueue manifest.
    for lid, m in manifests.items():
        (obj, *more) = json.loads(m["Properties"]["Manifest"])
        if lid.startswith("GovernanceObjects"):
            assert not more and "namespace" not in obj["metadata"]
            assert (obj["kind"] in {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                                    "ValidatingAdmissionPolicyBinding"}) == (gate not in deps(lid)), lid
            assert m["Properties"]["Overwrite"] is True


def test_jobset_controller_runs_with_the_restart_job_gate_before_kueue_installs(synth):
    """The chart has no value for feature gates (kubernetes-sigs/jobset@v0.12.0:charts/jobset/templates/controller/
    configmap.yaml:24-37): after the chart, our file goes into the chart's ConfigMap under a key of its own, the
    controller's config volume is patched to read it, and Kueue (then the queues teams submit to) waits for that."""
    spec, gov, template = synth
    res = template.to_json()["Resources"]
    stack = Stack_of(gov)
    version = spec.eks.chart_versions["jobset"]
    patches = {k: v["Properties"] for k, v in res.items() if v["Type"] == "Custom::AWSCDK-EKS-KubernetesPatch"}
    config, gates = (stack.resolve(c.node.default_child.node.default_child.logical_id)
                     for c in (gov.jobset_config, gov.jobset_feature_gates))
    assert set(patches) == {config, gates}
    assert (patches[config]["ResourceName"], patches[config]["PatchType"]) == ("configmap/jobset-controller-config", "merge")
    assert json.loads(patches[config]["ApplyPatchJson"]) == install.jobset_config_patch(version)
    assert (patches[gates]["ResourceName"], patches[gates]["PatchType"]) == ("deployment/jobset-controller", "strategic")
    assert json.loads(patches[gates]["ApplyPatchJson"]) == install.jobset_controller_patch(version)
    assert json.loads(patches[gates]["RestorePatchJson"]) == install.jobset_controller_restore_patch()
    assert {p["ResourceNamespace"] for p in patches.values()} == {"jobset-system"}
    charts = {k: v for k, v in res.items() if v["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    kueue, jobset = _logical_id(charts, "Kueue"), _logical_id(charts, "JobSet")
    deps = lambda lid: set(res[lid].get("DependsOn", []))  # noqa: E731
    assert jobset in deps(config) and config in deps(gates) and gates in deps(kueue)


def test_missing_chart_version_names_the_prop():
    from aws_cdk import App, Stack
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer

    from infra.spec.loading import parse_spec
    from platform_constructs.governance import TaskGovernance

    # The spec refuses an empty version (infra/spec/eks.py); the construct checks its own prop too.
    valid = parse_spec(yaml.safe_load((EXAMPLES / "default.yaml").read_text()))
    spec = valid.model_copy(update={"eks": valid.eks.model_copy(update={"charts": {"kueue": ""}})})
    stack = Stack(App(), "Gov")
    cluster = eks.Cluster(stack, "Cluster", version=eks.KubernetesVersion.V1_34,
                          kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV34Layer(stack, "K")))
    with pytest.raises(ValueError, match=r"spec\.eks\.charts\.kueue: a pinned version is required"):
        TaskGovernance(stack, "Governance", cluster=cluster, spec=spec)


def test_webhook_gate_asks_the_api_server_with_least_privilege(synth):
    """The gate dry-run creates a probe through the API server (an Endpoints address is not a working
    webhook: kubernetes-sigs/kueue#13036), from the private subnets, as a role that may only create flavors."""
    from tests.governance.k8s_schema import validate

    spec, gov, template = synth
    res = template.to_json()["Resources"]
    (gate_id,) = [k for k, v in res.items() if v["Type"] == "Custom::OpenpodWebhookGate"]
    props = res[gate_id]["Properties"]
    assert props["KueueVersion"] == spec.eks.chart_versions["kueue"]  # an upgrade re-runs the gate
    assert int(props["TimeoutSeconds"]) == 600 and int(props["IntervalSeconds"]) == 5
    assert validate(json.loads(props["Probe"])) == []  # a valid Kueue v0.19.2 ResourceFlavor
    assert "dryRun=All" in props["Path"]
    assert not template.find_resources("Custom::AWSCDK-EKS-KubernetesObjectValue")

    fn_id = gov.webhook_gate.function.node.default_child.logical_id
    fn = res[Stack_of(gov).resolve(fn_id)]["Properties"]
    assert fn["Handler"] == "index.on_event" and fn["VpcConfig"]["SubnetIds"]
    entry = next(v["Properties"] for v in res.values() if v["Type"] == "AWS::EKS::AccessEntry"
                 and v["Properties"].get("KubernetesGroups") == ["openpod:kueue-webhook-gate"])
    assert entry["Type"] == "STANDARD" and "AccessPolicies" not in entry  # RBAC below is all it may do
    rbac = json.loads(res[Stack_of(gov).resolve(gov.webhook_gate.rbac.node.default_child.logical_id)]
                      ["Properties"]["Manifest"])
    role = next(o for o in rbac if o["kind"] == "ClusterRole")
    assert role["rules"] == [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "verbs": ["create"]}]
    binding = next(o for o in rbac if o["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "openpod:kueue-webhook-gate"}]
    deps = set(res[gate_id].get("DependsOn", []))
    assert Stack_of(gov).resolve(gov.webhook_gate.rbac.node.default_child.logical_id) in deps


def Stack_of(construct):  # noqa: N802
    from aws_cdk import Stack

    return Stack.of(construct)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"path": "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"}, r"path: .* must ask for a dry run"),
    ({"timeout_min": 20}, r"timeout: 20(\.0)? min exceeds the Lambda limit"),
])
def test_webhook_gate_props_are_validated(kwargs, message):
    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer

    from platform_constructs.webhook_gate import WebhookGate

    stack = Stack(App(), "Gate")
    cluster = eks.Cluster(stack, "Cluster", version=eks.KubernetesVersion.V1_34,
                          kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV34Layer(stack, "K")))
    with pytest.raises(ValueError, match=message):
        WebhookGate(stack, "Gate", cluster=cluster, probe=install.KUEUE_WEBHOOK_PROBE, plural="resourceflavors",
                    group="g", path=kwargs.get("path", install.KUEUE_WEBHOOK_PROBE_PATH),
                    timeout=Duration.minutes(kwargs.get("timeout_min", 10)))
