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
        "cuda-image.nccl-held", "apt-mark hold libnccl2",
        "gitlab.com/nvidia/container-images/cuda: dist/<distro>/<version>/runtime/Dockerfile", "2026-11-23",
        "NVIDIA's CUDA images hold libnccl2, so installing another version with apt-get -y needs "
        "--allow-change-held-packages",
    ),
    # ------------------------------------------------------------------ EKS add-ons
    Fact(
        "eks.vpc-cni.network-policy", '{"enableNetworkPolicy": "true"} in the vpc-cni add-on configuration values',
        "https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html", "2026-11-23",
        "the VPC CNI's network-policy agent (VPC CNI >= 1.14) is off by default; without it NetworkPolicy "
        "objects are accepted and not enforced",
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
        "the pinned 1.3.0's values were not found (see the unverified list); the platform passes neuronInstances "
        "from its instance table",
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
        "the node agent's controller labels UltraServer nodes with it (node_agent/topology.py). botocore models "
        "before 1.40.0 lack the field (1.35.99 has none; 1.40.0 has it; not bisected further). A Capacity Block "
        "may hold several UltraServers (CapacityBlockOffering.UltraserverCount), so the id can be coarser than "
        "one NVLink domain: the controller reports that case. NVIDIA's topograph derives its AWS accelerator "
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
        "used by openpod preflight (infra/preflight.py)",
    ),
    Fact(
        "ec2.p6e-gb200.local-zone", "P6e-GB200 UltraServer Capacity Blocks need the Dallas Local Zone opt-in",
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html", "2026-11-23",
        "so cfn-lint's per-region instance-type lists (E3628) do not know p6e-gb200.36xlarge; the examples' "
        "regular-AZ placement of the gb200 group is not yet checked against this",
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
        "hyperpod.deep-health-check.dcgm-level", "4",
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-deep-health-checks.html",
        "2026-11-23",
        "HyperPod's instance-level deep health check runs DCGM diagnostics at level 4; the spec's "
        "instance_groups[].dcgm_level offers it (default 2: minutes, not hours, before a rebooted node works again)",
    ),
)

# Facts the code relies on whose source has not been found or read yet: shown in docs/facts.md so nobody
# mistakes them for checked ones. Each says what the code assumes today.
UNVERIFIED: tuple[tuple[str, str], ...] = (
    ("p6e-gb200 instance-store NVMe", "the instance table says 4 x 7500 GB; issue 8 quotes the EKS guide as 3 x 7.5 TB"),
    ("p6e-gb200 EFA layout and bandwidth", "the table says 16 x 100 Gbps, efa-only on cards 1-16; public sources "
                                           "say 3200 Gbps total and 4 EFA devices per node on EKS"),
    ("neuron-helm-chart 1.3.0 values", "the device-plugin placement keys (neuronInstances, devicePlugin.nodeSelector, "
                                       "devicePlugin.tolerations, devicePlugin.affinity) are read at 1.1.2; no "
                                       "stored copy of 1.3.0 was found (tests/fixtures/charts/"
                                       "neuron-helm-chart-1.3.0.yaml)"),
    ("aws-fsx-csi-driver add-on version", "pinned v1.7.0-eksbuild.1; no public listing of that string was found"),
    ("EKS add-on pins", "real versions, not checked as current for eks.version; `openpod preflight` checks them "
                        "against describe-addon-versions before a deploy"),
    ("S3 gateway endpoint and ECR image layers", "ECR serves image layers from a bucket it owns, so the S3 "
                                                 "gateway endpoint keeps its default policy "
                                                 "(platform_constructs/network.py); not read in the ECR guide"),
    ("AMP scraper access entry", "the access entry names role/<name> of the scraper's service-linked role "
                                 "(its RoleArn without the aws-service-role/scraper.aps.amazonaws.com/ path), "
                                 "Kubernetes user aps-collector-user; not checked against a live scraper"),
    ("EFA counters in node exporter", "node_exporter's infiniband collector (on by default) exports the EFA "
                                      "devices' counters from /sys/class/infiniband; not checked on an EFA node"),
    ("AMP scraper and Kueue's metrics", "the managed scraper honours `authorization.credentials_file` "
                                        "(/var/run/secrets/kubernetes.io/serviceaccount/token) with its own "
                                        "cluster identity, so Kueue's authenticated endpoint accepts it"),
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
