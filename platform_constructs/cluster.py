"""PlatformCluster: the EKS control plane, its access entries and its pinned managed add-ons."""

from __future__ import annotations

import hashlib
import json
from typing import Mapping, Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import custom_resources as cr
from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer
from constructs import Construct

from infra.spec.eks import AccessEntry
from openpod_core.cloudwatch import LOG_RETENTION_DAYS
from platform_constructs.pod_identity import pod_identity_principal

ACCESS_POLICIES: dict[str, str] = {
    "cluster-admin": "AmazonEKSClusterAdminPolicy",
    "admin": "AmazonEKSAdminPolicy",
    "edit": "AmazonEKSEditPolicy",
    "view": "AmazonEKSViewPolicy",
}

# Add-ons nodes need before they can become Ready (networking, identity) and
# add-ons that run as Deployments and so need a node first.
NETWORK_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
WORKLOAD_ADDONS = ("coredns", "aws-fsx-csi-driver")
REQUIRED_ADDONS = NETWORK_ADDONS + WORKLOAD_ADDONS


class PlatformCluster(Construct):
    """An EKS cluster (aws-eks-v2) at a pinned Kubernetes version.

    Private API endpoint unless ``endpoint_public``; all control-plane log
    types to a KMS-encrypted log group with a retention; Kubernetes secrets
    envelope-encrypted with ``secrets_key``; no default capacity and no
    self-managed bootstrap add-ons: every add-on is an EKS managed add-on at the
    version given in ``addon_versions``. ``network_addons`` must exist before
    nodes join; ``workload_addons`` need a node to run on (see ``PlatformStack``).

    ``access_entries`` grant EKS access policies; ``kubernetes_groups`` maps IAM
    principal ARNs to Kubernetes groups (RBAC binds the groups, e.g. a team's
    submitter role). EKS allows one access entry per principal, so a principal in
    both gets one entry: its access policy plus its groups; the others get an
    entry with the groups and no access policy.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        version: str,
        secrets_key: kms.IKey,
        addon_versions: Mapping[str, str],
        log_key: kms.IKey | None = None,
        log_retention_days: int = 90,
        endpoint_public: bool = False,
        endpoint_public_cidrs: Sequence[str] = (),
        access_entries: Sequence[AccessEntry] = (),
        kubernetes_groups: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(scope, id)
        if endpoint_public and not endpoint_public_cidrs:
            raise ValueError("PlatformCluster: endpoint_public needs endpoint_public_cidrs (the CIDRs allowed "
                             "to reach the public endpoint; 0.0.0.0/0 only when given explicitly)")
        missing = [a for a in REQUIRED_ADDONS if a not in addon_versions]
        if missing:
            raise ValueError(f"PlatformCluster: addon_versions lacks a pinned version for {', '.join(missing)}")
        if not subnets:
            raise ValueError("PlatformCluster: subnets must not be empty")
        if log_retention_days not in LOG_RETENTION_DAYS:
            raise ValueError(f"PlatformCluster: log_retention_days must be one of CloudWatch Logs' values "
                             f"{', '.join(map(str, LOG_RETENTION_DAYS))}, got {log_retention_days}")
        groups = {arn: list(g) for arn, g in (kubernetes_groups or {}).items()}
        for arn, g in groups.items():
            if not g or any(not name or name.startswith("system:") for name in g):
                raise ValueError(f"PlatformCluster: kubernetes_groups[{arn!r}] must list non-empty group names "
                                 f"outside the reserved system: prefix, got {g}")
        principals = [e.principal_arn for e in access_entries]
        for arn in sorted({a for a in principals if principals.count(a) > 1}):
            raise ValueError(f"PlatformCluster: access_entries lists {arn} more than once; EKS allows one access "
                             "entry per principal")

        # EKS writes control-plane logs to /aws/eks/<name>/cluster and creates that group itself when it is
        # missing (facts eks.control-plane-logs.*). A CloudFormation log group of that fixed name would outlive
        # a destroy (retained) and refuse the next deploy of the same name, so the group is adopted instead:
        # created when missing, its retention and key set on every deploy, left in place on delete.
        self.log_group_name = f"/aws/eks/{cluster_name}/cluster"
        self.log_group = ControlPlaneLogGroup(self, "ControlPlaneLogs", log_group_name=self.log_group_name,
                                              retention_days=log_retention_days, key=log_key)
        selection = [ec2.SubnetSelection(subnets=list(subnets))]
        self.cluster = eks.Cluster(
            self, "Cluster",
            cluster_name=cluster_name,
            version=eks.KubernetesVersion.of(version),
            vpc=vpc,
            vpc_subnets=selection,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            bootstrap_self_managed_addons=False,
            endpoint_access=(eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*endpoint_public_cidrs)
                             if endpoint_public else eks.EndpointAccess.PRIVATE),
            cluster_logging=[
                eks.ClusterLoggingTypes.API, eks.ClusterLoggingTypes.AUDIT, eks.ClusterLoggingTypes.AUTHENTICATOR,
                eks.ClusterLoggingTypes.CONTROLLER_MANAGER, eks.ClusterLoggingTypes.SCHEDULER,
            ],
            secrets_encryption_key=secrets_key,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=KubectlV34Layer(self, "KubectlLayer"),
                private_subnets=list(subnets),
            ),
        )
        self.cluster.node.add_dependency(self.log_group)  # the group exists with its key before EKS writes

        seen: set[str] = set()
        for i, entry in enumerate(access_entries):
            scope_type = eks.AccessScopeType.NAMESPACE if entry.namespaces else eks.AccessScopeType.CLUSTER
            access = eks.AccessEntry(
                self, f"Access{i}",
                cluster=self.cluster,
                principal=entry.principal_arn,
                access_policies=[eks.AccessPolicy.from_access_policy_name(
                    ACCESS_POLICIES[entry.access], access_scope_type=scope_type,
                    namespaces=list(entry.namespaces) or None,
                )],
            )
            seen.add(entry.principal_arn)
            if entry.principal_arn in groups:
                access.node.default_child.kubernetes_groups = groups[entry.principal_arn]
        # Group-only entries: Kubernetes RBAC authorizes them, no EKS access policy. The id hashes
        # the ARN, so reordering the spec never replaces an entry (a replacement would collide
        # with the old entry of the same principal).
        self.group_entries: dict[str, eks.CfnAccessEntry] = {}
        for arn, g in groups.items():
            if arn in seen:
                continue
            self.group_entries[arn] = eks.CfnAccessEntry(
                self, f"Member{hashlib.sha256(arn.encode()).hexdigest()[:12]}",
                cluster_name=self.cluster.cluster_name, principal_arn=arn, kubernetes_groups=g, type="STANDARD",
            )

        self.addons: dict[str, eks.IAddon] = {}
        for name in NETWORK_ADDONS + WORKLOAD_ADDONS:
            if name == "eks-pod-identity-agent":
                # The cluster owns this one (service accounts with Pod Identity
                # reuse it); pin its version on the generated resource.
                addon = self.cluster.eks_pod_identity_agent
                addon.node.default_child.addon_version = addon_versions[name]
            else:
                addon = eks.Addon(self, _addon_id(name), cluster=self.cluster, addon_name=name,
                                  addon_version=addon_versions[name], preserve_on_delete=False)
            self.addons[name] = addon

        # The VPC CNI (service account kube-system/aws-node) gets its own Pod Identity role, so the
        # node role - which any process on a node can use - keeps no ENI/IP permissions.
        # Source: https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html ("We recommend
        # that you assign it to a separate role"; the add-on supports EKS Pod Identity), checked 2026-11-23.
        self.cni_role = iam.Role(
            self, "VpcCniRole", description="openpod VPC CNI (kube-system/aws-node, EKS Pod Identity)",
            assumed_by=pod_identity_principal(self.cluster, namespace="kube-system", service_account="aws-node"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonEKS_CNI_Policy")],
        )
        cni = self.addons["vpc-cni"].node.default_child
        # The network-policy agent enforces the team namespaces' NetworkPolicies (infra/governance/network.py);
        # off by default in the add-on. Key and value: https://docs.aws.amazon.com/eks/latest/userguide/
        # cni-network-policy-configure.html (facts register: eks.vpc-cni.network-policy), checked 2026-11-23.
        cni.configuration_values = json.dumps(VPC_CNI_CONFIGURATION, sort_keys=True)
        cni.pod_identity_associations = [eks.CfnAddon.PodIdentityAssociationProperty(
            role_arn=self.cni_role.role_arn, service_account="aws-node")]
        # The association needs the Pod Identity agent to hand out credentials.
        self.addons["vpc-cni"].node.add_dependency(self.addons["eks-pod-identity-agent"])

    @property
    def network_addons(self) -> list[eks.IAddon]:
        return [self.addons[n] for n in NETWORK_ADDONS]

    @property
    def workload_addons(self) -> list[eks.IAddon]:
        return [self.addons[n] for n in WORKLOAD_ADDONS]


class ControlPlaneLogGroup(Construct):
    """The EKS control-plane log group, adopted rather than owned: no CloudFormation resource has its fixed name.

    Three SDK calls (``AwsCustomResource``): ``CreateLogGroup`` (an existing group, e.g. one kept from an earlier
    stack of the same cluster name, is fine: ``ResourceAlreadyExistsException`` is ignored), then
    ``PutRetentionPolicy`` and, with ``key``, ``AssociateKmsKey`` on every deploy. Deleting the stack leaves the
    group and its logs (the audit trail) in place; a later deploy of the same name adopts it.
    """

    def __init__(self, scope: Construct, id: str, *, log_group_name: str, retention_days: int,
                 key: kms.IKey | None = None) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        # The log group's ARN both with and without the ':*' suffix CloudWatch Logs appends in its own ARNs.
        arns = [stack.format_arn(service="logs", resource="log-group", resource_name=name,
                                 arn_format=ArnFormat.COLON_RESOURCE_NAME)
                for name in (log_group_name, f"{log_group_name}:*")]
        policy = cr.AwsCustomResourcePolicy.from_sdk_calls(resources=arns)
        physical = cr.PhysicalResourceId.of(log_group_name)
        create = {"logGroupName": log_group_name, **({"kmsKeyId": key.key_arn} if key is not None else {})}
        create_call = cr.AwsSdkCall(service="CloudWatchLogs", action="createLogGroup", parameters=create,
                                    physical_resource_id=physical,
                                    ignore_error_codes_matching="ResourceAlreadyExistsException")
        # on update too: a new cluster name is a new group, which must exist before the retention call
        self.create = cr.AwsCustomResource(self, "Create", policy=policy, install_latest_aws_sdk=False,
                                           on_create=create_call, on_update=create_call)
        retention_call = cr.AwsSdkCall(service="CloudWatchLogs", action="putRetentionPolicy",
                                       parameters={"logGroupName": log_group_name, "retentionInDays": retention_days},
                                       physical_resource_id=physical)
        self.retention = cr.AwsCustomResource(self, "Retention", policy=policy, install_latest_aws_sdk=False,
                                              on_create=retention_call, on_update=retention_call)
        self.retention.node.add_dependency(self.create)
        self.key_association: cr.AwsCustomResource | None = None
        if key is not None:
            key_call = cr.AwsSdkCall(service="CloudWatchLogs", action="associateKmsKey",
                                     parameters={"logGroupName": log_group_name, "kmsKeyId": key.key_arn},
                                     physical_resource_id=physical)
            self.key_association = cr.AwsCustomResource(self, "Key", policy=policy, install_latest_aws_sdk=False,
                                                         on_create=key_call, on_update=key_call)
            self.key_association.node.add_dependency(self.create)


def _addon_id(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("-")) + "Addon"
