"""NodeHealthAgent: the detector DaemonSet, remediation controller, RBAC and IAM. (Owned by the node-agent work.)

Builds the agent image (one per CPU architecture the accelerated/EFA groups
use), applies the manifests of :mod:`node_agent.deploy` to the cluster, and
gives the controller's ServiceAccount an IAM role through EKS Pod Identity
that may only reboot instances and mark Auto Scaling instances unhealthy when
they carry this cluster's ``eks:cluster-name`` tag (EKS managed node groups
tag their Auto Scaling groups and propagate it to instances).
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, IgnoreMode, Stack, Token, Validations
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.spec.cluster import ClusterSpec
from node_agent import deploy
from platform_constructs.pod_identity import pod_identity_principal

CLUSTER_TAG = "eks:cluster-name"

# Only what the image needs goes into the build context (whitelist, like the root .dockerignore).
_CONTEXT = ["*", "!pyproject.toml", "!README.md", "!infra", "!node_agent", "**/__pycache__", "**/*.pyc"]
_PLATFORMS = {"amd64": ecr_assets.Platform.LINUX_AMD64, "arm64": ecr_assets.Platform.LINUX_ARM64}


class NodeHealthAgent(Construct):
    """Deploys the node agent built from ``image_directory`` (the repository root) onto ``cluster``."""

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: ClusterSpec,
                 image_directory: str) -> None:
        super().__init__(scope, id)
        if not image_directory:
            raise ValueError("NodeHealthAgent: image_directory must be the repository root holding "
                             "node_agent/Dockerfile")
        arches = sorted(set(deploy.detector_arches(spec)) | {"amd64"})  # amd64: the controller's image
        self.images: dict[str, ecr_assets.DockerImageAsset] = {
            arch: ecr_assets.DockerImageAsset(
                self, f"Image{arch.capitalize()}", directory=image_directory, file="node_agent/Dockerfile",
                platform=_PLATFORMS[arch], exclude=_CONTEXT, ignore_mode=IgnoreMode.DOCKER,
                display_name=f"openpod node agent ({arch})")
            for arch in arches
        }

        # The controller's IAM role, bound to its ServiceAccount by EKS Pod Identity. The association is
        # declared directly (not through eks.ServiceAccount) so this construct does not add a second,
        # unpinned eks-pod-identity-agent add-on next to the one the cluster spec pins.
        self.role = iam.Role(
            self, "ControllerRole",
            # Only the controller's own service account on this cluster may assume it.
            assumed_by=pod_identity_principal(cluster, namespace=deploy.NAMESPACE,
                                              service_account=deploy.CONTROLLER),
            description="openpod remediation controller: reboot / replace this cluster's nodes")
        self._grant_remediation(cluster)
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self, "ControllerPodIdentity", cluster_name=cluster.cluster_name, namespace=deploy.NAMESPACE,
            service_account=deploy.CONTROLLER, role_arn=self.role.role_arn)

        objects = deploy.manifests(spec, {a: img.image_uri for a, img in self.images.items()})
        self.manifest = cluster.add_manifest("Manifests", *objects)

    def _grant_remediation(self, cluster: eks.ICluster) -> None:
        stack = Stack.of(self)
        on_cluster = {"StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": cluster.cluster_name}}
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="ReplaceClusterInstances", actions=["autoscaling:SetInstanceHealth"],
            resources=[stack.format_arn(service="autoscaling", resource="autoScalingGroup",
                                        resource_name="*:autoScalingGroupName/*",
                                        arn_format=ArnFormat.COLON_RESOURCE_NAME)],
            conditions=on_cluster))
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="RebootClusterInstances", actions=["ec2:RebootInstances"],
            resources=[stack.format_arn(service="ec2", resource="instance", resource_name="*")],
            # eks:cluster-name can be set by anyone with ec2:CreateTags; aws:autoscaling:groupName only by
            # Auto Scaling (the aws: prefix is reserved), so only group members of this cluster qualify.
            conditions={**on_cluster, "Null": {"aws:ResourceTag/aws:autoscaling:groupName": "false"}}))
        # Describe calls support no resource scoping; read-only. DescribeInstanceTopology: the UltraServer
        # labels (node_agent/topology.py).
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="DescribeInstances",
            actions=["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
                     "ec2:DescribeInstances", "ec2:DescribeInstanceTopology"],
            resources=["*"]))
        # Acknowledged for cdk-nag (v3 reads CDK's native acknowledgements, one per finding).
        region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
        account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
        partition = "<AWS::Partition>" if Token.is_unresolved(stack.partition) else stack.partition
        arn = f"arn:{partition}:{{}}:{region}:{account}:{{}}"
        why = ("RebootInstances/SetInstanceHealth are limited to this cluster's instances and groups by the "
               "eks:cluster-name tag condition (reboot also requires the AWS-reserved aws:autoscaling:groupName "
               "tag); Describe* calls cannot be scoped to resources. Safe because the worst a holder can do is "
               "reboot or mark unhealthy this cluster's Auto Scaling instances, and only the controller's "
               "service account on this cluster can assume the role.")
        for resource in (arn.format("autoscaling", "autoScalingGroup:*:autoScalingGroupName/*"),
                         arn.format("ec2", "instance/*"), "*"):
            Validations.of(self.role).acknowledge(Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{resource}]",
                                                                 reason=why))
