"""InstanceGroup: one EKS managed node group of one instance type, with its launch template.

The launch template carries what managed node groups cannot express on their
own: the EFA interface layout from the instance table, IMDSv2, encrypted EBS,
the RAID0 of instance-store NVMe, the placement group and capacity
reservation / capacity block targeting. The layout and the user data are plain
functions (``network_interfaces``, ``user_data``) so they can be read and
tested without synthesizing anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from aws_cdk import Fn, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from openpod_core import labels as keys
from openpod_core.instance_types import Accelerator, EfaLayout, InstanceType
from infra.spec.groups import CapacityType, Taint, Volume

# Where the RAID0 of instance-store NVMe is mounted (shared with the submit CLI).
LOCAL_NVME_MOUNT = keys.LOCAL_NVME_MOUNT
ROOT_DEVICE = "/dev/xvda"
# EKS's node-group update strategies (NodegroupUpdateConfig.updateStrategy; fact eks.nodegroup.update-strategy).
UPDATE_STRATEGIES = ("DEFAULT", "MINIMAL")


@dataclass(frozen=True)
class NetworkInterface:
    """One interface of a launch template: where it sits and what it is."""

    network_card_index: int
    device_index: int
    interface_type: str  # "interface" (ENA), "efa" (EFA with ENA) or "efa-only"


def network_interfaces(instance_type: InstanceType) -> list[NetworkInterface]:
    """EC2's recommended interface layout for ``instance_type``.

    Card 0 device 0 is always the ENA primary interface (an efa-only interface
    cannot be primary). If card 0 takes EFA, an efa-only interface goes at
    card 0 device 1; every other EFA card gets one efa-only interface at device
    0. P6e-GB200 follows the same rule with its own card facts: card 0 has no
    EFA, so its EFA devices are efa-only interfaces on the cards the table
    lists (NCI 1, 5, 9, 13: one per GPU, EC2's recommended layout; see
    ``openpod_core.facts.instances`` ec2.p6e-gb200.efa-layout).
    """
    primary = NetworkInterface(0, 0, "interface")
    if instance_type.efa_layout is EfaLayout.NONE or not instance_type.efa_cards:
        return [primary]
    if instance_type.efa_layout is EfaLayout.GB200 and 0 in instance_type.efa_cards:
        raise ValueError(f"{instance_type.name}: GB200 layout has no EFA on network card 0")
    out = [primary]
    for card in sorted(instance_type.efa_cards):
        if card >= instance_type.network_cards:
            raise ValueError(f"{instance_type.name}: EFA card {card} >= network_cards {instance_type.network_cards}")
        out.append(NetworkInterface(card, 1 if card == 0 else 0, "efa-only"))
    return out


def ami_type(instance_type: InstanceType) -> str:
    """The EKS-optimized AL2023 AMI type (CloudFormation spelling) for the type's accelerator and CPU."""
    arm = instance_type.arch == "arm64"
    if instance_type.accelerator is Accelerator.NVIDIA:
        return "AL2023_ARM_64_NVIDIA" if arm else "AL2023_x86_64_NVIDIA"
    if instance_type.accelerator is Accelerator.NEURON:
        if arm:
            raise ValueError(f"{instance_type.name}: no Neuron AMI for arm64")
        return "AL2023_x86_64_NEURON"
    return "AL2023_ARM_64_STANDARD" if arm else "AL2023_x86_64_STANDARD"


_BOUNDARY = "==OPENPOD=="

_NODECONFIG = """\
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      # Let pods (and the training loop's checkpoint-on-SIGTERM) finish when
      # a node is rebooted or replaced by the remediation controller.
      shutdownGracePeriod: 120s
      shutdownGracePeriodCriticalPods: 30s
"""

