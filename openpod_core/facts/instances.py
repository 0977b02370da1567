"""Instance figures: EFA layouts, specifications, network cards and bandwidth, where each type is sold
(``openpod_core/instance_types.py``, ``openpod_core/instance_regions.py``)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "ec2.p6e-gb200.efa-layout", "17 network cards; NCI 0: ENA only, up to 100 Gbps; NCI 1,3,..,15: EFA-only, "
        "up to 400 Gbps; NCI 2,4,..,16: ENA or EFA, up to 200 Gbps; [1,2] [3,4] .. share one 400 Gbps NIC; "
        "[1,3] [5,7] [9,11] [13,15] feed one GPU (400 Gbps each); recommended: one EFA-only interface on NCI 1, 5, "
        "9, 13 = 4 x 400 = 1600 Gbps EFA",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html#efa-for-p6e", "2026-11-23",
        "read in AWS's Simplified Chinese translation of the page (docs.aws.amazon.com/zh_cn/...); its example text "
        "says an EFA interface on NCI 0 while the same page and the EKS guide say NCI 0 is ENA-only (type "
        "interface). The 8 x 200 Gbps alternative puts EFA-only on all odd NCIs. EC2's network table gives the "
        "instance 3200 Gbps (fact ec2.network-bandwidth)",
    ),
    Fact(
        "eks.p6e-gb200.efa-devices", "up to 17 network cards, primary NCI 0 of type interface (up to 100 Gbps ENA); "
        "one efa-only interface per NCI group gives vpc.amazonaws.com/efa: 4 per node",
        "awsdocs/amazon-eks-user-guide@00e3293d508eeb7886cd42987dd4624cb680f37c:latest/ug/ml/"
        "ml-eks-nvidia-ultraserver.adoc (Install the EFA device plugin)", "2026-11-23",
        "https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html",
    ),
    Fact(
        "eks.p6e-gb200.instance-store", "3 x 7.5 TB instance store per p6e-gb200.36xlarge (the table: 3 x 7500 GB)",
        "awsdocs/amazon-eks-user-guide@00e3293d508eeb7886cd42987dd4624cb680f37c:latest/ug/ml/"
        "ml-eks-nvidia-ultraserver.adoc (Considerations)", "2026-11-23",
        "the guide writes 7.5TB; 7500 GB per device is that figure in the table's unit, not read in EC2's "
        "instance-store table. The AL2023 AMI leaves them unformatted unless NodeConfig's local storage policy is RAID0",
    ),
    Fact(
        "ec2.p5-p5e.efa", "p5.48xlarge and p5e.48xlarge: 32 network cards, 3200 Gbps total (up to 800 Gbps IP); "
        "ENA primary at NCI 0/device 0, EFA-only at NCI 0/device 1 and NCI 1-31/device 0",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html#efa-for-p5", "2026-11-23",
        "read in the Simplified Chinese translation; the table's 32 x 100 Gbps is 3200 / 32",
    ),
    Fact(
        "ec2.p6-b200.efa", "p6-b200.48xlarge: 8 network cards, each up to 400 Gbps EFA and 200 Gbps ENA; 3200 Gbps "
        "total; ENA primary, EFA-only at NCI 0/device 1 and NCI 1-7/device 0",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html#efa-for-p6-b200", "2026-11-23",
        "read in the Simplified Chinese translation",
    ),
    Fact(
        "neuron.trn2.specs", "trn2.48xlarge and trn2u.48xlarge: 16 Trainium2, 192 vCPUs, 2,048 GiB host memory, "
        "1,536 GiB device memory (96 per device), 3,200 Gbps EFAv3; a Trn2 UltraServer = 4 trn2u.48xlarge",
        "aws-neuron/aws-neuron-sdk@81ce03ae261e12925e53437a0f690478e6366155:about-neuron/arch/neuron-hardware/"
        "trn2-arch.rst:27,46,68-104 (Trn2 instance specifications)", "2026-11-23",
        "one column for both types; 16 cards (fact vpc-cni.network-cards, trn2 only) x 200 Gbps is 3,200 / 16. "
        "An older copy (@2086a70, general/arch/...) named only trn2.48xlarge",
    ),
    Fact(
        "neuron.sysfs.hardware-counters", "/sys/devices/virtual/neuron_device/neuron<N>/stats/hardware/"
        "{mem_ecc_uncorrected,mem_ecc_repairable_uncorrected,sram_ecc_uncorrected}: one file per counter, printing "
        "a count",
        "aws-neuron/aws-neuron-driver@fca19f7df31b44cbbffaf121230a66df6f59d118:neuron_sysfs_metrics.c:146-150,"
        "328-360,927-955 (driver 2.24.7.0+2); v2/neuron_dhal_v2.c:849-857", "2026-11-23",
        "the driver adds the three as attributes of the stats/hardware node of each device's kobject, not as the "
        "{total,present} counter directories the sysfs user guide draws for other counters (and its text, "
        "line 119, implied for these); node_agent/neuron.py reads the file, or <counter>/total if a directory",
    ),
    Fact(
        "neuron.trn1.specs", "trn1.2xlarge: 1 Trainium, 8 vCPUs, 32 GiB host memory; trn1.32xlarge / "
        "trn1n.32xlarge: 16 Trainium, 128 vCPUs, 512 GiB host and 512 GiB device memory, EFA 800 / 1,600 Gbps",
        "aws-neuron/aws-neuron-sdk@60224f42a7f48ab478ad85d864464345d7b3cefa:general/arch/neuron-hardware/"
        "trn1-arch.rst (Trn1/Trn1n Architecture table)", "2026-11-23",
        "the table's trn1 rows (8 x 100 and 16 x 100 Gbps)",
    ),
    Fact(
        "ec2.describe-instance-types.recorded", "p5.48xlarge: 192 vCPUs, 2,097,152 MiB, 8 x H100 of 81,920 MiB, "
        "instance store 30,400 GB in total, 32 EFA interfaces at most; trn1.2xlarge: 8 vCPUs, 32,768 MiB, 1 "
        "Trainium of 32,768 MiB, instance store 474 GB",
        "aws/karpenter-provider-aws@1d927085dd81a9df9301e613f371dac5b4d16bfe:pkg/fake/"
        "zz_generated.describe_instance_types.go:652-700,1034-1081", "2026-11-23",
        "EC2's DescribeInstanceTypes output as Karpenter's generator recorded it (hack/code/instancetype_testdata_gen/"
        "main.go:91-109; file regenerated 2026-07-20). Corrected the table's p5.48xlarge instance store (8 x 3840 "
        "= 30,720 GB) to 8 x 3800 and trn1.2xlarge's 475 GB to 474",
    ),
    Fact(
        "ec2.describe-instance-types.moto", "local NVMe per device, GB: p5.4xlarge 1 x 3800, p5/p5e/p5en/p6-b200."
        "48xlarge 8 x 3800, p4d/p4de 8 x 1000, trn1.32xlarge/trn1n/trn2/trn2u 4 x 1900; trn2u.48xlarge 192 vCPUs, "
        "2,097,152 MiB, 16 network cards; g6e.12xlarge 4 x L40S of 45,776 MiB, 48 vCPUs, 393,216 MiB, 2 x 1900 GB, "
        "EFA on 1 card; g6e.48xlarge 8 x L40S, 192 vCPUs, 1,572,864 MiB, 4 x 1900 GB, EFA on 4 cards (400 Gbps); "
        "g5.12xlarge 4 x A10G of 22,888 MiB, 48 vCPUs, 196,608 MiB, 1 x 3800 GB, EFA; g5.48xlarge 8 x A10G, 192 "
        "vCPUs, 786,432 MiB, 2 x 3800 GB, EFA on 1 card (100 Gbps); g6e/g5 .xlarge to .4xlarge: no EFA",
        "getmoto/moto@5.2.5:moto/ec2/resources/instance_types.json (the installed wheel's instance_types.json.gz)",
        "2026-11-25",
        "EC2's DescribeInstanceTypes output as moto records it (1,395 types; no p6e-gb200). Every row of "
        "openpod_core/instance_types.py it holds matches it in vCPUs, memory, GPU model, count and memory (MiB // "
        "1024), instance store, EFA support and network cards (tests/test_instance_types.py reads the file). The "
        "human-readable table is https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html (not read here); "
        "the P rows' 3840 GB per device (EC2 marketing's 3.84 TB) was corrected to 3800",
    ),
    Fact(
        "ec2.instance-type-offerings.moto", "Regions offering trn2.48xlarge: us-east-2, ap-south-2 (not us-east-1); "
        "p5en.48xlarge and p5.48xlarge: us-east-1 among 11 and 13 Regions; p5e.48xlarge: not us-east-1",
        "getmoto/moto@5.2.5:moto/ec2/resources/instance_type_offerings/region/<region>.json (30 Regions)",
        "2026-11-25",
        "DescribeInstanceTypeOfferings (LocationType region) as moto records it; openpod_core/instance_regions.py "
        "holds it for the register's accelerated types and infra/spec/rules.py refuses a group in a recorded Region "
        "that does not offer its type. Per-AZ offerings are account-specific (AZ names map to AZ IDs per "
        "account): openpod preflight asks the account",
    ),
    Fact(
        "ec2.trn2.capacity-block-regions", "trn2.48xlarge Capacity Blocks: US East (Ohio)",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html", "2026-11-25",
        "read in a mirror copy of the page (supported instance types and Regions); with fact "
        "ec2.instance-type-offerings.moto: Trn2 is not sold in us-east-1, where the P6e-GB200 Dallas Local Zone's "
        "parent Region is, so examples/large.yaml (us-east-1) runs its Trainium pool on trn1.32xlarge and a "
        "Trn2 fleet is a second cluster in us-east-2 (examples/default.yaml)",
    ),
    Fact(
        "ec2.network-bandwidth", "Gbps: p4d/p4de.24xlarge 400, p5.4xlarge 100, p5/p5e/p5en.48xlarge 3200, "
        "p6-b200.48xlarge 3200, p6e-gb200.36xlarge 3200, trn1.32xlarge 800, trn1n.32xlarge 1600, "
        "trn2.48xlarge 3200, trn2u.48xlarge 3200",
        "aws/karpenter-provider-aws@1d927085dd81a9df9301e613f371dac5b4d16bfe:pkg/providers/instancetype/"
        "zz_generated.bandwidth.go:1229,1379-1380,1405-1414", "2026-11-23",
        "generated from the network tables of https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html "
        "(hack/code/bandwidth_gen/main.go:41; file regenerated 2026-08-18). p5en's 3200 over its 16 cards is the "
        "table's 200 per card; p6e-gb200's 3200 is the whole instance, of which the platform's one EFA-only "
        "interface per GPU (fact ec2.p6e-gb200.efa-layout) carries 1600",
    ),
    Fact(
        "vpc-cni.network-cards", "NetworkCards per type: p4d/p4de.24xlarge 4, p5.48xlarge 32, p5e.48xlarge 32, "
        "p5en.48xlarge 16, p5.4xlarge 1, p6-b200.48xlarge 8, trn1.2xlarge 1, trn1.32xlarge 8, trn1n.32xlarge 16, "
        "trn2.48xlarge 16, c6in.32xlarge 2",
        "aws/amazon-vpc-cni-k8s@b52188387f2e2f10bf289ace929d6a63b176a4fa:pkg/vpc/vpc_ip_resource_limit.go:1638 "
        "(c6in.32xlarge), 12162-12572 (p4d.24xlarge .. p6-b200.48xlarge), 17512-17652 (trn1.2xlarge .. trn2.48xlarge)", "2026-11-23",
        "the VPC CNI's generated limits table (from DescribeInstanceTypes); it has no p6e-gb200.36xlarge or "
        "trn2u.48xlarge row",
    ),
)
