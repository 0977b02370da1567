"""TrainingAccess: the IAM role training pods assume (EKS Pod Identity) to use the platform's buckets."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from openpod_core.labels import TRAINING_SERVICE_ACCOUNT as SERVICE_ACCOUNT
from platform_constructs.pod_identity import pod_identity_principal


# The namespace of the pod that assumed the role: EKS Pod Identity sets it as a session tag
# (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html, checked 2026-11-23).
TEAM_TAG = "${aws:PrincipalTag/kubernetes-namespace}"


class TrainingAccess(Construct):
    """A Pod Identity role: read ``datasets``; read/write ``checkpoints`` and ``logs`` under ``<team>/`` only.

    One role serves every team, scoped per team by attribute-based access control: object
    and listing permissions name ``${aws:PrincipalTag/kubernetes-namespace}``, which Pod
    Identity sets to the pod's namespace (= its team), so a team's pod can neither read,
    overwrite nor delete another team's checkpoints or logs. Deletes create delete markers
    only (no ``s3:DeleteObjectVersion``; the buckets are versioned), and the KMS key is usable
    only through S3 (``kms:ViaService``).

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
        self._grant_read(datasets)
        for bucket in (checkpoints, logs):
            self._grant_team_prefix(bucket)
        self._associations: dict[tuple[str, str], eks.CfnPodIdentityAssociation] = {}

    def _grant_read(self, bucket: s3.IBucket) -> None:
        """What ``bucket.grant_read`` grants, but its key only through S3: grant_read also allows ``kms:Decrypt``
        on the key directly, for any ciphertext of the data key (FSx's and the other buckets' too)."""
        self.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject*", "s3:GetBucket*", "s3:List*"],
            resources=[bucket.bucket_arn, bucket.arn_for_objects("*")]))
        self._grant_key(bucket, ["kms:Decrypt"])

    def _grant_key(self, bucket: s3.IBucket, actions: list[str]) -> None:
        if bucket.encryption_key is not None:
            self.role.add_to_principal_policy(iam.PolicyStatement(
                actions=actions, resources=[bucket.encryption_key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{Stack.of(self).region}.amazonaws.com"}}))

    def _grant_team_prefix(self, bucket: s3.IBucket) -> None:
        team_objects = bucket.arn_for_objects(f"{TEAM_TAG}/*")
        self.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                               "s3:ListMultipartUploadParts"],
            resources=[team_objects]))
        self.role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{TEAM_TAG}/*", TEAM_TAG]}}))
        self._grant_key(bucket, ["kms:Decrypt", "kms:GenerateDataKey"])

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