_RAID0_SCRIPT = """\
#!/bin/bash
# Assemble the instance-store NVMe devices as RAID0 on {mount} for local
# checkpoints, at every boot (instance store is empty after stop/start, and the
# array must be re-assembled and re-mounted after a reboot).
set -euo pipefail
install -d -m 0755 /usr/local/sbin
cat > /usr/local/sbin/openpod-local-nvme <<'SCRIPT'
#!/bin/bash
set -euo pipefail
MOUNT={mount}
MD=/dev/md/openpod-local
mountpoint -q "$MOUNT" && exit 0
mkdir -p "$MOUNT"
mapfile -t DEVS < <(for d in /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*; do
  [ -e "$d" ] && [[ "$d" != *-part* ]] && [[ "$d" != *_1 ]] && readlink -f "$d"; done | sort -u)
if [ "${{#DEVS[@]}}" -eq 0 ]; then echo "openpod-local-nvme: no instance-store NVMe"; exit 0; fi
if [ "${{#DEVS[@]}}" -eq 1 ]; then
  DEV="${{DEVS[0]}}"
else
  command -v mdadm >/dev/null || dnf install -y -q mdadm
  mdadm --assemble --scan >/dev/null 2>&1 || true
  if [ ! -e "$MD" ]; then
    mdadm --create "$MD" --level=0 --name=openpod-local --raid-devices="${{#DEVS[@]}}" --force --run "${{DEVS[@]}}"
  fi
  DEV="$MD"
fi
blkid "$DEV" >/dev/null 2>&1 || mkfs.xfs -f -K "$DEV"
mount -o noatime,nodiratime "$DEV" "$MOUNT"
chmod 1777 "$MOUNT"
SCRIPT
chmod 0755 /usr/local/sbin/openpod-local-nvme
cat > /etc/systemd/system/openpod-local-nvme.service <<'UNIT'
[Unit]
Description=RAID0 of instance-store NVMe on {mount}
Before=kubelet.service containerd.service
After=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/openpod-local-nvme

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now openpod-local-nvme.service
"""


_HUGEPAGES_SCRIPT = """\
#!/bin/bash
# Preallocate {pages} 2 MiB hugepages ({mib} MiB) for EFA (libfabric), as training
# pods request hugepages-{size}Mi. Cloud-init runs this before nodeadm-run starts
# kubelet (After=cloud-final.service), so kubelet reports the capacity when it
# registers the node; systemd-sysctl applies the file again early at every
# reboot, before kubelet.
set -euo pipefail
echo "vm.nr_hugepages = {pages}" > {conf}
sysctl -q -p {conf}
got=$(cat /proc/sys/vm/nr_hugepages)
if [ "$got" -lt {pages} ]; then
  echo "openpod-hugepages: only $got of {pages} 2 MiB pages could be allocated" >&2
  exit 1
fi
"""
HUGEPAGES_SYSCTL_FILE = "/etc/sysctl.d/90-openpod-hugepages.conf"

# The EKS AL2023 AMIs ship no Lustre client (awslabs/amazon-eks-ami#2696): the FSx CSI driver's mount fails
# without it. Package per the FSx guide for Amazon Linux 2023 (fact fsx.lustre.client-al2023).
LUSTRE_CLIENT_PACKAGE = "lustre-client"
_LUSTRE_SCRIPT = """\
#!/bin/bash
# Install the Lustre client FSx for Lustre mounts need, before kubelet starts (the node agent's
# readiness check, node_agent/lustre_client.py, reports a node where it is still missing).
set -euo pipefail
if ! grep -qw lustre /proc/filesystems; then
  rpm -q {package} >/dev/null 2>&1 || dnf install -y -q {package}
  modprobe lustre
fi
"""


def hugepages_count(mib: int) -> int:
    """``vm.nr_hugepages`` for ``mib`` MiB of 2 MiB pages."""
    if mib < 0 or mib % keys.HUGEPAGE_SIZE_MI:
        raise ValueError(f"hugepages_mib must be 0 or more and a multiple of {keys.HUGEPAGE_SIZE_MI}, got {mib}")
    return mib // keys.HUGEPAGE_SIZE_MI


