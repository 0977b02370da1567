"""The NodeHealthAgent construct: images, manifests, Pod Identity role scoped by tag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    import aws_cdk as cdk
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.assertions import Template
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer

    from infra.spec.loading import load_spec
    from platform_constructs.node_agent import NodeHealthAgent

    out = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(out))
    stack = cdk.Stack(app, "Agent", env=cdk.Environment(account="111122223333", region="us-east-2"))
    cluster = eks.Cluster(stack, "Cluster", version=eks.KubernetesVersion.V1_34,
                          kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV34Layer(stack, "K")))
    nodegroups = [eks.Nodegroup(stack, f"Nodegroup{i}", cluster=cluster) for i in range(2)]
    agent = NodeHealthAgent(stack, "NodeAgent", cluster=cluster, spec=load_spec(None), image_directory=str(ROOT),
                            nodegroups=nodegroups)
    template = Template.from_stack(stack)
    assembly = app.synth()
    return template.to_json(), Path(assembly.directory), agent


def test_one_image_per_architecture_built_from_the_repo_root(synth):
    _, out, agent = synth
    assert sorted(agent.images) == ["amd64", "arm64"]
    assets = json.loads((out / "Agent.assets.json").read_text())["dockerImages"]
    sources = [a["source"] for a in assets.values()]
    assert sorted(s["platform"] for s in sources) == ["linux/amd64", "linux/arm64"]
    assert all(s["dockerFile"] == "node_agent/Dockerfile" for s in sources)
    staged = out / sources[0]["directory"]
    # Docker always sends the root .dockerignore along with the context it trims.
    top = sorted(p.name for p in staged.iterdir() if p.name != ".dockerignore")
    assert top == ["README.md", "infra", "node_agent", "pyproject.toml"]
    assert not list(staged.rglob("__pycache__"))


def test_controller_role_is_scoped_to_the_cluster_by_tag(synth):
    template, _, _ = synth
    res = template["Resources"]
    (assoc,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::EKS::PodIdentityAssociation"]
    assert (assoc["Namespace"], assoc["ServiceAccount"]) == ("openpod-system", "node-remediation")
    role_id = assoc["RoleArn"]["Fn::GetAtt"][0]
    trust = res[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert not [r for r in res.values() if r["Type"] == "AWS::EKS::Addon"]  # the spec's pinned add-on is used
    (policy,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::IAM::Policy"
                 and r["Properties"]["Roles"] == [{"Ref": role_id}]]
    st = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    cluster_ref = {"Ref": next(k for k, v in res.items() if v["Type"] == "AWS::EKS::Cluster")}
    on_cluster = {"aws:ResourceTag/eks:cluster-name": cluster_ref}
    # The Auto Scaling group of each node group, by the name EKS gave it, read at deploy time.
    lookups = {k: v["Properties"] for k, v in res.items() if v["Type"] == "Custom::AWS"}
    assert len(lookups) == 2
    names = [{"Fn::GetAtt": [k, "nodegroup.resources.autoScalingGroups.0.name"]} for k in sorted(lookups)]
    for k, props in lookups.items():
        call = json.dumps(props["Create"])
        assert "describeNodegroup" in call and "NodegroupName" in call, call   # the name, not the Ref (cluster/name)
        assert props["Update"] == props["Create"]
    # SetInstanceHealth (resource type autoScalingGroup, fact iam.autoscaling.set-instance-health): only the
    # platform's groups by ARN; before, any group of the account that carried (or was given) the cluster tag.
    assert st["ReplaceClusterInstances"]["Action"] == "autoscaling:SetInstanceHealth"
    assert st["ReplaceClusterInstances"]["Condition"] == {"StringEquals": on_cluster}
    arns = st["ReplaceClusterInstances"]["Resource"]
    assert sorted((a["Fn::Join"][1][-1] for a in arns), key=json.dumps) == sorted(names, key=json.dumps)
    assert all(a["Fn::Join"][1][-2].endswith(":autoScalingGroup:*:autoScalingGroupName/") for a in arns)
    # Reboot: besides the cluster tag (settable by anyone with ec2:CreateTags), the instance's
    # aws:autoscaling:groupName - a tag only Auto Scaling sets - must name one of those groups.
    assert st["RebootClusterInstances"]["Action"] == "ec2:RebootInstances"
    cond = st["RebootClusterInstances"]["Condition"]
    assert set(cond) == {"StringEquals"}
    assert cond["StringEquals"]["aws:ResourceTag/eks:cluster-name"] == cluster_ref
    assert sorted(cond["StringEquals"]["aws:ResourceTag/aws:autoscaling:groupName"], key=json.dumps) == \
        sorted(names, key=json.dumps)
    for sid in ("ReplaceClusterInstances", "RebootClusterInstances"):
        assert st[sid]["Resource"] != "*"
    assert all(a.startswith(("autoscaling:Describe", "ec2:Describe")) for a in st["DescribeInstances"]["Action"])
    # UltraServer labels (node_agent/topology.py) read EC2's instance topology
    assert "ec2:DescribeInstanceTopology" in st["DescribeInstances"]["Action"]
    actions = {a for s in st.values() for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.endswith("*") or "Terminate" in a for a in actions)


def _manifest_objects(prop) -> list[dict]:
    """The manifest JSON of a KubernetesResource, with CloudFormation tokens replaced by "TOKEN"."""
    if isinstance(prop, dict) and "Fn::Join" in prop:
        prop = "".join(p if isinstance(p, str) else "TOKEN" for p in prop["Fn::Join"][1])
    return json.loads(prop)


def test_manifests_are_applied(synth):
    template, _, _ = synth
    objs = [o for r in template["Resources"].values() if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
            for o in _manifest_objects(r["Properties"]["Manifest"])]
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert objs[0]["kind"] == "Namespace"
    assert {("ServiceAccount", "node-health-agent"), ("ServiceAccount", "node-remediation"),
            ("DaemonSet", "node-health-agent-amd64"), ("DaemonSet", "node-health-agent-arm64"),
            ("Deployment", "node-remediation"), ("ClusterRole", "openpod-node-health-agent"),
            ("ClusterRole", "openpod-node-remediation")} <= names
    images = {o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["image"] for o in objs
              if o["kind"] in ("DaemonSet", "Deployment")}
    assert all("TOKEN" in i or ".dkr.ecr." in i for i in images.values())


def test_cdk_nag_finds_nothing_unacknowledged_in_the_construct(tmp_path):
    import aws_cdk as cdk
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer
    from cdk_nag import AwsSolutionsChecks

    from infra.spec.loading import load_spec
    from platform_constructs.node_agent import NodeHealthAgent

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Nag", env=cdk.Environment(account="111122223333", region="us-east-2"))
    cluster = eks.Cluster(stack, "Cluster", version=eks.KubernetesVersion.V1_34,
                          kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV34Layer(stack, "K")))
    NodeHealthAgent(stack, "NodeAgent", cluster=cluster, spec=load_spec(None), image_directory=str(ROOT))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except Exception:  # noqa: BLE001 (the bare test cluster itself has findings; only ours matter here)
        pass
    report = json.loads((tmp_path / "validation-report.json").read_text())
    ours = [(v["ruleName"], c["constructPath"]) for p in report["pluginReports"] for v in p["violations"]
            for c in v["violatingConstructs"] if "/NodeAgent/" in c["constructPath"]]
    assert ours == []
    assert any(p["violations"] for p in report["pluginReports"])  # the checker did run
