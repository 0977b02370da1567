"""The instance table's facts and the EFA interface layouts derived from it."""

from __future__ import annotations

import pytest

from openpod_core import instance_types as it
from openpod_core.instance_types import EfaLayout
from platform_constructs.instance_group import ami_type, network_interfaces

EFA_TYPES = [t for t in it.INSTANCE_TYPES.values() if t.efa_supported]


@pytest.mark.parametrize("name, efa, cards", [
    ("p4d.24xlarge", 4, 4), ("p5.48xlarge", 32, 32), ("p5e.48xlarge", 32, 32), ("p5en.48xlarge", 16, 16),
    ("p6-b200.48xlarge", 8, 8), ("p6e-gb200.36xlarge", 4, 17), ("trn1.32xlarge", 8, 8),
    ("trn1n.32xlarge", 16, 16), ("trn2.48xlarge", 16, 16), ("trn2u.48xlarge", 16, 16),
])
def test_efa_devices_and_network_cards(name, efa, cards):
    t = it.get(name)
    assert (t.efa_count, t.network_cards) == (efa, cards)
    layout = network_interfaces(t)
    assert sum(i.interface_type == "efa-only" for i in layout) == efa


@pytest.mark.parametrize("t", EFA_TYPES, ids=lambda t: t.name)
def test_layout_follows_ec2_recommendation(t):
    layout = network_interfaces(t)
    assert (layout[0].network_card_index, layout[0].device_index, layout[0].interface_type) == (0, 0, "interface")
    slots = [(i.network_card_index, i.device_index) for i in layout]
    assert len(set(slots)) == len(slots)
    for i in layout[1:]:
        assert i.interface_type == "efa-only"
        assert i.network_card_index < t.network_cards
        assert i.device_index == (1 if i.network_card_index == 0 else 0)
    assert {i.network_card_index for i in layout[1:]} == set(t.efa_cards)


def test_gb200_card_0_is_ena_only_and_odd_cards_get_nothing_but_efa_only():
    t = it.get("p6e-gb200.36xlarge")
    assert t.efa_layout is EfaLayout.GB200 and 0 not in t.efa_cards
    layout = network_interfaces(t)
    assert [i for i in layout if i.network_card_index == 0] == [layout[0]]
    assert all(i.interface_type == "efa-only" for i in layout if i.network_card_index % 2)
    assert t.ultraserver and t.ultraserver.instances == 18 and t.arch == "arm64"


def test_gb200_figures_follow_the_ec2_and_eks_guides():
    # facts: ec2.p6e-gb200.efa-layout - 17 network cards; NCIs 1,3,..,15 take EFA-only at 400 Gbps; the pairs
    # [1,3] [5,7] [9,11] [13,15] feed one GPU each (400 Gbps per GPU); EC2's example puts one EFA-only interface
    # on NCI 1, 5, 9 and 13: 4 x 400 = 1600 Gbps, and the EKS guide expects vpc.amazonaws.com/efa: 4 per node.
    # facts: eks.p6e-gb200.instance-store - 3 x 7.5 TB of instance store.
    t = it.get("p6e-gb200.36xlarge")
    assert t.network_cards == 17
    assert t.efa_cards == (1, 5, 9, 13)
    assert (t.efa_gbps_per_card, t.network_gbps) == (400, 1600)
    assert (t.nvme_count, t.nvme_gb) == (3, 7500)
    gpu_pairs = [(1, 3), (5, 7), (9, 11), (13, 15)]
    assert all(sum(c in pair for c in t.efa_cards) == 1 for pair in gpu_pairs)


def test_gb200_layout_refuses_efa_on_the_ena_only_primary_card():
    from dataclasses import replace
    bad = replace(it.get("p6e-gb200.36xlarge"), efa_cards=(0, 1, 5, 9))
    with pytest.raises(ValueError, match="network card 0"):
        network_interfaces(bad)


def test_types_without_efa_get_only_the_primary_interface():
    for name in ("m7i.2xlarge", "trn1.2xlarge", "m7g.xlarge"):
        assert [(i.network_card_index, i.device_index, i.interface_type)
                for i in network_interfaces(it.get(name))] == [(0, 0, "interface")]


