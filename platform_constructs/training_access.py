"""TrainingAccess: the IAM role training pods assume (EKS Pod Identity) to use the platform's buckets."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from openpod_core.labels import TRAINING_SERVICE_ACCOUNT as SERVICE_ACCOUNT
from platform_constructs.pod_identity import pod_identity_principal


class TrainingAccess(Construct):
    """A Pod Identity role: read ``datasets``, read/write ``checkpoints`` and ``logs`` (and their KMS key).

    ``allow(namespace, service_account)`` associates the role with a service
    account; pods running as it get the credentials, nodes keep none of them.
    The stack calls it for every team namespace, after the governance objects
    that create the namespace and its ``training`` service account.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, datasets: s3.IBucket,
                 checkpoints: s3.IBucket, logs: s3.IBucket) -> None:
        super().__init__(scope, id)
        self._cluster = cluster
        self.role = iam.Role(
            self, "Role", description="openpod training pods (EKS Pod Identity)",
            # Only this cluster's `training` service accounts (any team namespace) may assume it.
            assumed_by=pod_identity_principal(cluster, service_account=SERVICE_ACCOUNT),
        )
        datasets.grant_read(self.role)
        checkpoints.grant_read_write(self.role)
        checkpoints.grant_delete(self.role)  # checkpoint retention prunes old steps
        logs.grant_read_write(self.role)
        self._associations: dict[tuple[str, str], eks.CfnPodIdentityAssociation] = {}

    def allow(self, namespace: str, service_account: str = SERVICE_ACCOUNT) -> eks.CfnPodIdentityAssociation:
        if service_account != SERVICE_ACCOUNT:
            raise ValueError(f"TrainingAccess.allow: service_account must be {SERVICE_ACCOUNT!r} (the role's trust "
                             f"policy admits only it), got {service_account!r}")
        key = (namespace, service_account)
        if key not in self._associations:
            self._associations[key] = eks.CfnPodIdentityAssociation(
                self, f"{namespace}-{service_account}", cluster_name=self._cluster.cluster_name,
                namespace=namespace, service_account=service_account, role_arn=self.role.role_arn,
            )
        return self._associations[key]