def user_data(*, local_nvme_raid0: bool, mount: str = LOCAL_NVME_MOUNT, hugepages_mib: int = 0,
              nvidia_toolkit: bool = False, lustre_client: bool = False) -> str:
    """MIME multi-part user data for AL2023 (nodeadm merges its NodeConfig part with EKS's own).

    ``hugepages_mib`` > 0 adds a script part that preallocates that many MiB of
    2 MiB hugepages (``vm.nr_hugepages``) before kubelet starts. ``lustre_client``
    adds one that installs and loads the Lustre client (nodes that mount FSx).
    """
    parts = [("application/node.eks.aws", _NODECONFIG)]
    if lustre_client:
        parts.append(('text/x-shellscript; charset="us-ascii"', _LUSTRE_SCRIPT.format(package=LUSTRE_CLIENT_PACKAGE)))
    pages = hugepages_count(hugepages_mib)
    if pages:
        parts.append(('text/x-shellscript; charset="us-ascii"', _HUGEPAGES_SCRIPT.format(
            pages=pages, mib=hugepages_mib, size=keys.HUGEPAGE_SIZE_MI, conf=HUGEPAGES_SYSCTL_FILE)))
    if local_nvme_raid0:
        parts.append(('text/x-shellscript; charset="us-ascii"', _RAID0_SCRIPT.format(mount=mount)))
    if nvidia_toolkit:  # GPUs only through the device plugin (device_plugins.TOOLKIT_SCRIPT)
        from platform_constructs.device_plugins import TOOLKIT_SCRIPT
        parts.append(('text/x-shellscript; charset="us-ascii"', TOOLKIT_SCRIPT))
    body = [f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{_BOUNDARY}"\n']
    for content_type, text in parts:
        body.append(f"--{_BOUNDARY}\nContent-Type: {content_type}\n\n{text}")
    body.append(f"--{_BOUNDARY}--\n")
    return "\n".join(body)


def node_labels(group_name: str, instance_type: InstanceType, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """Labels every node of a group carries (see ``openpod_core.labels``) plus the spec's own."""
    out = {
        keys.INSTANCE_GROUP: group_name,
        keys.ACCELERATOR: instance_type.accelerator.value,
        keys.EFA: "true" if instance_type.efa_supported else "false",
    }
    if instance_type.accelerator_model:
        out[keys.ACCELERATOR_MODEL] = instance_type.accelerator_model
    return {**out, **extra}


_EFFECTS = {
    "NoSchedule": eks.TaintEffect.NO_SCHEDULE,
    "PreferNoSchedule": eks.TaintEffect.PREFER_NO_SCHEDULE,
    "NoExecute": eks.TaintEffect.NO_EXECUTE,
}


class InstanceGroup(Construct):
    """An EKS managed node group (an Auto Scaling group underneath) of one instance type.

    Props:
      cluster, node_role: where nodes join and the role they run as.
      instance_type: a row of the instance table; drives the EFA layout, AMI and RAID0.
      subnets: where nodes launch; an EFA group must be given exactly one (EFA stays in a subnet).
      security_groups: attached to every interface (cluster security group + EFA group for EFA types).
      min_size / desired_size / max_size: the group's scaling bounds.
      placement_group: launch into a new cluster placement group (not with a reservation).
      capacity_type / capacity_reservation_id: on-demand, an ODCR, an EC2 capacity block, or Spot.
      spot_instance_types: a Spot group's other instance types (interchangeable with ``instance_type``).
      labels / taints: added to the table-derived labels; accelerated groups also get the
        startup taint ``openpod.io/health-check=pending:NoSchedule`` that the deep health check removes.
      root_volume_gib / volumes: encrypted gp3 EBS volumes.
      local_nvme_raid0: assemble instance-store NVMe as RAID0 on ``LOCAL_NVME_MOUNT``.
      hugepages_mib: MiB of 2 MiB hugepages preallocated at boot (default: ``openpod_core.labels.EFA_HUGEPAGES_MI``
        on EFA types, what training pods request there; 0 elsewhere).
      imds_hop_limit: 1 (default) keeps pods off IMDS and so off the node role's credentials
        (hostNetwork agents such as the Pod Identity agent and the node agent's detector still
        reach it); 2, as EKS's own template, lets every pod take the node role: only for a
        group that runs no team pods and needs it.
      kubernetes_version: the nodes' Kubernetes version (the cluster's); unset keeps the creation version.
      max_unavailable: nodes an update (e.g. an upgrade) replaces at a time, 1..100. Accelerated groups are
        never force-updated: an eviction a PodDisruptionBudget forbids fails the update instead.
      lustre_client: install the Lustre client at boot: every group whose pods may mount the FSx file system.
      update_strategy: ``DEFAULT`` (EKS launches the new nodes first) or ``MINIMAL`` (EKS terminates old
        nodes first). Default: ``MINIMAL`` for a reservation or capacity block, which has no spare capacity
        for the default's surge (fact eks.nodegroup.update-strategy), ``DEFAULT`` otherwise.

    The node group has no fixed name: CloudFormation names it, so a change that replaces it (instance type,
    subnets, AMI or capacity type) creates the new group beside the old one instead of failing on the name
    (fact cfn.custom-name-replacement). Nodes are found by the ``openpod.io/instance-group`` label and tag.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        node_role: iam.IRole,
        group_name: str,
        instance_type: InstanceType,
        subnets: Sequence[ec2.ISubnet],
        security_groups: Sequence[str],
        min_size: int = 0,
        desired_size: int = 0,
        max_size: int = 1,
        placement_group: bool = False,
        capacity_type: CapacityType = CapacityType.ON_DEMAND,
        capacity_reservation_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Taint] = (),
        startup_taint: bool | None = None,
        root_volume_gib: int = 200,
        volumes: Sequence[Volume] = (),
        local_nvme_raid0: bool = True,
        hugepages_mib: int | None = None,
        imds_hop_limit: int = 1,
        kubernetes_version: str | None = None,
        max_unavailable: int = 1,
        update_strategy: str | None = None,
        lustre_client: bool = False,
        spot_instance_types: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        self.group_name = group_name
        self.instance_type = instance_type
        if not 0 <= min_size <= desired_size <= max_size or max_size < 1:
            raise ValueError(f"InstanceGroup {group_name}: need 0 <= min_size <= desired_size <= max_size and "
                             f"max_size >= 1 (got {min_size}/{desired_size}/{max_size})")
        if not subnets:
            raise ValueError(f"InstanceGroup {group_name}: subnets must not be empty")
        if not 1 <= max_unavailable <= 100:
            raise ValueError(f"InstanceGroup {group_name}: max_unavailable must be 1..100 (got {max_unavailable})")
        if instance_type.efa_supported and len(subnets) != 1:
            raise ValueError(f"InstanceGroup {group_name}: subnets must be exactly one subnet for an EFA "
                             f"instance type ({instance_type.name}); EFA traffic does not leave a subnet")
        reserved = capacity_type in (CapacityType.RESERVATION, CapacityType.CAPACITY_BLOCK)
        if spot_instance_types and capacity_type is not CapacityType.SPOT:
            raise ValueError(f"InstanceGroup {group_name}: spot_instance_types needs capacity_type spot")
        if reserved and not capacity_reservation_id:
            raise ValueError(f"InstanceGroup {group_name}: capacity_reservation_id is required with "
                             f"capacity_type {capacity_type.value}")
        if not reserved and capacity_reservation_id:
            raise ValueError(f"InstanceGroup {group_name}: capacity_reservation_id needs capacity_type "
                             "reservation or capacity-block")
        if placement_group and reserved:
            raise ValueError(f"InstanceGroup {group_name}: placement_group must be false with a capacity "
                             "reservation or capacity block (launches would fail)")
        if update_strategy is None:
            update_strategy = "MINIMAL" if reserved else "DEFAULT"
        if update_strategy not in UPDATE_STRATEGIES:
            raise ValueError(f"InstanceGroup {group_name}: update_strategy must be one of "
                             f"{', '.join(UPDATE_STRATEGIES)}, got {update_strategy!r}")
        self.update_strategy = update_strategy
        if imds_hop_limit not in (1, 2):
            raise ValueError(f"InstanceGroup {group_name}: imds_hop_limit must be 1 or 2, got {imds_hop_limit}")
        if not security_groups:
            raise ValueError(f"InstanceGroup {group_name}: security_groups must include the cluster security group")
        if hugepages_mib is None:
            hugepages_mib = keys.EFA_HUGEPAGES_MI if instance_type.efa_supported else 0
        if hugepages_mib < 0 or hugepages_mib % keys.HUGEPAGE_SIZE_MI:
            raise ValueError(f"InstanceGroup {group_name}: hugepages_mib must be 0 or more and a multiple of "
                             f"{keys.HUGEPAGE_SIZE_MI} (2 MiB pages), got {hugepages_mib}")
        self.hugepages_mib = hugepages_mib

        self.interfaces = network_interfaces(instance_type)
        self.placement_group = (
            ec2.CfnPlacementGroup(self, "PlacementGroup", strategy="cluster") if placement_group else None
        )

        lt_data = dict(
            metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=imds_hop_limit,
                instance_metadata_tags="disabled",
            ),
            block_device_mappings=[
                _ebs(ROOT_DEVICE, root_volume_gib),
                *[_ebs(v.device_name, v.size_gib, v.iops, v.throughput_mibps) for v in volumes],
            ],
            network_interfaces=[
                ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
                    network_card_index=i.network_card_index, device_index=i.device_index,
                    interface_type=None if i.interface_type == "interface" else i.interface_type,
                    groups=list(security_groups), delete_on_termination=True,
                )
                for i in self.interfaces
            ],
            user_data=Fn.base64(user_data(local_nvme_raid0=local_nvme_raid0 and instance_type.nvme_count > 0,
                                          hugepages_mib=hugepages_mib, lustre_client=lustre_client,
                                          nvidia_toolkit=instance_type.accelerator is Accelerator.NVIDIA)),
            monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=True),
            tag_specifications=[
                ec2.CfnLaunchTemplate.TagSpecificationProperty(
                    resource_type=kind,
                    tags=[{"key": "Name", "value": f"{cluster.cluster_name}-{group_name}"},
                          {"key": keys.INSTANCE_GROUP, "value": group_name}],
                )
                for kind in ("instance", "volume", "network-interface")
            ],
        )
        if self.placement_group is not None:
            lt_data["placement"] = ec2.CfnLaunchTemplate.PlacementProperty(group_name=self.placement_group.ref)
        if reserved:
            lt_data["capacity_reservation_specification"] = ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
                capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                    capacity_reservation_id=capacity_reservation_id,
                ),
            )
        if capacity_type is CapacityType.CAPACITY_BLOCK:
            # The EKS guide's capacity-block node groups: market type, block id and the instance type all in
            # the launch template (facts: eks.capacity-block-mng); the node group then names no instance type.
            lt_data["instance_market_options"] = ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(
                market_type="capacity-block",
            )
            lt_data["instance_type"] = instance_type.name
        self.launch_template = ec2.CfnLaunchTemplate(
            self, "LaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(**lt_data),
        )

        if startup_taint is None:
            startup_taint = instance_type.is_accelerated
        all_taints = [eks.TaintSpec(key=t.key, value=t.value or None, effect=_EFFECTS[t.effect.value]) for t in taints]
        if startup_taint:
            all_taints.append(eks.TaintSpec(key=keys.STARTUP_TAINT,
                                            value=keys.STARTUP_TAINT_VALUE,
                                            effect=eks.TaintEffect.NO_SCHEDULE))

        self.nodegroup = eks.Nodegroup(
            self, "Nodegroup",
            cluster=cluster,
            enable_node_auto_repair=False,  # the node agent remediates; two repairers would race
            node_role=node_role,
            capacity_type={CapacityType.CAPACITY_BLOCK: eks.CapacityType.CAPACITY_BLOCK,
                           CapacityType.SPOT: eks.CapacityType.SPOT}.get(capacity_type, eks.CapacityType.ON_DEMAND),
            min_size=min_size, desired_size=desired_size, max_size=max_size,
            subnets=ec2.SubnetSelection(subnets=list(subnets)),
            labels=node_labels(group_name, instance_type, labels or {}),
            taints=all_taints,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number,
            ),
            # Upgrades replace at most this many nodes at a time. Accelerator groups are never force-updated:
            # a pod whose PodDisruptionBudget forbids eviction fails the update instead of being killed.
            max_unavailable=max_unavailable,
            force_update=not instance_type.is_accelerated,
        )
        # Set on the resource: the L2 checks AMI types against its own (dated)
        # list of GPU instance families, which lacks P5/P6/Trn2, and cannot
        # parse names such as p6e-gb200.36xlarge.
        cfn = self.nodegroup.node.default_child
        cfn.ami_type = ami_type(instance_type)
        if update_strategy != "DEFAULT":
            cfn.add_property_override("UpdateConfig.UpdateStrategy", update_strategy)
        if capacity_type is not CapacityType.CAPACITY_BLOCK:
            cfn.instance_types = [instance_type.name, *(t for t in spot_instance_types if t != instance_type.name)]
        if kubernetes_version is not None:
            # The node group follows the control plane: without a Version, EKS keeps the nodes at the version
            # they were created with when the cluster is upgraded.
            cfn.version = kubernetes_version
        Tags.of(self).add(keys.INSTANCE_GROUP, group_name)

    @property
    def efa_interface_count(self) -> int:
        return sum(1 for i in self.interfaces if i.interface_type in ("efa", "efa-only"))


def _ebs(device: str, size_gib: int, iops: int = 3000, throughput: int = 125):
    return ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
        device_name=device,
        ebs=ec2.CfnLaunchTemplate.EbsProperty(
            volume_size=size_gib, volume_type="gp3", iops=iops, throughput=throughput,
            encrypted=True, delete_on_termination=True,
        ),
    )