def test_ami_type_follows_accelerator_and_architecture():
    assert ami_type(it.get("p5.48xlarge")) == "AL2023_x86_64_NVIDIA"
    assert ami_type(it.get("p6e-gb200.36xlarge")) == "AL2023_ARM_64_NVIDIA"
    assert ami_type(it.get("trn2.48xlarge")) == "AL2023_x86_64_NEURON"
    assert ami_type(it.get("m7g.xlarge")) == "AL2023_ARM_64_STANDARD"
    assert ami_type(it.get("m7i.xlarge")) == "AL2023_x86_64_STANDARD"


def test_bandwidth_adds_up_for_efa_types():
    for t in EFA_TYPES:
        if t.accelerator is not it.Accelerator.NONE:
            assert t.efa_count * t.efa_gbps_per_card == t.network_gbps, t.name


def test_unknown_type_suggests_the_nearest_names():
    with pytest.raises(it.UnknownInstanceType) as e:
        it.get("p5.48xlarg")
    assert "p5.48xlarge" in str(e.value)


@pytest.mark.parametrize("name, vcpus, ram, count, mem, efa_gbps", [
    # facts: neuron.trn2.specs, neuron.trn1.specs (aws-neuron-sdk architecture pages)
    ("trn2.48xlarge", 192, 2048, 16, 96, 3200),
    ("trn2u.48xlarge", 192, 2048, 16, 96, 3200),
    ("trn1.32xlarge", 128, 512, 16, 32, 800),
    ("trn1n.32xlarge", 128, 512, 16, 32, 1600),
])
def test_trainium_rows_match_the_neuron_architecture_pages(name, vcpus, ram, count, mem, efa_gbps):
    t = it.get(name)
    assert (t.vcpus, t.memory_gib, t.accelerator_count, t.accelerator_memory_gib) == (vcpus, ram, count, mem)
    assert t.efa_count * t.efa_gbps_per_card == t.network_gbps == efa_gbps


def test_p5_and_p6_b200_efa_follow_the_ec2_guide():
    # facts: ec2.p5-p5e.efa (32 cards, 3200 Gbps), ec2.p6-b200.efa (8 cards x 400 Gbps EFA)
    for name in ("p5.48xlarge", "p5e.48xlarge"):
        t = it.get(name)
        assert (t.network_cards, t.efa_count, t.network_gbps) == (32, 32, 3200)
    t = it.get("p6-b200.48xlarge")
    assert (t.network_cards, t.efa_count, t.efa_gbps_per_card, t.network_gbps) == (8, 8, 400, 3200)


# DescribeInstanceTypes output recorded by Karpenter's generator (facts: ec2.describe-instance-types.recorded):
# vCPUs, memory MiB, accelerators, accelerator MiB each, instance store GB in total.
DESCRIBE_INSTANCE_TYPES = {
    "p5.48xlarge": (192, 2_097_152, 8, 81_920, 30_400),
    "trn1.2xlarge": (8, 32_768, 1, 32_768, 474),
}


@pytest.mark.parametrize("name", sorted(DESCRIBE_INSTANCE_TYPES))
def test_rows_match_ec2s_recorded_describe_instance_types(name):
    vcpus, mib, count, accel_mib, store_gb = DESCRIBE_INSTANCE_TYPES[name]
    t = it.get(name)
    assert (t.vcpus, t.memory_gib * 1024, t.accelerator_count, t.accelerator_memory_gib * 1024) == (
        vcpus, mib, count, accel_mib)
    assert t.nvme_total_gb == store_gb


# EC2's network bandwidth table (facts: ec2.network-bandwidth), in Gbps.
EC2_NETWORK_GBPS = {
    "p4d.24xlarge": 400, "p4de.24xlarge": 400, "p5.4xlarge": 100, "p5.48xlarge": 3200, "p5e.48xlarge": 3200,
    "p5en.48xlarge": 3200, "p6-b200.48xlarge": 3200, "p6e-gb200.36xlarge": 3200, "trn1.32xlarge": 800,
    "trn1n.32xlarge": 1600, "trn2.48xlarge": 3200, "trn2u.48xlarge": 3200,
}


