"""Trust for EKS Pod Identity roles: only this account's cluster, only one namespace/service account.

Without conditions a role trusting ``pods.eks.amazonaws.com`` can be bound to any
service account by anyone in the account who may create a Pod Identity association,
on any cluster. The conditions below pin it to this cluster (``aws:SourceAccount``,
``aws:SourceArn``) and to the session tags Pod Identity sets for the pod's namespace
and service account. Source: https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html
("Setting Conditions"; session tags listed in pod-id-abac.html#pod-id-abac-tags), checked 2026-11-23.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"


def pod_identity_principal(cluster: eks.ICluster, *, namespace: str | None = None,
                           service_account: str | None = None) -> iam.IPrincipal:
    """The Pod Identity service principal, restricted to ``cluster`` (and a namespace / service account)."""
    equals: dict[str, str] = {"aws:SourceAccount": Stack.of(cluster).account}
    if namespace is not None:
        equals["aws:RequestTag/kubernetes-namespace"] = namespace
    if service_account is not None:
        equals["aws:RequestTag/kubernetes-service-account"] = service_account
    return iam.ServicePrincipal(POD_IDENTITY_SERVICE).with_conditions({
        "StringEquals": equals,
        "ArnEquals": {"aws:SourceArn": cluster.cluster_arn},
    }).with_session_tags()
