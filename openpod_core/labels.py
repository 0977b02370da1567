"""Kubernetes label, taint and annotation keys, and the few names and sizes, shared by every part of the platform.

The CDK node groups set them, Kueue flavors select on them, the node agent
reads and writes them, the submit CLI targets them. Keep them here only.
"""

DOMAIN = "openpod.io"

# Node labels set at launch (node group config).
INSTANCE_GROUP = f"{DOMAIN}/instance-group"          # spec group name
ACCELERATOR = f"{DOMAIN}/accelerator"                # nvidia | neuron | none
ACCELERATOR_MODEL = f"{DOMAIN}/accelerator-model"    # H100, Trainium2, GB200, ...
EFA = f"{DOMAIN}/efa"                                # "true" | "false"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"   # well-known, set by kubelet

# Node health, as users of HyperPod know it (values below).
HEALTH_STATUS = f"{DOMAIN}/node-health-status"
HEALTH_SCHEDULABLE = "Schedulable"
HEALTH_PENDING_REBOOT = "UnschedulablePendingReboot"
HEALTH_PENDING_REPLACEMENT = "UnschedulablePendingReplacement"
HEALTH_CONDITION = "AcceleratorHealthy"              # node condition type the agent maintains

# Taints.
STARTUP_TAINT = f"{DOMAIN}/health-check"             # value "pending", NoSchedule; removed by the deep check
STARTUP_TAINT_VALUE = "pending"
UNHEALTHY_TAINT = f"{DOMAIN}/unhealthy"              # NoSchedule while a node awaits reboot/replacement
HOT_SPARE_TAINT = f"{DOMAIN}/hot-spare"              # NoSchedule on spare nodes held out of team quotas
HOT_SPARE = f"{DOMAIN}/hot-spare"                    # label "true" on spare nodes
PAIR_CHECK_TAINT = f"{DOMAIN}/pair-check"            # NoSchedule: a new/rebooted node held for the two-node check
                                                     # (value pending | failed; node_agent/pair_runner.py)
# The system group's taint (value "true", NoSchedule): only the platform's controllers and the add-ons that
# tolerate it run there. The key is the one EKS Auto Mode's system node pool carries and EKS add-ons such as
# CoreDNS tolerate (facts: eks.system-taint, eks.addon.coredns.tolerations).
SYSTEM_TAINT = "CriticalAddonsOnly"
SYSTEM_TAINT_VALUE = "true"

# Labels the Job controller sets on the pods of an Indexed Job (kubernetes/website
# content/en/docs/reference/labels-annotations-taints/_index.md, "batch.kubernetes.io/job-completion-index"
# and "batch.kubernetes.io/job-name"; checked 2026-11-23).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

# EKS topology labels (set by EKS on instances that report network topology).
TOPOLOGY_LAYERS = (
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
)
# HyperPod sets the UltraServer one; plain EKS does not, so the node agent's controller does (node_agent/topology.py,
# the instance's EC2 CapacityBlockId; facts: eks.native-topology-labels).
ULTRASERVER_ID = "topology.k8s.aws/ultraserver-id"
HOSTNAME = "kubernetes.io/hostname"

# Resource names.
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = "hugepages-2Mi"
HUGEPAGE_SIZE_MI = 2

# 2 MiB hugepages a training pod on an EFA node requests by default (libfabric's
# EFA provider registers its bounce buffers there), and so what every EFA node
# preallocates at boot: the node groups set vm.nr_hugepages from it.
EFA_HUGEPAGES_MI = 5120

# The service account training pods run as in each team namespace; the
# platform's Pod Identity association gives it the training role.
TRAINING_SERVICE_ACCOUNT = "training"

# Where every node with instance-store NVMe mounts its RAID0 (the instance
# groups' user data assembles it); training pods mount a per-job directory of
# it as a hostPath for the local checkpoint tier.
LOCAL_NVME_MOUNT = "/mnt/local-nvme"

# Per-job scratch on the node, outside any pod: ``<root>/<team>/<job>``. Node memory
# (the host's /dev/shm tmpfs) holds the training runtime's memory tier, so its
# snapshots - and the buddy snapshots it holds for peer recovery - survive the pod
# recreation that follows a node loss; the NVMe RAID0 holds the local disk tier.
# The node agent removes a job's directories once nothing mounts them and they have
# not changed for its configured time to live.
HOST_MEMORY_TIER = "/dev/shm/openpod"
NVME_JOB_ROOT = f"{LOCAL_NVME_MOUNT}/openpod"
JOB_SCRATCH_ROOTS = (HOST_MEMORY_TIER, NVME_JOB_ROOT)

# `python -m training run --metrics-port`: each node's local rank 0 serves the runtime's Prometheus
# metrics here; `openpod submit --runtime openpod` sets it and annotates the pods for scraping
# (prometheus.io/scrape, prometheus.io/port: observability/scrape.py), and the team namespaces'
# NetworkPolicies admit it from inside the VPC. 9400 is the DCGM exporter's (facts: chart.dcgm-exporter).
TRAINING_METRICS_PORT = 9409



def scrape_annotations(port: int) -> dict[str, str]:
    """The pod annotations the scrape jobs keep (``prometheus.io/scrape``, ``prometheus.io/port``:
    observability/scrape.py): node agent, exporters, Neuron monitor and training pods carry them."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port)}


# The job's peer-replication key (hex): the runtime signs its peer requests with it
# (training/checkpoint/peer_auth.py); `openpod submit` delivers it from a per-job Secret.
PEER_SECRET_ENV = "OPENPOD_PEER_SECRET"