@pytest.mark.parametrize("name", sorted(EC2_NETWORK_GBPS))
def test_network_bandwidth_is_ec2s_except_where_the_platform_wires_fewer_efa_interfaces(name):
    t = it.get(name)
    if t.efa_layout is EfaLayout.GB200:
        # the platform puts one EFA-only interface per GPU (4 x 400 Gbps, as EC2's example and the EKS guide do):
        # half of the instance's 3200 Gbps, the rest of which needs EFA on the other odd cards.
        assert (t.efa_count * t.efa_gbps_per_card, EC2_NETWORK_GBPS[name]) == (1600, 3200)
    else:
        assert t.network_gbps == EC2_NETWORK_GBPS[name]


# DescribeInstanceTypes as moto 5.2.5 records it (fact ec2.describe-instance-types.moto): every row it holds.
def _moto_instance_types() -> dict:
    import gzip
    import json
    from pathlib import Path

    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))


MOTO_TYPES = _moto_instance_types()


@pytest.mark.parametrize("name", sorted(n for n in it.INSTANCE_TYPES if n in MOTO_TYPES))
def test_rows_match_motos_recorded_describe_instance_types(name):
    """The P rows said 3840 GB per NVMe device; EC2 records 3800 (p5.4xlarge, p5e, p5en, p6-b200)."""
    t, r = it.get(name), MOTO_TYPES[name]
    disks = [(d["Count"], d["SizeInGB"]) for d in r.get("InstanceStorageInfo", {}).get("Disks", [])]
    net = r["NetworkInfo"]
    assert ([(t.nvme_count, t.nvme_gb)] if t.nvme_count else []) == disks
    assert (t.vcpus, t.memory_gib * 1024) == (r["VCpuInfo"]["DefaultVCpus"], r["MemoryInfo"]["SizeInMiB"])
    assert (t.efa_supported, t.network_cards) == (net.get("EfaSupported", False), net["MaximumNetworkCards"])
    assert t.efa_count <= net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)
    if t.accelerator is it.Accelerator.NVIDIA:
        (gpu,) = r["GpuInfo"]["Gpus"]
        assert (t.accelerator_model, t.accelerator_count, t.accelerator_memory_gib) == (
            gpu["Name"], gpu["Count"], gpu["MemoryInfo"]["SizeInMiB"] // 1024)


def test_only_p6e_gb200_is_missing_from_the_recording():
    assert [n for n in it.INSTANCE_TYPES if n not in MOTO_TYPES] == ["p6e-gb200.36xlarge"]


@pytest.mark.parametrize("name, model, gpus, vcpus, ram, efa, store", [
    # fact ec2.describe-instance-types.moto
    ("g6e.12xlarge", "L40S", 4, 48, 384, 1, (2, 1900)),
    ("g6e.48xlarge", "L40S", 8, 192, 1536, 4, (4, 1900)),
    ("g5.12xlarge", "A10G", 4, 48, 192, 1, (1, 3800)),
    ("g5.48xlarge", "A10G", 8, 192, 768, 1, (2, 3800)),
    ("g6e.xlarge", "L40S", 1, 4, 32, 0, (1, 250)),
])
def test_g_family_rows_for_inference_and_evaluation(name, model, gpus, vcpus, ram, efa, store):
    t = it.get(name)
    assert (t.accelerator, t.accelerator_model, t.accelerator_count, t.vcpus, t.memory_gib) == (
        it.Accelerator.NVIDIA, model, gpus, vcpus, ram)
    assert (t.efa_count, (t.nvme_count, t.nvme_gb)) == (efa, store)
    assert t.device_resource == "nvidia.com/gpu" and ami_type(t) == "AL2023_x86_64_NVIDIA"
    assert len([i for i in network_interfaces(t) if i.interface_type == "efa-only"]) == efa


def test_the_node_agent_counts_a_g_nodes_gpus():
    from node_agent.gpu import check_gpus

    (finding,) = check_gpus([], it.get("g6e.48xlarge"))
    assert (finding.rule, finding.evidence) == ("gpu-count", "0 GPUs visible, g6e.48xlarge has 8")
