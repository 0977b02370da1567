"""NodeHealthAgent: the detector DaemonSet, remediation controller, RBAC and IAM. (Owned by the node-agent work.)

Builds the agent image (one per CPU architecture the accelerated/EFA groups
use), applies the manifests of :mod:`node_agent.deploy` to the cluster, and
gives the controller's ServiceAccount an IAM role through EKS Pod Identity
that may only mark instances of the platform's own Auto Scaling groups unhealthy
and reboot instances of those groups. The groups are named by EKS when it creates
a managed node group; a custom resource reads each name (``eks:DescribeNodegroup``)
and the policy names them: ``SetInstanceHealth`` by the group's ARN, ``RebootInstances``
by the ``aws:autoscaling:groupName`` tag that only Auto Scaling sets on its instances
(facts ``iam.autoscaling.set-instance-health``, ``iam.ec2.reboot-instances``,
``autoscaling.group-name-tag``). Both keep the ``eks:cluster-name`` tag condition too.
"""

from __future__ import annotations

import re
from typing import Sequence

from aws_cdk import Acknowledgment, ArnFormat, IgnoreMode, Stack, Token, Validations
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.spec.cluster import ClusterSpec
from node_agent import deploy
from platform_constructs.pod_identity import pod_identity_principal

CLUSTER_TAG = "eks:cluster-name"
_ASG_NAME = "nodegroup.resources.autoScalingGroups.0.name"   # DescribeNodegroup's answer
_SDK_SINGLETON = "AWS679f53fac002430cb0da5b7982bd2287"   # aws-cdk-lib's AwsCustomResource SingletonFunction id

# Only what the image needs goes into the build context (whitelist, like the root .dockerignore).
_CONTEXT = ["*", "!pyproject.toml", "!README.md", "!infra", "!node_agent", "**/__pycache__", "**/*.pyc"]
_PLATFORMS = {"amd64": ecr_assets.Platform.LINUX_AMD64, "arm64": ecr_assets.Platform.LINUX_ARM64}


class NodeHealthAgent(Construct):
    """Deploys the node agent built from ``image_directory`` (the repository root) onto ``cluster``; the
    controller may replace and reboot the instances of ``nodegroups`` only."""

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: ClusterSpec,
                 image_directory: str, nodegroups: Sequence[eks.Nodegroup] = ()) -> None:
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
        self.group_names = [self._group_name(cluster, ng) for ng in nodegroups]
        self._grant_remediation(cluster)
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self, "ControllerPodIdentity", cluster_name=cluster.cluster_name, namespace=deploy.NAMESPACE,
            service_account=deploy.CONTROLLER, role_arn=self.role.role_arn)

        objects = deploy.manifests(spec, {a: img.image_uri for a, img in self.images.items()})
        self.manifest = cluster.add_manifest("Manifests", *objects)

    def _group_name(self, cluster: eks.ICluster, nodegroup: eks.Nodegroup) -> str:
        """The name EKS gave the Auto Scaling group of ``nodegroup``, read at deploy time (again whenever the node
        group is replaced: its name is a parameter of the call)."""
        call = cr.AwsSdkCall(
            service="EKS", action="describeNodegroup",
            # the node group's NodegroupName attribute: its Ref is the Id, "<cluster>/<nodegroup>"
            parameters={"clusterName": cluster.cluster_name,
                        "nodegroupName": nodegroup.node.default_child.attr_nodegroup_name},
            physical_resource_id=cr.PhysicalResourceId.from_response(_ASG_NAME), output_paths=[_ASG_NAME])
        lookup = cr.AwsCustomResource(
            self, "AutoScalingGroupOf" + re.sub(r"[^A-Za-z0-9]", "", nodegroup.node.path.partition("/")[2]),
            on_create=call, on_update=call,
            install_latest_aws_sdk=False,
            policy=cr.AwsCustomResourcePolicy.from_statements([iam.PolicyStatement(
                actions=["eks:DescribeNodegroup"], resources=[nodegroup.nodegroup_arn])]))
        return lookup.get_response_field(_ASG_NAME)

    def _grant_remediation(self, cluster: eks.ICluster) -> None:
        stack = Stack.of(self)
        on_cluster = {f"aws:ResourceTag/{CLUSTER_TAG}": cluster.cluster_name}
        if not self.group_names:
            return
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="ReplaceClusterInstances", actions=["autoscaling:SetInstanceHealth"],
            # The group ARN's id part is EKS's; the name is unique in the account and Region.
            resources=[stack.format_arn(service="autoscaling", resource="autoScalingGroup",
                                        resource_name=f"*:autoScalingGroupName/{name}",
                                        arn_format=ArnFormat.COLON_RESOURCE_NAME) for name in self.group_names],
            conditions={"StringEquals": on_cluster}))
        self.role.add_to_principal_policy(iam.PolicyStatement(
            sid="RebootClusterInstances", actions=["ec2:RebootInstances"],
            resources=[stack.format_arn(service="ec2", resource="instance", resource_name="*")],
            # eks:cluster-name can be set by anyone with ec2:CreateTags; aws:autoscaling:groupName only by
            # Auto Scaling (the aws: prefix is reserved): only instances of the platform's own groups qualify.
            conditions={"StringEquals": {**on_cluster,
                                         "aws:ResourceTag/aws:autoscaling:groupName": self.group_names}}))
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
        why = ("SetInstanceHealth names the platform's own Auto Scaling groups (the ARN's group id is EKS's: '*'); "
               "RebootInstances needs the AWS-reserved aws:autoscaling:groupName tag of one of those groups (an "
               "instance id is not known in advance: instance/*); both also need this cluster's eks:cluster-name "
               "tag; Describe* calls cannot be scoped to resources. Safe because the worst a holder can do is "
               "reboot or mark unhealthy the platform's own instances, and only the controller's service account "
               "on this cluster can assume the role.")
        Validations.of(self.role).acknowledge(Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=why))
        Validations.of(self.role).acknowledge(Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{arn.format('ec2', 'instance/*')}]", reason=why))
        lookup_fn = stack.node.try_find_child(_SDK_SINGLETON)   # AwsCustomResource's one function per stack
        if lookup_fn is not None:
            Validations.of(lookup_fn).acknowledge(Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                   "AWSLambdaBasicExecutionRole]",
                reason="aws-cdk-lib's AwsCustomResource function (it reads the node groups' Auto Scaling group "
                       "names) carries the AWS-managed basic execution policy: its own logs. Safe because only that "
                       "Lambda's service role uses it; its other permission is eks:DescribeNodegroup on the "
                       "platform's node groups."))
        for name in self.group_names:
            Validations.of(self.role).acknowledge(Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{arn.format('autoscaling', 'autoScalingGroup:*:autoScalingGroupName/')}"
                   f"{_nag_token(stack, name)}]", reason=why))


def _nag_token(stack: Stack, value: str) -> str:
    """How cdk-nag writes a token in a finding id: ``<LogicalId.Attribute>`` of the Fn::GetAtt it resolves to."""
    resolved = stack.resolve(value)
    logical, attribute = resolved["Fn::GetAtt"]
    return f"<{logical}.{attribute}>"
