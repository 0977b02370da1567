"""Constructs validate their own props and name the prop in the error."""

from __future__ import annotations

import os
import subprocess
import sys

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from openpod_core import instance_types as it
from infra.spec.groups import CapacityType
from platform_constructs.cluster import PlatformCluster
from platform_constructs.device_plugins import DevicePlugins
from platform_constructs.images import ContainerImage
from platform_constructs.instance_group import InstanceGroup
from platform_constructs.lustre import LustreStorage
from platform_constructs.network import Network, private_subnet_mask
from tests.conftest import ROOT

pytestmark = pytest.mark.xdist_group("cdk-synth")


def probe_env():
    """A stack in us-east-2 with a two-zone network, an imported cluster and a node role."""
    app = cdk.App()
    stack = cdk.Stack(app, "Probe", env=cdk.Environment(region="us-east-2"))
    net = Network(stack, "Net", availability_zones=["us-east-2a", "us-east-2b"])
    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="probe", vpc=net.vpc)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    return stack, net, cluster, role


@pytest.fixture(scope="module")
def env():
    return probe_env()


def _group(env, id, **props):
    stack, net, cluster, role = env
    base = dict(cluster=cluster, node_role=role, group_name=id.lower(), instance_type=it.get("p5.48xlarge"),
                subnets=net.private_subnets("us-east-2a"), security_groups=["sg-1"], max_size=2)
    return InstanceGroup(stack, id, **{**base, **props})


@pytest.mark.parametrize("props, message", [
    (dict(placement_group=True, capacity_type=CapacityType.RESERVATION, capacity_reservation_id="cr-0123456789abcdef0"),
     "placement_group must be false with a capacity reservation"),
    (dict(capacity_type=CapacityType.CAPACITY_BLOCK), "capacity_reservation_id is required"),
    (dict(capacity_reservation_id="cr-0123456789abcdef0"), "capacity_reservation_id needs capacity_type"),
    (dict(min_size=3, desired_size=1, max_size=4), "min_size <= desired_size <= max_size"),
    (dict(imds_hop_limit=3), "imds_hop_limit must be 1 or 2"),
    (dict(security_groups=[]), "security_groups must include the cluster security group"),
    (dict(hugepages_mib=5121), "hugepages_mib must be 0 or more and a multiple of 2"),
    (dict(max_unavailable=0), "max_unavailable must be 1..100"),
])
def test_instance_group_rejects_bad_props(env, props, message):
    with pytest.raises(ValueError, match=message):
        _group(env, f"Bad{abs(hash(message))}", **props)


def test_efa_group_needs_exactly_one_subnet(env):
    with pytest.raises(ValueError, match="subnets must be exactly one subnet for an EFA instance type"):
        _group(env, "TwoSubnets", subnets=env[1].private_subnets())


def test_cpu_group_may_span_subnets_and_gets_no_startup_taint(env):
    g = _group(env, "Cpu", instance_type=it.get("m7i.2xlarge"), subnets=env[1].private_subnets())
    assert g.efa_interface_count == 0 and g.placement_group is None
    cfn = g.nodegroup.node.default_child
    assert cdk.Stack.of(g).resolve(cfn.taints) in (None, [])


def test_cluster_access_props(env):
    from infra.spec.eks import DEFAULT_ADDONS, AccessEntry

    stack, net, _, _ = env
    base = dict(cluster_name="c", vpc=net.vpc, subnets=net.private_subnets(), version="1.34",
                secrets_key=kms.Key(stack, "SecretsKey"), addon_versions=DEFAULT_ADDONS)
    arn = "arn:aws:iam::111122223333:role/admins"
    with pytest.raises(ValueError, match=r"kubernetes_groups\['arn:aws:iam::111122223333:role/admins'\] must list"):
        PlatformCluster(stack, "NoGroup", **base, kubernetes_groups={arn: []})
    with pytest.raises(ValueError, match="outside the reserved system: prefix"):
        PlatformCluster(stack, "System", **base, kubernetes_groups={arn: ["system:masters"]})
    with pytest.raises(ValueError, match="access_entries lists arn:aws:iam::111122223333:role/admins more than once"):
        PlatformCluster(stack, "Twice", **base, access_entries=[AccessEntry(principal_arn=arn)] * 2)


def test_network_props():
    app = cdk.App()
    stack = cdk.Stack(app, "N", env=cdk.Environment(region="us-east-2"))
    with pytest.raises(ValueError, match="availability_zones needs at least 2"):
        Network(stack, "One", availability_zones=["us-east-2a"])
    with pytest.raises(ValueError, match="nat_gateways must be 1..2"):
        Network(stack, "Nat", availability_zones=["us-east-2a", "us-east-2b"], nat_gateways=3)
    net = Network(stack, "Ok", availability_zones=["us-east-2a", "us-east-2b"])
    with pytest.raises(ValueError, match="availability_zone 'us-east-2c' is not one of"):
        net.private_subnets("us-east-2c")
    assert private_subnet_mask(16, 2) == 18 and private_subnet_mask(16, 3) == 19 and private_subnet_mask(20, 6) == 24


