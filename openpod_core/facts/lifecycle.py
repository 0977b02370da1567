"""The platform's life on AWS: log groups and retention, Regions and zones, VPC ranges, teardown, UltraServer
Capacity Block searches."""

from __future__ import annotations

from openpod_core.facts.record import Fact

BOTOCORE = "boto/botocore@1.44.8"
MOTO = "getmoto/moto@5.2.5"

FACTS: tuple[Fact, ...] = (
    Fact(
        "eks.control-plane-logs.group", "EKS writes control-plane logs to the log group /aws/eks/<cluster>/cluster "
        "and creates it when it is missing",
        "https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html; "
        "hashicorp/terraform-provider-aws@166ed15551ca5f0c80773160b47adb504af15866:website/docs/r/"
        "eks_cluster.html.markdown ('to prevent ordering issues with EKS automatically creating the log group "
        "first'); https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonEKSServicePolicy.html "
        "(logs:CreateLogGroup)", "2026-11-28",
        "so a CloudFormation log group of that fixed name, retained on delete, makes the next deploy of the same "
        "cluster name fail (CloudWatch Logs refuses to create a group twice). platform_constructs/cluster.py "
        "adopts the group instead (CreateLogGroup tolerating ResourceAlreadyExistsException, PutRetentionPolicy, "
        "AssociateKmsKey) and leaves it on delete",
    ),
    Fact(
        "logs.retention-days", "1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, "
        "2557, 2922, 3288, 3653",
        f"{BOTOCORE}:botocore/data/logs/2014-03-28/service-2.json", "2026-11-28",
        "shape Days: the only retentions PutRetentionPolicy accepts; the spec refuses others (it used to round up, and "
        "capped 99999 at 3653 - shorter than asked). openpod_core/cloudwatch.py",
    ),
    Fact(
        "aws.regions", "38 Regions in the aws, aws-cn and aws-us-gov partitions",
        f"{BOTOCORE}:botocore/data/endpoints.json", "2026-11-28",
        "partitions[].regions; openpod_core/regions.py REGIONS; infra/spec/rules.py refuses any other region",
    ),
    Fact(
        "ec2.az-letters.moto", "zone letters of 12 Regions (us-east-1 a-f, us-west-2 a-d, ap-northeast-1 a/c/d, "
        "ca-central-1 a/b/d, ...)",
        f"{MOTO}:moto/ec2/models/availability_zones_and_regions.py:83-187", "2026-11-28",
        "moto's recorded DescribeAvailabilityZones; other Regions get a guessed a-c there (lines 188-203) and are "
        "not judged. openpod_core/regions.py AZ_LETTERS",
    ),
    Fact(
        "net.special-purpose-ipv4", "0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/4, 240.0.0.0/4",
        "https://www.rfc-editor.org/rfc/rfc6890", "2026-11-28",
        "section 2.2.2: this-network, loopback, link-local (EC2's metadata service and DNS resolver answer at 169.254.169.254 "
        "and 169.254.169.253), multicast, reserved: infra/spec/network.py refuses a VPC CIDR overlapping them",
    ),
    Fact(
        "docker.default-bridge", "172.17.0.0/16: the first of Docker's local-scope default address pools, the "
        "default bridge's (docker0) range unless the daemon's bip or default-address-pools say otherwise",
        "moby/moby@51650935705f1dc93ff9e363fd1b6c98e67b48c5:libnetwork/ipamutils/utils.go:18-20 "
        "(localScopeDefaultNetworks: 172.17.0.0/16 first, then 172.18-31.0.0/16 and 192.168.0.0/16 in /20s); "
        "https://docs.mirantis.com/mke/current/install/plan-deployment/mcr-considerations/docker0.html (\"The "
        "default IP range, or subnet, for docker0 is 172.17.0.0/16\")", "2026-11-29",
        "infra/spec/network.py refuses a VPC CIDR overlapping it: a host running Docker routes it to docker0. How "
        "the daemon skips a pool that overlaps a host route was not read; the refusal does not rely on it",
    ),
    Fact(
        "fsx.eni-in-subnet", "an FSx for Lustre file system keeps its network interfaces in its subnet and "
        "security group until it is deleted",
        "https://docs.aws.amazon.com/fsx/latest/WindowsGuide/limit-access-security-groups.html", "2026-11-28",
        "the FSx page 'File system access control with Amazon VPC' (the file system is reached through elastic "
        "network interfaces in the VPC, its security groups on them; the same text on the File Cache guide's page; "
        "the Lustre guide's page of that name was listed, not opened). So a retained file system blocks the deletion of its security group, subnet and VPC: `openpod teardown` "
        "deletes it (after a backup) before the stack (infra/deploy/teardown.py)",
    ),
    Fact(
        "ec2.capacity-block-offerings.ultraserver", "DescribeCapacityBlockOfferings takes UltraserverType and "
        "UltraserverCount (UltraServer blocks), InstanceCount up to 64 per block (instance blocks), and "
        "AllAvailabilityZones (else only the Region's AZs and the Local Zones you opted into)",
        f"{BOTOCORE}:botocore/data/ec2/2016-11-15/service-2.json", "2026-11-28",
        "DescribeCapacityBlockOfferingsRequest; infra/deploy/preflight.py asks by UltraServer for UltraServer types, checks its request against the "
        "installed model (tests/test_capacity_search.py), and names the Local Zone opt-in when nothing is found",
    ),
    Fact(
        "fsx.lustre.efa-create-only", "EfaEnabled is a CreateFileSystem setting only",
        f"{BOTOCORE}:botocore/data/fsx/2018-03-01/service-2.json", "2026-11-28",
        "CreateFileSystemLustreConfiguration has EfaEnabled, UpdateFileSystemLustreConfiguration does not; so turning EFA on or off cannot be an in-place update; openpod plan treats it as a replacement (a new, "
        "empty file system: blocked as stateful). The CloudFormation resource schema (cfn-lint 1.58.0) does not "
        "list it as create-only",
    ),
    Fact(
        "fsx.lustre.throughput-in-place", "PerUnitStorageThroughput changes in place (UpdateFileSystem)",
        f"{BOTOCORE}:botocore/data/fsx/2018-03-01/service-2.json", "2026-11-28",
        "UpdateFileSystemLustreConfiguration.PerUnitStorageThroughput: 'You can increase or decrease your file "
        "system's throughput'. This settles the disagreement: the CloudFormation schema (not create-only) is right and the CDK CLI's "
        "replacement table is not; FSx swaps the file servers, a few minutes without service "
        "(https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html)",
    ),
    Fact(
        "fsx.lustre.metadata-automatic-switch", "FSx rejects USER_PROVISIONED -> AUTOMATIC while the current "
        "metadata IOPS exceed what AUTOMATIC provisions; SSD IOPS are 1500, 3000, 6000, 12000 or multiples of 12000",
        f"{BOTOCORE}:botocore/data/fsx/2018-03-01/service-2.json", "2026-11-28",
        "UpdateFileSystemLustreMetadataConfiguration.Mode and FileSystemLustreMetadataConfiguration.Iops; openpod "
        "plan fails the switch from a user-provisioned value above what automatic mode gives the file system's "
        "capacity (fact fsx.lustre.metadata-automatic-iops; 1500 when the capacity is not a number)",
    ),
    Fact(
        "fsx.lustre.metadata-automatic-iops", "automatic mode provisions 1500 metadata IOPS at 1200 GiB, 3000 at "
        "2400 GiB, 6000 at 4800-9600 GiB, 12000 at 12000-45600 GiB and 12000 per 24000 GiB from 48000 GiB (SSD)",
        "https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html#dne-metadata-performance", "2026-11-29",
        "infra/deploy/plan_rules.py automatic_metadata_iops; the table was read as quoted, with that anchor, in two "
        "public notes on FSx for Lustre (found by text search): the stored copy of the AWS page ends before it. "
        "FSx refuses a switch to automatic only when the current IOPS are greater than this value (fact "
        "fsx.lustre.metadata-automatic-switch)",
    ),
    Fact(
        "fsx.dra.unique-paths", "each data repository association needs its own file system directory (no "
        "overlap: /ns1 excludes /ns1/ns2) and its own S3 bucket or prefix",
        f"{BOTOCORE}:botocore/data/fsx/2018-03-01/service-2.json", "2026-11-28",
        "CreateDataRepositoryAssociation and its FileSystemPath; a replaced association is created while the old one lives, so a new path over the same S3 prefix fails "
        "(openpod plan: will fail, whatever --allow-replace says)",
    ),
    Fact(
        "eks.nodegroup.spot", "node group capacityType ON_DEMAND | SPOT | CAPACITY_BLOCK; 0-20 instanceTypes with a "
        "launch template; for Spot, EKS recommends several instance types",
        f"{BOTOCORE}:botocore/data/eks/2017-11-01/service-2.json", "2026-11-28",
        "shape CapacityTypes and CreateNodegroupRequest.instanceTypes; capacity.type spot, "
        "capacity.spot_instance_types (infra/spec/rules.py, infra/spec/warnings.py)",
    ),
    Fact(
        "ec2.zone-ids", "a zone has a name (us-east-1a) and an ID (use1-az6); capacity reservations report both "
        "(AvailabilityZone, AvailabilityZoneId); DescribeAvailabilityZones maps one to the other",
        f"{BOTOCORE}:botocore/data/ec2/2016-11-15/service-2.json", "2026-11-28",
        "shapes AvailabilityZone.ZoneId/ZoneName, CapacityReservation.AvailabilityZoneId, "
        "DescribeAvailabilityZonesRequest.ZoneNames/ZoneIds; the spec's availability_zone_ids are checked by "
        "openpod preflight (the mapping is the account's: moto records one mapping, e.g. us-east-1a = use1-az6, "
        "and notes it differs from account to account, moto/ec2/models/availability_zones_and_regions.py:80-82)",
    ),
)
