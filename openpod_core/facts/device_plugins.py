"""Device plugins and node topology: the NVIDIA, EFA and Neuron charts' defaults, NVIDIA's DRA driver and
its ComputeDomains, the topology labels EKS and EC2 provide (``platform_constructs/device_plugins.py``)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
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
)
