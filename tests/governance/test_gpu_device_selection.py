"""GPUs only through the device plugin (issue 23): volume-mounts device lists, the toolkit ignoring
NVIDIA_VISIBLE_DEVICES from unprivileged containers, and the exporter that watches every GPU asking the same way."""

from __future__ import annotations

from platform_constructs import device_plugins, exporters
from platform_constructs.instance_group import user_data


def test_the_nvidia_device_plugin_passes_devices_as_volume_mounts():
    values = device_plugins.CHARTS["nvidia-device-plugin"]["values"]
    assert values["deviceListStrategy"] == "volume-mounts"


def test_nvidia_nodes_configure_the_toolkit_before_kubelet_and_other_nodes_do_not():
    gpu = user_data(local_nvme_raid0=False, nvidia_toolkit=True)
    assert ("nvidia-ctk config --in-place --set accept-nvidia-visible-devices-envvar-when-unprivileged=false "
            "--set accept-nvidia-visible-devices-as-volume-mounts=true") in gpu
    assert "nvidia-ctk" not in user_data(local_nvme_raid0=False)


def test_dcgm_exporter_sees_every_gpu_through_a_dev_null_mount_and_keeps_its_counters():
    values = exporters.chart_values({})["dcgm-exporter"]
    assert values["extraHostVolumes"] == [{"name": "nvidia-all-gpus", "hostPath": "/dev/null"}]
    mounts = {m["mountPath"]: m for m in values["extraVolumeMounts"]}
    assert mounts["/var/run/nvidia-container-devices/all"]["name"] == "nvidia-all-gpus"
    assert mounts["/etc/dcgm-exporter/default-counters.csv"]["subPath"] == "default-counters.csv"
