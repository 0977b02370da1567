"""EFA device health from sysfs: device count, port state and error counters.

Reads ``<root>/class/infiniband/<dev>/ports/1/{state,hw_counters/*}`` where
root is ``/sys`` on a node (mounted read-only into the agent) and a recorded
tree in tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from openpod_core.instance_types import InstanceType
from node_agent.findings import Finding
from node_agent.rules import rule

# Counters that only rise when something is wrong (the efa driver's hw_counters).
ERROR_COUNTERS = ("rdma_read_wr_err", "rdma_write_wr_err", "rdma_read_resp_wr_err", "retrans_timeout_events",
                  "unresponsive_remote_events", "impaired_remote_conn_events")
# Traffic counters of the efa driver's port hw_counters (Linux drivers/infiniband/hw/efa/efa_verbs.c,
# EFA_DEFINE_PORT_STATS), exported as metrics only: node_exporter does not export them (facts:
# node-exporter.infiniband-efa).
TRAFFIC_COUNTERS = ("tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "recv_bytes",
                    "rdma_read_bytes", "rdma_write_bytes")


@dataclass
class EfaDevice:
    name: str
    state: str                       # e.g. "4: ACTIVE"
    counters: dict[str, int] = field(default_factory=dict)
    traffic: dict[str, int] = field(default_factory=dict)   # TRAFFIC_COUNTERS (not judged, exported)

    @property
    def active(self) -> bool:
        return self.state.split(":")[-1].strip().upper() == "ACTIVE"


def read_efa(sys_root: Path) -> list[EfaDevice]:
    base = Path(sys_root) / "class" / "infiniband"
    devices = []
    if not base.is_dir():
        return devices
    for dev in sorted(base.iterdir()):
        port = dev / "ports" / "1"
        driver = (dev / "device" / "driver")
        # EFA devices are rdmap*/efa_* names; other RDMA drivers are not ours.
        if not (dev.name.startswith(("rdmap", "efa")) or (driver.exists() and driver.resolve().name == "efa")):
            continue
        state = (port / "state").read_text().strip() if (port / "state").exists() else "unknown"
        hw = port / "hw_counters"
        devices.append(EfaDevice(dev.name, state, _read_counters(hw, ERROR_COUNTERS),
                                 _read_counters(hw, TRAFFIC_COUNTERS)))
    return devices


def _read_counters(hw: Path, names: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for name in names:
        f = hw / name
        if f.exists():
            try:
                out[name] = int(f.read_text().strip())
            except ValueError:
                pass
    return out


def check_efa(devices: list[EfaDevice], itype: InstanceType | None, *, previous: list[EfaDevice] | None = None,
              counter_threshold: int = 1000) -> list[Finding]:
    out: list[Finding] = []
    if itype is None or not itype.efa_supported:
        return out
    if len(devices) < itype.efa_count:
        out.append(rule("efa-count").finding(
            f"{len(devices)} EFA devices in /sys/class/infiniband, {itype.name} has {itype.efa_count}",
            seen=len(devices), expected=itype.efa_count))
    before = {d.name: d for d in previous or []}
    for d in devices:
        if not d.active:
            out.append(rule("efa-port-down").finding(f"{d.name} port 1 state {d.state!r}", d.name))
        prev = before.get(d.name)
        if prev:
            rises = {k: v - prev.counters.get(k, v) for k, v in d.counters.items()}
            bad = {k: n for k, n in rises.items() if n > counter_threshold}
            if bad:
                out.append(rule("efa-counters").finding(
                    f"{d.name}: " + ", ".join(f"{k} +{n}" for k, n in sorted(bad.items())), d.name))
    return out
