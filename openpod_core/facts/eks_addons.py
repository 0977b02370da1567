"""EKS add-on pins and what the add-ons need: the VPC CNI, CoreDNS, kube-proxy, the FSx CSI driver, the
S3 gateway for image layers (``infra/spec/eks.py`` reads the ``eks.addon.*`` values)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
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
)
