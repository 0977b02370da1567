"""NVIDIA GPU health: one snapshot per GPU, from NVML live or from recorded tool output.

A :class:`GpuSource` returns ``list[GpuState]``. :class:`NvmlSource` polls NVML
through nvidia-ml-py; :func:`parse_nvidia_smi_q` and :func:`parse_query_csv`
read recorded ``nvidia-smi -q`` and ``nvidia-smi --query-gpu=... --format=csv``
output, so the same checks run offline (``diagnose``) and in tests.
:func:`check_gpus` turns snapshots into findings using the rule table.
"""

from __future__ import annotations

import csv
import ctypes
import io
import re
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from openpod_core.instance_types import Accelerator, InstanceType
from node_agent.findings import Finding
from node_agent.rules import rule

# The --query-gpu fields the agent asks for (``QUERY_FIELDS``) and the older names nvidia-smi also accepts.
QUERY_FIELDS = (
    "index", "pci.bus_id", "uuid", "ecc.errors.uncorrected.volatile.total", "remapped_rows.pending",
    "remapped_rows.failure", "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown", "pcie.link.width.current", "pcie.link.width.max",
)
QUERY_COMMAND = ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv"]


class ToolUnavailable(Exception):
    """The driver, library or tool a probe needs is not on this node."""


@dataclass
class GpuState:
    index: int
    bus_id: str = ""
    uuid: str = ""
    dbe_volatile: int | None = None          # uncorrectable ECC errors since driver load
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    reset_required: bool | None = None
    hw_thermal_slowdown: bool | None = None
    hw_power_brake: bool | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    nvlink_active: list[bool] = field(default_factory=list)
    nvlink_errors: int | None = None         # replay + recovery + CRC, summed over links
    lost: bool = False                       # NVML answered NVML_ERROR_GPU_IS_LOST ("GPU is lost")
    fabric_state: str | None = None          # NVSwitch systems: Not Started | In Progress | Completed (N/A: none)
    fabric_status: str | None = None         # meaningful once Completed: Success, else the error
    fabric_cluster_uuid: str = ""            # registered GPUs: the NVLink domain's cluster UUID (node_agent/topology.py)
    fabric_clique_id: int | None = None      # and the NVLink partition (clique) within it

    @property
    def fabric_registered(self) -> bool | None:
        """None without an NVSwitch fabric; else whether Fabric Manager registered this GPU successfully."""
        if self.fabric_state in (None, "", "N/A", "Not Supported"):
            return None
        return self.fabric_state == "Completed" and self.fabric_status == "Success"


# Fabric registration states, as nvidia-smi prints them and NVML enumerates them (NVML_GPU_FABRIC_STATE_*:
# NOT_SUPPORTED 0, NOT_STARTED 1, IN_PROGRESS 2, COMPLETED 3; nvidia-ml-py 13.615.71 pynvml.py). Sources: NVML API
# Reference, nvmlGpuFabricInfo_t (https://docs.nvidia.com/deploy/nvml-api/structnvmlGpuFabricInfo__t.html: "status
# ... must be checked only if state returns complete"); NVIDIA/NVSentinel#883 and #889 (fabric.state "Not Started"
# -> "In Progress" -> "Completed"; stuck "In Progress" when Fabric Manager is down). Checked 2026-11-23.
FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}


class GpuSource(Protocol):
    def snapshot(self) -> list[GpuState]: ...


# ------------------------------------------------------------------------ recorded output


def _yes(v: str | None) -> bool | None:
    if v is None:
        return None
    v = v.strip().lower()
    if v in ("yes", "active", "1", "true"):
        return True
    if v in ("no", "not active", "0", "false"):
        return False
    return None


def _int(v: str | None) -> int | None:
    if v is None:
        return None
    m = re.match(r"\s*(\d+)", v)
    return int(m.group(1)) if m else None


