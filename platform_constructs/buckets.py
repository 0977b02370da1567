"""PlatformBuckets: the datasets, checkpoints and logs buckets (and the access-log bucket they log to)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.spec.storage import BucketSpec, BucketsSpec


def lifecycle_rules(spec: BucketSpec, abort_incomplete_multipart_days: int) -> list[s3.LifecycleRule]:
    """Lifecycle from the spec: transitions, expiry, old versions, and incomplete multipart uploads removed."""
    transitions = []
    if spec.transition_to_infrequent_access_days:
        transitions.append(s3.Transition(storage_class=s3.StorageClass.INFREQUENT_ACCESS,
                                         transition_after=Duration.days(spec.transition_to_infrequent_access_days)))
    if spec.transition_to_glacier_ir_days:
        transitions.append(s3.Transition(storage_class=s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
                                         transition_after=Duration.days(spec.transition_to_glacier_ir_days)))
    rule = dict(
        id="spec",
        abort_incomplete_multipart_upload_after=Duration.days(abort_incomplete_multipart_days),
        transitions=transitions or None,
        expiration=Duration.days(spec.expire_days) if spec.expire_days else None,
    )
    if spec.versioned and spec.noncurrent_expire_days:
        rule["noncurrent_version_expiration"] = Duration.days(spec.noncurrent_expire_days)
    return [s3.LifecycleRule(**rule)]


class PlatformBuckets(Construct):
    """Three KMS-encrypted, TLS-only, private buckets: ``datasets``, ``checkpoints`` and ``logs``.

    Their S3 server access logs go to ``access_logs``, which uses S3-managed
    keys because S3 log delivery cannot write to SSE-KMS buckets. Buckets are
    retained when the stack is deleted: they hold the training data and results.
    """

    def __init__(self, scope: Construct, id: str, *, encryption_key: kms.IKey, spec: BucketsSpec = BucketsSpec(),
                 removal_policy: RemovalPolicy = RemovalPolicy.RETAIN) -> None:
        super().__init__(scope, id)
        common = dict(
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=removal_policy,
        )
        self.access_logs = s3.Bucket(
            self, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED, versioned=False,
            lifecycle_rules=lifecycle_rules(BucketSpec(expire_days=365), spec.abort_incomplete_multipart_days),
            **common,
        )

        def bucket(name: str, b: BucketSpec) -> s3.Bucket:
            lock = {}
            if b.object_lock_days:
                if not b.versioned:
                    raise ValueError(f"PlatformBuckets: spec.{name}.object_lock_days needs spec.{name}.versioned")
                mode = (s3.ObjectLockRetention.compliance if b.object_lock_mode == "compliance"
                        else s3.ObjectLockRetention.governance)
                lock = dict(object_lock_enabled=True, object_lock_default_retention=mode(Duration.days(b.object_lock_days)))
            return s3.Bucket(
                self, name.capitalize(),
                encryption=s3.BucketEncryption.KMS, encryption_key=encryption_key, bucket_key_enabled=True,
                versioned=b.versioned, **lock,
                lifecycle_rules=lifecycle_rules(b, spec.abort_incomplete_multipart_days),
                server_access_logs_bucket=self.access_logs, server_access_logs_prefix=f"{name}/",
                **common,
            )

        self.datasets = bucket("datasets", spec.datasets)
        self.checkpoints = bucket("checkpoints", spec.checkpoints)
        self.logs = bucket("logs", spec.logs)