def test_lustre_and_plugins_and_image_props(env):
    stack, net, cluster, _ = env
    key = kms.Key(stack, "K")
    bucket = s3.Bucket(stack, "B")
    sub = net.private_subnets("us-east-2a")[0]
    with pytest.raises(ValueError, match="storage_capacity_gib must be 1200 or a multiple of 2400"):
        LustreStorage(stack, "L1", subnet=sub, security_group=net.lustre_security_group, bucket=bucket,
                      encryption_key=key, storage_capacity_gib=3000)
    with pytest.raises(ValueError, match="throughput_per_tib must be one of"):
        LustreStorage(stack, "L2", subnet=sub, security_group=net.lustre_security_group, bucket=bucket,
                      encryption_key=key, throughput_per_tib=300)
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer

    fs = LustreStorage(stack, "L3", subnet=sub, security_group=net.lustre_security_group, bucket=bucket,
                       encryption_key=key)
    with_kubectl = eks.Cluster(stack, "Kubectl", version=eks.KubernetesVersion.V1_34, vpc=net.vpc,
                               kubectl_provider_options=eks.KubectlProviderOptions(
                                   kubectl_layer=KubectlV34Layer(stack, "Layer")))
    fs.add_volume(with_kubectl, name="fsx-lustre-a", namespace="a")
    with pytest.raises(ValueError, match="a volume named 'fsx-lustre-a' exists already"):
        fs.add_volume(with_kubectl, name="fsx-lustre-a", namespace="b")
    with pytest.raises(ValueError, match="add_volume needs a name, namespace and claim"):
        fs.add_volume(with_kubectl, name="fsx-lustre-c", namespace="")
    with pytest.raises(ValueError, match="chart_versions lacks a version for nvidia-device-plugin"):
        DevicePlugins(stack, "D", cluster=cluster, chart_versions={}, nvidia=True)
    with pytest.raises(ValueError, match="architectures must be a non-empty subset"):
        ContainerImage(stack, "I", directory=str(ROOT), file="training/Dockerfile", architectures=["sparc"])


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / "node_modules" / ".bin" / "cdk").exists(), reason="npm CDK CLI not installed")
def test_cdk_cli_synthesizes_the_default_offline(tmp_path):
    """The README path: the npm-pinned CLI runs cdk.json's app with no credentials and no lookups."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # cdk.json runs the project's .venv/bin/python (ROOT/.venv, as `make synth` makes it), then the CLI.
    path = [str(ROOT / "node_modules" / ".bin"), os.path.dirname(sys.executable), env.get("PATH", "")]
    env.update(PATH=os.pathsep.join(path), PYTHONPATH=str(ROOT), CDK_DISABLE_CLI_TELEMETRY="true",
               AWS_EC2_METADATA_DISABLED="true", JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    proc = subprocess.run(["cdk", "synth", "--quiet", "-c", "spec=examples/default.yaml", "--output",
                           str(tmp_path / "out")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "out" / "openpod-dev.template.json").exists()
    assert (ROOT / "cdk.context.json").read_text().strip() == "{}", "synth needed a context lookup"


def test_checkpoint_object_lock_is_a_spec_option_that_updates_in_place():
    """Issue 10: an optional Object Lock default retention for checkpoints (deletes leave versions)."""
    from aws_cdk.assertions import Template

    from infra.deploy.plan import create_only_properties
    from infra.spec.storage import BucketSpec, BucketsSpec
    from platform_constructs.buckets import PlatformBuckets

    app = cdk.App(context={"@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True})  # as cdk.json sets it
    stack = cdk.Stack(app, "Locked", env=cdk.Environment(region="us-east-2"))
    spec = BucketsSpec(checkpoints=BucketSpec(versioned=True, object_lock_days=14))
    b = PlatformBuckets(stack, "Buckets", encryption_key=kms.Key(stack, "Key"), spec=spec)
    props = Template.from_stack(stack).to_json()["Resources"][stack.get_logical_id(b.checkpoints.node.default_child)]
    assert props["Properties"]["ObjectLockEnabled"] is True
    assert props["Properties"]["ObjectLockConfiguration"] == {
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 14}}}
    datasets = Template.from_stack(stack).to_json()["Resources"][stack.get_logical_id(b.datasets.node.default_child)]
    assert "ObjectLockEnabled" not in datasets["Properties"]                       # off by default
    assert "/properties/ObjectLockEnabled" not in create_only_properties("us-east-2", "AWS::S3::Bucket")


def test_object_lock_without_versioning_is_one_spec_error():
    import yaml

    from infra.spec.base import SpecError
    from infra.spec.loading import parse_spec
    from tests.conftest import EXAMPLES

    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data.setdefault("storage", {}).setdefault("buckets", {})["logs"] = {"versioned": False, "object_lock_days": 7}
    with pytest.raises(SpecError) as e:
        parse_spec(data, "s.yaml")
    assert [f"{p.path}: {p.message}" for p in e.value.problems] == [
        "storage.buckets.logs.object_lock_days: Object Lock needs versioning: set versioned: true, or remove "
        "object_lock_days"]
