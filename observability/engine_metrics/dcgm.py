"""Every row of dcgm-exporter's default counters at the pinned tag, enabled or commented out
(NVIDIA/dcgm-exporter@4.5.3-4.8.2:etc/default-counters.csv), with the platform's use. What runs is the chart's copy
(deployment/templates/metrics-configmap.yaml, mounted by platform_constructs/exporters.py): the same rows but for
DCGM_FI_DEV_FB_RESERVED, DCGM_FI_DRIVER_VERSION and the DCGM_EXP_* block, which it lacks. The platform replaces
that list with its own (platform_constructs/exporters.py DCGM_COUNTERS): the chart's rows and the PCIe link's
generation and width, the last two rows here (NVIDIA/DCGM@v4.5.3:dcgmlib/dcgm_fields.h)."""

from __future__ import annotations

from observability.engine_metrics.model import EngineMetric

ENGINE = "dcgm-exporter 4.5.3-4.8.2"
CSV = "NVIDIA/dcgm-exporter@4.5.3-4.8.2:etc/default-counters.csv"
FIELDS = "NVIDIA/DCGM@v4.5.3:dcgmlib/dcgm_fields.h"

_OFF = "commented out in the default counters: not collected"
_NOT_IN_CHART = "absent from the chart's ConfigMap the platform mounts (metrics-configmap.yaml): not collected"
_THROTTLE = ("commented out: not collected; throttling is read by the node agent from NVML's clock event reasons "
             "(gpu-thermal, gpu-power-brake findings)")
_ECC = "commented out: not collected; the node agent reads ECC from NVML (gpu-dbe) and the Xid catalog"
_NVLINK = "commented out: not collected; the node agent reads NVML's NVLink counters (gpu-nvlink-errors)"
_RETIRED = (f"{_OFF}; the node agent reads NVML's row remapping state instead (gpu-remap-pending, "
            "gpu-remap-failure)")
_LABEL = "a label of the other series (type label), commented out: not collected"
_USE = "utilization or use, no fault by itself: the accelerator dashboard shows GPU utilization and tensor activity"


def _d(name: str, typ: str, line: int, alerts: tuple[str, ...] = (), dashboard: bool = False,
       unused: str = "") -> EngineMetric:
    return EngineMetric(ENGINE, name, typ, f"{CSV}:{line}", alerts, dashboard, unused)


