"""The network and file-system boundary of team pods (``infra/governance/network.py``,
``platform_constructs/lustre.py``, ``docs/security.md``): what the VPC CNI's network policies see, and FSx for
Lustre's root squash."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "eks.vpc-cni.pod-security-groups", "pods share the security groups of the node's primary network interface "
        "unless security groups for pods are configured",
        "aws/aws-eks-best-practices@30eb854da681bb76e3d4e7cb1ac3a9323d663693:content/networking/vpc-cni/index.md "
        "(\"Pods deployed on a node are, by default, assigned to the same security groups as the primary ENI\")",
        "2026-11-28",
        "the platform enables no security groups for pods, so the FSx security group's rule for the cluster security "
        "group admits a pod's packets as it admits the node's: the egress NetworkPolicies are what keeps pods off "
        "the Lustre ports",
    ),
    Fact(
        "eks.vpc-cni.network-policy-host-network", "network policies are not applied to host-network pods",
        "aws/amazon-vpc-cni-k8s@v1.20.0:docs/network-policy-faq.md:41-43", "2026-11-28",
        "the nodes' Lustre kernel client (mounts of the teams' PersistentVolumes) runs in the host's network "
        "namespace, so the team namespaces' egress policies leave it alone",
    ),
    Fact(
        "eks.vpc-cni.network-policy-owner-references", "the VPC CNI applies network policies only to pods that "
        "have metadata.ownerReferences; a standalone Pod without them gets none",
        "awsdocs/amazon-eks-user-guide@0cc5a7608f9d1162d052bf2a61eddebc3352139f:latest/ug/networking/"
        "cni-network-policy.adoc (Considerations, Network Policies)", "2026-11-28",
        "the guide words it as pods \"part of a Deployment\"; team users cannot create bare Pods "
        "(infra/governance/admission.py, openpod-team-queue), so every team pod is a Job's, with an owner",
    ),
    Fact(
        "eks.vpc-cni.network-policy-service-ip", "an egress peer with a pod selector also admits the cluster IP of "
        "each non-headless Service in the peer's namespaces whose spec.selector the pod selector matches",
        "aws/amazon-network-policy-controller-k8s@v1.1.7:pkg/resolvers/endpoints.go:449-510 "
        "(getMatchingServiceClusterIPs)", "2026-11-28",
        "the node agent's eBPF probe sees a pod's packet before kube-proxy's DNAT; the DNS allow names the kube-dns "
        "pods (k8s-app=kube-dns), which the kube-dns Service selects",
    ),
    Fact(
        "eks.coredns.labels", "EKS's CoreDNS pods carry k8s-app: kube-dns (the add-on's default topology spread "
        "constraint selects them by it)",
        "awsdocs/amazon-eks-user-guide@057948d9301426e6165db5fddb5617a971d08b6c:latest/ug/networking/"
        "managing-coredns.adoc (\"Important CoreDNS upgrade considerations\", topologySpreadConstraints)",
        "2026-11-28",
    ),
    Fact(
        "eks.pod-identity-agent.address", "169.254.170.23, port 80, host network",
        "aws/eks-pod-identity-agent@v0.1.37:configuration/config.go:5; charts/eks-pod-identity-agent/templates/"
        "daemonset.yaml:75-76,95,100", "2026-11-28",
        "a pod fetches its Pod Identity credentials there; the egress policies allow exactly that address and port",
    ),
    Fact(
        "fsx.lustre.root-squash", "RootSquash \"UID:GID\" (non-zero: root of a client is mapped to it; default off); "
        "NoSquashNids: up to 64 client NIDs or ranges (10.0.[2-10].[1-255]@tcp) left unsquashed",
        "https://docs.aws.amazon.com/fsx/latest/APIReference/API_LustreRootSquashConfiguration.html; "
        "https://docs.aws.amazon.com/fsx/latest/LustreGuide/root-squash.html", "2026-11-28",
        "not set by the platform yet: CloudFormation cannot (fact cfn.fsx.no-root-squash), and the node subnets "
        "that would have to stay unsquashed (fact kubelet.subpath-mkdir) are the pods' subnets too",
    ),
    Fact(
        "cfn.fsx.no-root-squash", "AWS::FSx::FileSystem LustreConfiguration has no RootSquashConfiguration property",
        "aws-cloudformation/cfn-lint@v1.58.0:src/cfnlint/data/schemas/resources/eac496c3918e66ed.json "
        "(AWS::FSx::FileSystem, definitions.LustreConfiguration.properties)", "2026-11-28",
        "read in the installed cfn-lint 1.58.0 (the project's pin); aws-cdk-lib 2.275.0's "
        "CfnFileSystem.LustreConfigurationProperty has no root_squash_configuration either. Root squash is reachable "
        "only through the FSx API (UpdateFileSystem), e.g. from a custom resource",
    ),
    Fact(
        "cfn.custom-resource-response-bucket", "custom resources in a VPC with an S3 endpoint answer through the "
        "cloudformation-custom-resource-response-<region> bucket (Region without dashes, e.g. uswest2); an endpoint "
        "policy that blocks it fails the stack operation",
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/vpc-interface-endpoints.html "
        "(Considerations for CloudFormation VPC endpoints)", "2026-11-28",
        "one reason the S3 gateway endpoint keeps its default policy (docs/security.md): the kubectl handler and "
        "the webhook gate run in the VPC",
    ),
    Fact(
        "kubelet.subpath-mkdir", "the kubelet creates a missing subPath directory itself (as root, on the node) "
        "before the container starts",
        "kubernetes/kubernetes@df5f02437d38bc34f37e48b584b83a7227db3977:pkg/kubelet/kubelet_pods.go (makeMounts: "
        "subpather.SafeMakeDir(subPath, volumePath, perm) when the subPath does not exist)", "2026-11-28",
        "the team directories /<team> of the FSx root are created this way through the node's kernel client, which "
        "is why root squash exempts the nodes' NIDs",
    ),
)