def parse_nvidia_smi_q(text: str) -> list[GpuState]:
    """Parse ``nvidia-smi -q`` (indented ``key : value`` sections, one ``GPU <bus id>`` block per GPU)."""
    if "NVSMI LOG" not in text and not re.search(r"^GPU [0-9A-Fa-f]{8}:", text, re.M):
        raise ValueError("not nvidia-smi -q output (no '==NVSMI LOG==' header or 'GPU <bus id>' block)")
    gpus: list[GpuState] = []
    cur: GpuState | None = None
    path: list[tuple[int, str]] = []  # (indent, section name)
    dbe = 0
    for raw in text.splitlines():
        if not raw.strip():
            continue
        m = re.match(r"^GPU ([0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", raw)
        if m:
            cur = GpuState(index=len(gpus), bus_id=m.group(1))
            gpus.append(cur)
            path, dbe = [], 0
            continue
        if cur is None:
            continue
        indent = len(raw) - len(raw.lstrip())
        key, sep, value = raw.strip().partition(":")
        key = key.strip()
        while path and path[-1][0] >= indent:
            path.pop()
        if not sep or not value.strip():
            path.append((indent, key))
            continue
        value = value.strip()
        sections = [p[1] for p in path]
        where = "/".join(sections[-2:])
        if key == "GPU UUID":
            cur.uuid = value
        elif key == "Minor Number" and value.isdigit():
            cur.index = int(value)
        elif sections[-2:] == ["ECC Errors", "Volatile"] and "Uncorrectable" in key:
            n = _int(value)
            if n is not None:
                dbe += n
                cur.dbe_volatile = dbe
        elif sections[-1:] == ["Remapped Rows"]:
            if key == "Pending":
                cur.remap_pending = _yes(value)
            elif key == "Remapping Failure Occurred":
                cur.remap_failure = _yes(value)
        elif sections[-1:] == ["GPU Reset Status"] and key == "Reset Required":
            cur.reset_required = _yes(value)
        elif sections[-1:] in (["Clocks Event Reasons"], ["Clocks Throttle Reasons"]) and key in (
                "HW Thermal Slowdown", "HW Power Brake Slowdown"):
            # the flags only: 580-era drivers follow them with "Clocks Event Reasons Counters", the microseconds
            # each reason was ever active, under the same names (NVIDIA/k8s-test-infra#691, checked 2026-11-25)
            setattr(cur, "hw_thermal_slowdown" if key == "HW Thermal Slowdown" else "hw_power_brake", _yes(value))
        elif where.endswith("Link Width") and key in ("Current", "Max"):
            setattr(cur, "pcie_width" if key == "Current" else "pcie_width_max", _int(value))
        elif sections[-1:] == ["Fabric"] and key in ("State", "Status"):
            setattr(cur, "fabric_state" if key == "State" else "fabric_status", value)
    return gpus


_CSV_ALIASES = {
    "clocks_throttle_reasons.hw_thermal_slowdown": "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_throttle_reasons.hw_power_brake_slowdown": "clocks_event_reasons.hw_power_brake_slowdown",
}