ROWS: tuple[EngineMetric, ...] = (
    _d("DCGM_FI_DEV_SM_CLOCK", "gauge", 6, unused="a clock is no fault by itself; throttling is read by the node "
       "agent (gpu-thermal, gpu-power-brake)"),
    _d("DCGM_FI_DEV_MEM_CLOCK", "gauge", 7, unused="a clock is no fault by itself; throttling is read by the node "
       "agent (gpu-thermal, gpu-power-brake)"),
    _d("DCGM_FI_DEV_MEMORY_TEMP", "gauge", 10, unused="heat that slows the GPU is NVML's thermal slowdown, read by "
       "the node agent (gpu-thermal)"),
    _d("DCGM_FI_DEV_GPU_TEMP", "gauge", 11, dashboard=True),
    _d("DCGM_FI_DEV_POWER_USAGE", "gauge", 14, dashboard=True),
    _d("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", 15, unused="energy accounting, no fault"),
    _d("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", 20, ("OpenpodGPUPCIeReplaysHigh",), True),
    _d("DCGM_FI_DEV_GPU_UTIL", "gauge", 23, dashboard=True),
    _d("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", 24, unused=_USE),
    _d("DCGM_FI_DEV_ENC_UTIL", "gauge", 25, unused="the video encoder; training does not use it"),
    _d("DCGM_FI_DEV_DEC_UTIL", "gauge", 26, unused="the video decoder; training does not use it"),
    _d("DCGM_FI_DEV_XID_ERRORS", "gauge", 29, ("OpenpodGPUXidError",), True),
    _d("DCGM_FI_DEV_POWER_VIOLATION", "counter", 30, unused=_THROTTLE),
    _d("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", 31, unused=_THROTTLE),
    _d("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "counter", 32, unused=_THROTTLE),
    _d("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "counter", 33, unused=_THROTTLE),
    _d("DCGM_FI_DEV_LOW_UTIL_VIOLATION", "counter", 34, unused=_THROTTLE),
    _d("DCGM_FI_DEV_RELIABILITY_VIOLATION", "counter", 35, unused=_THROTTLE),
    _d("DCGM_EXP_CLOCK_EVENTS_COUNT", "counter", 39, unused=f"{_OFF}, and {_NOT_IN_CHART}"),
    _d("DCGM_EXP_XID_ERRORS_COUNT", "counter", 40, unused=f"{_OFF}, and {_NOT_IN_CHART}; Xids are read from "
       "DCGM_FI_DEV_XID_ERRORS and the node agent's kernel log"),
    _d("DCGM_EXP_GPU_HEALTH_STATUS", "counter", 41, unused=f"{_OFF}, and {_NOT_IN_CHART}"),
    _d("DCGM_EXP_P2P_STATUS", "counter", 42, unused=f"{_OFF}, and {_NOT_IN_CHART}"),
    _d("DCGM_FI_DEV_FB_FREE", "gauge", 45, unused="memory use is the job's: an out-of-memory is its own error"),
    _d("DCGM_FI_DEV_FB_USED", "gauge", 46, dashboard=True),
    _d("DCGM_FI_DEV_FB_RESERVED", "gauge", 47, unused=_NOT_IN_CHART),
    _d("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", 50, unused=_ECC),
    _d("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", 51, unused=_ECC),
    _d("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", 52, unused=_ECC),
    _d("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", 53, unused=_ECC),
    _d("DCGM_FI_DEV_RETIRED_SBE", "counter", 56, unused=_RETIRED),
    _d("DCGM_FI_DEV_RETIRED_DBE", "counter", 57, unused=_RETIRED),
    _d("DCGM_FI_DEV_RETIRED_PENDING", "counter", 58, unused=_RETIRED),
    _d("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", 61, unused=_NVLINK),
    _d("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", 62, unused=_NVLINK),
    _d("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", 63, unused=_NVLINK),
    _d("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", 64, unused=_NVLINK),
    _d("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", 65, dashboard=True),
    _d("DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", "counter", 66, unused=f"{_OFF}; the all-lane total is on the dashboard"),
    _d("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", 69, unused="vGPU only; EC2 passes whole GPUs through"),
    _d("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", 72, dashboard=True),
    _d("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", 73,
       unused="correctable remaps are the GPU working as designed; a pending or failed remap is the node agent's "
       "(gpu-remap-pending, gpu-remap-failure)"),
    _d("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", 74,
       unused="the node agent reads the same NVML remap state (gpu-remap-failure: replace; "
       "OpenpodNodePendingReplacement)"),
    _d("DCGM_FI_DRIVER_VERSION", "label", 77, unused=f"a label of the other series; {_NOT_IN_CHART}"),
    _d("DCGM_FI_NVML_VERSION", "label", 78, unused=_LABEL),
    _d("DCGM_FI_DEV_BRAND", "label", 79, unused=_LABEL),
    _d("DCGM_FI_DEV_SERIAL", "label", 80, unused=_LABEL),
    _d("DCGM_FI_DEV_OEM_INFOROM_VER", "label", 81, unused=_LABEL),
    _d("DCGM_FI_DEV_ECC_INFOROM_VER", "label", 82, unused=_LABEL),
    _d("DCGM_FI_DEV_POWER_INFOROM_VER", "label", 83, unused=_LABEL),
    _d("DCGM_FI_DEV_INFOROM_IMAGE_VER", "label", 84, unused=_LABEL),
    _d("DCGM_FI_DEV_VBIOS_VERSION", "label", 85, unused=_LABEL),
    _d("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", 89, unused=_USE),
    _d("DCGM_FI_PROF_SM_ACTIVE", "gauge", 90, unused=_OFF),
    _d("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", 91, unused=_OFF),
    _d("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", 92, dashboard=True),
    _d("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", 93, unused=_USE),
    _d("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", 94, unused=_OFF),
    _d("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", 95, unused=_OFF),
    _d("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", 96, unused=_OFF),
    # also at 18-19, commented out as counters; enabled here as gauges (bytes per second)
    _d("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", 97, unused=_USE),
    _d("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", 98, unused=_USE),
    # added by the platform's counters: DCGM's replay bound is per link (OpenpodGPUPCIeReplaysHigh)
    EngineMetric(ENGINE, "DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", f"{FIELDS}:810", ("OpenpodGPUPCIeReplaysHigh",), True),
    EngineMetric(ENGINE, "DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", f"{FIELDS}:815", ("OpenpodGPUPCIeReplaysHigh",), True),
)
