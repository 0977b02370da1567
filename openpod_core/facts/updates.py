"""What CloudFormation and the services do on an update (replacements, in-place limits), and the sizes
that break a synthesis or a deploy (``infra/deploy/plan_rules.py``, ``infra/spec/warnings.py``)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    # ------------------------------------------------------------------ updates: what CloudFormation and the services do
    Fact(
        "cfn.replacement-creates-first", "on a replacement CloudFormation usually creates the new resource first, "
        "repoints references to it, then deletes the old one",
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks-update-behaviors.html",
        "2026-11-25", "why a replacement collides with the live resource on a fixed name or an address range",
    ),
    Fact(
        "cfn.custom-name-replacement", "a resource given a custom name cannot be replaced: an update that requires "
        "replacement fails unless the name changes too",
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html",
        "2026-11-25", "e.g. an EKS node group replaced under its old NodegroupName: EKS answers that it already "
        "exists (aws/aws-cdk#26931); node groups therefore carry no fixed name (platform_constructs/instance_group.py)",
    ),
    Fact(
        "cfn.fsx.lustre-deployment-type", "AWS::FSx::FileSystem LustreConfiguration.DeploymentType: Update requires "
        "Replacement",
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-fsx-filesystem-"
        "lustreconfiguration.html", "2026-11-25",
        "the provider schema cfn-lint ships does not list it in createOnlyProperties; openpod plan adds it "
        "(infra/deploy/plan_rules.py)",
    ),
    Fact(
        "cfn.kms.key-spec", "changing KeySpec or KeyUsage of an existing AWS::KMS::Key fails the update, whatever "
        "its UpdateReplacePolicy",
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-kms-key.html",
        "2026-11-25", "KMS fixes a key's spec at creation "
        "(https://docs.aws.amazon.com/kms/latest/developerguide/symm-asymm-choose-key-spec.html)",
    ),
    Fact(
        "fsx.lustre.storage-capacity-increase-only", "an FSx for Lustre file system's storage capacity can be "
        "increased, never decreased",
        "https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-storage-capacity.html", "2026-11-25",
        "a smaller fsx.storage_capacity_gib makes the update fail",
    ),
    Fact(
        "eks.cluster.subnet-update", "a cluster's subnets can be updated in place, but the new subnets must be in "
        "the same VPC and the same set of Availability Zones as those given at creation",
        "https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html", "2026-11-25",
        "so a new VPC (a vpc_cidr change) or another set of AZs for the cluster fails; aws/containers-roadmap#2330 "
        "asks for adding AZs",
    ),
    Fact(
        "eks.cluster.version-steps", "EKS upgrades a cluster one minor Kubernetes version at a time and cannot "
        "downgrade it",
        "https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html", "2026-11-25",
    ),
    Fact(
        "ec2.subnet.cidr-conflict", "a new subnet's CIDR block must not overlap another subnet of the VPC "
        "(InvalidSubnet.Conflict)",
        "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html", "2026-11-25",
        "a re-addressed subnet is created before the old one is deleted (fact cfn.replacement-creates-first), so it "
        "conflicts with the live ranges",
    ),
    Fact(
        "eks.nodegroup.version-update-alone", "an AWS::EKS::Nodegroup Version (or ReleaseVersion) update cannot be "
        "combined with other updates of the node group, a new launch template version included",
        "https://github.com/aws/containers-roadmap/issues/1258", "2026-11-25",
        "the CloudFormation error quoted there: 'Version and ReleaseVersion updates cannot be combined with other "
        "updates'; eksctl-io/eksctl#2565 hit it with a launch template that changed in the same deploy",
    ),
    Fact(
        "eks.nodegroup.update-strategy", "UpdateConfig.UpdateStrategy DEFAULT launches new nodes before terminating "
        "old ones; MINIMAL terminates old nodes first, for capacity-constrained groups such as accelerators",
        "https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html", "2026-11-25",
        "a full reservation or a capacity block has no room for DEFAULT's surge: the platform sets MINIMAL on them",
    ),
    Fact(
        "fsx.lustre.client-al2023", "Amazon Linux 2023 installs the FSx for Lustre client as the lustre-client "
        "package (dnf install -y lustre-client)",
        "https://docs.aws.amazon.com/fsx/latest/LustreGuide/install-lustre-client.html", "2026-11-25",
        "the EKS-optimized AL2023 AMIs ship no Lustre client; awslabs/amazon-eks-ami#2696 installs it in user "
        "data, as platform_constructs/instance_group.py does on every node",
    ),
    Fact(
        "lustre.fs-type", "the Lustre client registers the file system type \"lustre\" (listed in "
        "/proc/filesystems once loaded) with MODULE_ALIAS_FS(\"lustre\"), so a lustre mount loads the module",
        "https://github.com/lustre/lustre-release/blob/master/lustre/llite/super25.c", "2026-11-25",
        "lustre_fs_type .name = \"lustre\"; read in a copy of llite/super25.c found by text search, tag not "
        "recorded; node_agent/lustre_client.py checks /proc/filesystems, then the module file",
    ),
    Fact(
        "eks.cluster.refused-zone-ids", "EKS places no cluster control plane in AZ IDs use1-az3 (us-east-1), "
        "usw1-az2 (us-west-1) and cac1-az3 (ca-central-1): cluster subnets may not be there",
        "https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html#network-requirements-subnets",
        "2026-11-25", "AZ names map to IDs per account; openpod preflight asks describe-availability-zones "
        "(infra/deploy/preflight.py EKS_REFUSED_ZONE_IDS)",
    ),
    Fact(
        "eks.unique-per-cluster", "EKS keeps one access entry per IAM principal, one add-on per name and one Pod "
        "Identity association per service account in a cluster; creating a second fails (ResourceInUseException)",
        "https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html", "2026-11-25",
        "likewise API_CreateAddon.html and API_CreatePodIdentityAssociation.html (ResourceInUseException); "
        "platform_constructs/cluster.py names group-only entries by a hash of the ARN for this reason",
    ),
    Fact(
        "fsx.lustre.persistent2-throughputs", "125, 250, 500, 1000",
        "https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystemLustreConfiguration.html",
        "2026-11-25", "PerUnitStorageThroughput (MB/s/TiB) of PERSISTENT_2 SSD file systems; storage.fsx."
        "throughput_per_tib and platform_constructs/lustre.py THROUGHPUTS take exactly these; it can be raised "
        "or lowered in place (API_UpdateFileSystemLustreConfiguration)",
    ),
    Fact(
        "fsx.lustre.file-system-type-version", "2.15",
        "https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html#FSx-CreateFileSystem-"
        "request-FileSystemTypeVersion", "2026-11-25",
        "valid 2.10, 2.12, 2.15: 2.12 is supported by every Lustre deployment type except PERSISTENT_2 with a "
        "metadata configuration, 2.15 by all and recommended for new file systems (read as the SDK reference "
        "generated from the API model, https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/fsx/aws.sdk.kotlin."
        "services.fsx.model/-create-file-system-request/file-system-type-version.html). The platform's "
        "PERSISTENT_2 file system always has a metadata configuration (storage.fsx.metadata_iops or AUTOMATIC), "
        "so platform_constructs/lustre.py sets 2.15; an update may only raise the version",
    ),
    Fact(
        "fsx.lustre.metadata-iops", "1500, 3000, 6000, 12000 and multiples of 12000 up to 192000",
        "https://docs.aws.amazon.com/fsx/latest/APIReference/API_FileSystemLustreMetadataConfiguration.html",
        "2026-11-25", "USER_PROVISIONED metadata IOPS of SSD file systems (storage.fsx.metadata_iops)",
    ),
    Fact(
        "fsx.lustre.metadata-iops-increase-only", "an update's metadata IOPS must be greater than or equal to the "
        "IOPS provisioned now",
        "https://docs.aws.amazon.com/fsx/latest/APIReference/API_UpdateFileSystemLustreMetadataConfiguration.html",
        "2026-11-25", "so lowering storage.fsx.metadata_iops fails the update (openpod plan: will fail)",
    ),
    # ------------------------------------------------------------------ sizes that break synthesis or a deploy
    Fact(
        "cloudformation.max-resources-per-template", "500",
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html", "2026-11-25",
        "Resources: the maximum number of resources declared in one template; a spec whose stack would pass it "
        "gets a warning from openpod validate (infra/spec/warnings.py)",
    ),
    Fact(
        "eks.quota.managed-node-groups-per-cluster", "30",
        "https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html", "2026-11-25",
        "default quota, adjustable (Service Quotas code L-6D54EA21); each instance group is one managed node group",
    ),
    Fact(
        "eks.quota.nodes-per-managed-node-group", "450",
        "https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html", "2026-11-25",
        "default quota, adjustable (Service Quotas code L-BD136A63); older versions of the page listed 100",
    ),
)