def parse_query_csv(text: str) -> list[GpuState]:
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv`` (header row ``index, pci.bus_id, ...``)."""
    rows = list(csv.reader(io.StringIO(text.strip()), skipinitialspace=True))
    if not rows or "index" not in [h.split(" ")[0] for h in rows[0]]:
        raise ValueError("not nvidia-smi --query-gpu csv output (first row must be a header starting with 'index')")
    header = [_CSV_ALIASES.get(h.split(" ")[0], h.split(" ")[0]) for h in rows[0]]
    gpus = []
    for row in rows[1:]:
        if len(row) != len(header):
            raise ValueError(f"nvidia-smi --query-gpu csv: a row has {len(row)} fields, the header {len(header)}: "
                             f"{', '.join(row)}")
        v = dict(zip(header, (c.strip() for c in row)))
        gpus.append(GpuState(
            index=int(v["index"]), bus_id=v.get("pci.bus_id", ""), uuid=v.get("uuid", ""),
            dbe_volatile=_int(v.get("ecc.errors.uncorrected.volatile.total")),
            remap_pending=_yes(v.get("remapped_rows.pending")),
            remap_failure=_yes(v.get("remapped_rows.failure")),
            hw_thermal_slowdown=_yes(v.get("clocks_event_reasons.hw_thermal_slowdown")),
            hw_power_brake=_yes(v.get("clocks_event_reasons.hw_power_brake_slowdown")),
            pcie_width=_int(v.get("pcie.link.width.current")), pcie_width_max=_int(v.get("pcie.link.width.max")),
        ))
    return gpus


def parse_recorded(text: str) -> list[GpuState]:
    """Either recorded format, told apart by its first line."""
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if first.startswith("index"):
        return parse_query_csv(text)
    return parse_nvidia_smi_q(text)


def merge_nvlink(gpus: list[GpuState], status_text: str = "", errors_text: str = "") -> list[GpuState]:
    """Add recorded ``nvidia-smi nvlink -s`` (link speed or ``<inactive>``) and ``nvidia-smi nvlink -e``
    (Replay / Recovery / CRC error counts per link) to snapshots, matched by GPU index."""
    by_index = {g.index: g for g in gpus}

    def blocks(text: str):
        cur = None
        for line in text.splitlines():
            m = re.match(r"^GPU (\d+): ", line)
            if m:
                cur = by_index.get(int(m.group(1)))
                if cur is None:
                    raise ValueError(f"nvlink output names GPU {m.group(1)}, not in the GPU snapshot")
            elif cur is not None and line.strip().startswith("Link"):
                yield cur, line.strip()

    for g, line in blocks(status_text):
        m = re.match(r"Link (\d+): (.+)$", line)
        if m:
            g.nvlink_active.append("inactive" not in m.group(2).lower())
    for g, line in blocks(errors_text):
        m = re.match(r"Link \d+: (?:Replay|Recovery|CRC)[\w ]* Errors?: (\d+)", line)
        if m:
            g.nvlink_errors = (g.nvlink_errors or 0) + int(m.group(1))
    return gpus


@dataclass
class RecordedSource:
    text: str

    def snapshot(self) -> list[GpuState]:
        return parse_recorded(self.text)


# ---------------------------------------------------------------------------- live NVML


def _text(v) -> str:
    """NVML strings: nvidia-ml-py 13.615.71 returns str (its structures and ``convertStrBytes`` decode,
    pynvml.py:1212-1222, 3104-3127); older bindings returned bytes."""
    return v.decode() if isinstance(v, bytes) else str(v or "")


class NvmlSource:
    """Live snapshots through nvidia-ml-py. Raises ToolUnavailable when NVML cannot load."""

    def __init__(self, nvml=None) -> None:
        """``nvml``: the pynvml module (default); tests pass a stand-in that answers as libnvidia-ml would."""
        if nvml is None:
            import pynvml as nvml

        self.nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            raise ToolUnavailable(f"NVML unavailable: {e}") from None

    def _try(self, fn, *args, default=None):
        try:
            return fn(*args)
        except self.nvml.NVMLError as e:
            if e.value == self.nvml.NVML_ERROR_GPU_IS_LOST:
                raise  # not a missing feature: the GPU is gone (handled per GPU in snapshot)
            return default

    def snapshot(self) -> list[GpuState]:
        out = []
        for i in range(self.nvml.nvmlDeviceGetCount()):
            try:
                out.append(self._gpu(i))
            except self.nvml.NVMLError as e:
                # NVML API reference, nvmlDeviceGetHandleByIndex_v2 and every device query: "NVML_ERROR_GPU_IS_LOST
                # if the target GPU has fallen off the bus or is otherwise inaccessible".
                if e.value == self.nvml.NVML_ERROR_GPU_IS_LOST:
                    out.append(GpuState(index=i, lost=True))
                elif e.value == self.nvml.NVML_ERROR_RESET_REQUIRED:
                    out.append(GpuState(index=i, reset_required=True))
                else:
                    raise
        return out

    def _fabric(self, h, s: GpuState) -> None:
        n = self.nvml
        info = n.c_nvmlGpuFabricInfo_t()
        # pynvml hands the structure to the C function as given (pynvml.py:7321-7325): by pointer, as the C
        # prototype wants (nvmlGpuFabricInfo_t*); the structure itself would be passed by value.
        if self._try(n.nvmlDeviceGetGpuFabricInfo, h, ctypes.byref(info), default=False) is False:
            return  # no fabric API (older driver) or no fabric
        s.fabric_state = FABRIC_STATES.get(int(info.state), f"state {int(info.state)}")
        if s.fabric_state == "Completed":
            s.fabric_status = "Success" if info.status == n.NVML_SUCCESS else str(n.NVMLError(info.status))
            if s.fabric_status == "Success":
                s.fabric_cluster_uuid = str(uuid.UUID(bytes=bytes(info.clusterUuid)))
                s.fabric_clique_id = int(info.cliqueId)

    def _gpu(self, i: int) -> GpuState:
        n = self.nvml
        h = n.nvmlDeviceGetHandleByIndex(i)
        pci = self._try(n.nvmlDeviceGetPciInfo, h)
        s = GpuState(index=i, bus_id=_text(getattr(pci, "busId", "")) if pci else "",
                     uuid=_text(self._try(n.nvmlDeviceGetUUID, h, default="")))
        s.dbe_volatile = self._try(n.nvmlDeviceGetTotalEccErrors, h, n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                   n.NVML_VOLATILE_ECC)
        remap = self._try(n.nvmlDeviceGetRemappedRows, h)
        if remap:
            s.remap_pending, s.remap_failure = bool(remap[2]), bool(remap[3])
        reasons = self._try(n.nvmlDeviceGetCurrentClocksEventReasons, h)
        if reasons is not None:
            s.hw_thermal_slowdown = bool(reasons & n.nvmlClocksEventReasonHwThermalSlowdown)
            s.hw_power_brake = bool(reasons & n.nvmlClocksEventReasonHwPowerBrakeSlowdown)
        s.pcie_width = self._try(n.nvmlDeviceGetCurrPcieLinkWidth, h)
        s.pcie_width_max = self._try(n.nvmlDeviceGetMaxPcieLinkWidth, h)
        errors = 0
        for link in range(n.NVML_NVLINK_MAX_LINKS):
            state = self._try(n.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                continue
            s.nvlink_active.append(bool(state))
            for counter in (n.NVML_NVLINK_ERROR_DL_REPLAY, n.NVML_NVLINK_ERROR_DL_RECOVERY,
                            n.NVML_NVLINK_ERROR_DL_CRC_FLIT):
                errors += self._try(n.nvmlDeviceGetNvLinkErrorCounter, h, link, counter, default=0) or 0
        s.nvlink_errors = errors if s.nvlink_active else None
        self._fabric(h, s)
        return s


# -------------------------------------------------------------------------------- checks


def check_gpus(gpus: list[GpuState], itype: InstanceType | None, *, previous: list[GpuState] | None = None,
               nvlink_error_threshold: int = 100, evidence_prefix: str = "",
               fabric_grace_over: bool = True) -> list[Finding]:
    """Findings for one set of GPU snapshots (``previous`` gives counter deltas).

    ``fabric_grace_over``: whether a fabric registration still Not Started / In Progress counts (Fabric Manager
    registers GPUs after boot; the live detector passes False until the grace period since it first saw the
    state has passed; a recorded snapshot is taken as it is)."""
    out: list[Finding] = []
    p = evidence_prefix
    if itype is not None and itype.accelerator is Accelerator.NVIDIA and len(gpus) < itype.accelerator_count:
        out.append(rule("gpu-count").finding(
            f"{p}{len(gpus)} GPUs visible, {itype.name} has {itype.accelerator_count}",
            seen=len(gpus), expected=itype.accelerator_count))
    before = {g.bus_id: g for g in previous or []}
    for g in gpus:
        dev = g.bus_id or str(g.index)
        tag = f"{p}GPU {g.index} ({dev})"
        if g.lost:
            out.append(rule("gpu-lost").finding(f"{tag}: NVML: GPU is lost (NVML_ERROR_GPU_IS_LOST)", dev))
            continue
        if g.fabric_registered is False:
            if g.fabric_state == "Completed":
                out.append(rule("gpu-fabric-error").finding(
                    f"{tag}: Fabric State: Completed, Status: {g.fabric_status}", dev))
            elif fabric_grace_over:
                out.append(rule("gpu-fabric-not-registered").finding(
                    f"{tag}: Fabric State: {g.fabric_state} (Fabric Manager has not registered the GPU)", dev))
        if g.dbe_volatile:
            out.append(rule("gpu-dbe").finding(f"{tag}: {g.dbe_volatile} volatile uncorrectable ECC errors", dev))
        if g.remap_failure:
            out.append(rule("gpu-remap-failure").finding(f"{tag}: Remapping Failure Occurred: Yes", dev))
        elif g.remap_pending:
            out.append(rule("gpu-remap-pending").finding(f"{tag}: Remapped Rows Pending: Yes", dev))
        if g.reset_required:
            out.append(rule("gpu-reset-required").finding(f"{tag}: Reset Required: Yes", dev))
        if g.hw_thermal_slowdown:
            out.append(rule("gpu-thermal").finding(f"{tag}: HW Thermal Slowdown: Active", dev))
        if g.hw_power_brake:
            out.append(rule("gpu-power-brake").finding(f"{tag}: HW Power Brake Slowdown: Active", dev))
        if g.pcie_width is not None and g.pcie_width_max and g.pcie_width < g.pcie_width_max:
            out.append(rule("gpu-pcie-degraded").finding(
                f"{tag}: PCIe link width x{g.pcie_width}, max x{g.pcie_width_max}", dev))
        if g.nvlink_active and any(g.nvlink_active) and not all(g.nvlink_active):
            down = [i for i, a in enumerate(g.nvlink_active) if not a]
            out.append(rule("gpu-nvlink-down").finding(f"{tag}: NVLink links inactive: {down}", dev))
        prev = before.get(g.bus_id)
        if g.nvlink_errors is not None and prev is not None and prev.nvlink_errors is not None:
            delta = g.nvlink_errors - prev.nvlink_errors
            if delta > nvlink_error_threshold:
                out.append(rule("gpu-nvlink-errors").finding(f"{tag}: NVLink error counters rose by {delta}", dev))
    return out
