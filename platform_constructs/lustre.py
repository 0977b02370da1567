"""LustreStorage: FSx for Lustre PERSISTENT_2 linked to the datasets bucket, mountable from pods."""

from __future__ import annotations

from typing import Literal

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from constructs import Construct

THROUGHPUTS = (125, 250, 500, 1000)
CSI_DRIVER = "fsx.csi.aws.com"
CLAIM_NAME = "fsx-lustre"


class LustreStorage(Construct):
    """A PERSISTENT_2 file system in one subnet with an S3 data repository association.

    Files written under ``data_repository_path`` are exported to the bucket and
    new/changed/deleted objects in the bucket are imported automatically.
    ``add_volume(cluster, name=..., namespace=..., claim=...)`` creates a static
    PersistentVolume reserved for one namespace's claim; pods mount the file
    system through that claim.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        bucket: s3.IBucket,
        encryption_key: kms.IKey,
        storage_capacity_gib: int = 1200,
        throughput_per_tib: int = 250,
        compression: Literal["LZ4", "NONE"] = "LZ4",
        metadata_iops: int | None = None,
        data_repository_path: str = "/datasets",
        mount_path: str = "/fsx",
        automatic_backup_retention_days: int = 7,
        export_deletions: bool = False,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        if storage_capacity_gib != 1200 and storage_capacity_gib % 2400:
            raise ValueError(f"LustreStorage: storage_capacity_gib must be 1200 or a multiple of 2400, "
                             f"got {storage_capacity_gib}")
        if throughput_per_tib not in THROUGHPUTS:
            raise ValueError(f"LustreStorage: throughput_per_tib must be one of {THROUGHPUTS}, got {throughput_per_tib}")
        if compression not in ("LZ4", "NONE"):
            raise ValueError(f"LustreStorage: compression must be LZ4 or NONE, got {compression!r}")
        if not 0 <= automatic_backup_retention_days <= 90:
            raise ValueError(f"LustreStorage: automatic_backup_retention_days must be 0-90, "
                             f"got {automatic_backup_retention_days}")
        self.mount_path = mount_path
        self.storage_capacity_gib = storage_capacity_gib
        self._pvs: dict[str, eks.KubernetesManifest] = {}

        metadata = fsx.CfnFileSystem.MetadataConfigurationProperty(
            mode="USER_PROVISIONED" if metadata_iops else "AUTOMATIC", iops=metadata_iops,
        )
        self.file_system = fsx.CfnFileSystem(
            self, "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version="2.15",
            storage_type="SSD",
            storage_capacity=storage_capacity_gib,
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[security_group.security_group_id],
            kms_key_id=encryption_key.key_id,
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type="PERSISTENT_2",
                per_unit_storage_throughput=throughput_per_tib,
                data_compression_type=compression,
                metadata_configuration=metadata,
                automatic_backup_retention_days=automatic_backup_retention_days,
                copy_tags_to_backups=True,
                log_configuration=fsx.CfnFileSystem.LogConfigurationProperty(level="WARN_ERROR"),
                weekly_maintenance_start_time="7:03:00",
            ),
        )
        self.file_system.apply_removal_policy(removal_policy)

        self.data_repository_association = fsx.CfnDataRepositoryAssociation(
            self, "DataRepository",
            file_system_id=self.file_system.ref,
            file_system_path=data_repository_path,
            data_repository_path=f"s3://{bucket.bucket_name}/",
            batch_import_meta_data_on_create=True,
            imported_file_chunk_size=1024,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=["NEW", "CHANGED", "DELETED"]),
                # Deletions are exported only when the spec asks: otherwise `rm -rf` on FSx
                # leaves the (versioned) datasets bucket untouched.
                auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(
                    events=["NEW", "CHANGED", "DELETED"] if export_deletions else ["NEW", "CHANGED"]),
            ),
        )
        # FSx reaches the bucket through its per-file-system service-linked role;
        # the bucket key must let that role use it (through S3 only).
        encryption_key.add_to_resource_policy(iam.PolicyStatement(
            sid="FsxDataRepositoryAccess",
            principals=[iam.AnyPrincipal()],
            actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*", "kms:DescribeKey"],
            resources=["*"],
            conditions={
                "StringEquals": {"kms:CallerAccount": Aws.ACCOUNT_ID,
                                 "kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"},
                "ArnLike": {"aws:PrincipalArn": f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/aws-service-role/"
                                                "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"},
            },
        ))

    @property
    def file_system_id(self) -> str:
        return self.file_system.ref

    @property
    def dns_name(self) -> str:
        return self.file_system.attr_dns_name

    @property
    def mount_name(self) -> str:
        return self.file_system.attr_lustre_mount_name

    def add_volume(self, cluster: eks.ICluster, *, name: str, namespace: str,
                   claim: str = CLAIM_NAME) -> eks.KubernetesManifest:
        """A static ReadWriteMany PersistentVolume ``name`` of this file system, reserved for the claim
        ``namespace/claim`` (its ``claimRef``).

        The claim itself is not created here: whoever owns the namespace creates it with
        ``storageClassName: ""`` and ``volumeName: name`` (the governance objects do, per team).
        With no storage class on either side, binding is static only: no provisioner is ever asked
        for a new file system. Every volume points at the same file system.
        """
        if not name or not namespace or not claim:
            raise ValueError(f"LustreStorage: add_volume needs a name, namespace and claim, got "
                             f"name={name!r} namespace={namespace!r} claim={claim!r}")
        if name in self._pvs:
            raise ValueError(f"LustreStorage: a volume named {name!r} exists already (PersistentVolume names "
                             "are cluster-wide)")
        manifest = eks.KubernetesManifest(
            self, f"Volume-{name}", cluster=cluster, overwrite=True,
            manifest=[{
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "openpod"}},
                "spec": {
                    "capacity": {"storage": f"{self.storage_capacity_gib}Gi"},
                    "volumeMode": "Filesystem",
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "mountOptions": ["flock", "noatime"],
                    "claimRef": {"namespace": namespace, "name": claim},
                    "csi": {
                        "driver": CSI_DRIVER,
                        "volumeHandle": self.file_system_id,
                        "volumeAttributes": {"dnsname": self.dns_name, "mountname": self.mount_name},
                    },
                },
            }],
        )
        self._pvs[name] = manifest
        return manifest

    @property
    def volumes(self) -> dict[str, eks.KubernetesManifest]:
        """PersistentVolume name -> the manifest that applies it."""
        return dict(self._pvs)
