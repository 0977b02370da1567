"""Host health: read-only or full filesystems, memory pressure, kubelet and containerd."""

from __future__ import annotations

import os
import re
import socket
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from openpod_core.facts.register import value
from node_agent.findings import Finding
from node_agent.rules import rule


@dataclass
class HostPaths:
    """Where the host's files are inside the agent container (``/host/...``) or a test tree."""

    proc: Path = Path("/proc")
    mount_prefix: Path = Path("/")   # a watched mount /x is stat'ed at mount_prefix/x


def read_only_mounts(mounts_text: str, watched: list[str]) -> list[Finding]:
    """Findings for watched mount points that /proc/mounts lists with the ``ro`` option."""
    out = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[1] not in watched:
            continue
        if "ro" in parts[3].split(","):
            out.append(rule("fs-readonly").finding(f"/proc/mounts: {line.strip()}", parts[1]))
    return out


def full_mounts(paths: HostPaths, watched: list[str], threshold_pct: float) -> list[Finding]:
    out = []
    for mount in watched:
        target = paths.mount_prefix / mount.lstrip("/")
        try:
            st = os.statvfs(target)
        except OSError:
            continue  # not mounted on this node type (e.g. no local NVMe)
        if not st.f_blocks:
            continue
        used = 100.0 * (st.f_blocks - st.f_bavail) / st.f_blocks
        if used >= threshold_pct:
            out.append(rule("fs-full").finding(f"{mount} is {used:.1f}% full (threshold {threshold_pct}%)", mount))
    return out


def memory_pressure(meminfo_text: str, psi_text: str | None, *, min_available_pct: float,
                    max_psi_full_avg10: float) -> list[Finding]:
    info = {}
    for line in meminfo_text.splitlines():
        key, _, rest = line.partition(":")
        if rest.split():
            info[key.strip()] = int(rest.split()[0])
    out = []
    total, avail = info.get("MemTotal"), info.get("MemAvailable")
    if total and avail is not None and 100.0 * avail / total < min_available_pct:
        out.append(rule("memory-pressure").finding(
            f"MemAvailable {avail} kB of {total} kB ({100.0 * avail / total:.1f}% < {min_available_pct}%)"))
    for line in (psi_text or "").splitlines():
        if line.startswith("full "):
            fields = dict(kv.split("=") for kv in line.split()[1:])
            avg10 = float(fields.get("avg10", 0))
            if avg10 > max_psi_full_avg10:
                out.append(rule("memory-pressure").finding(f"/proc/pressure/memory: {line.strip()}"))
    return out


def kubelet_health(url: str, timeout: float = 2.0) -> list[Finding]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (fixed local URL from config)
            body = r.read(64).decode(errors="replace").strip()
            if r.status == 200 and body == "ok":
                return []
            return [rule("kubelet-unhealthy").finding(f"GET {url} -> {r.status} {body!r}")]
    except OSError as e:
        return [rule("kubelet-unhealthy").finding(f"GET {url} failed: {e}")]


def containerd_health(socket_path: str, timeout: float = 2.0) -> list[Finding]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(socket_path)
        return []
    except OSError as e:
        return [rule("containerd-down").finding(f"connect {socket_path} failed: {e.strerror or e}")]
    finally:
        s.close()


# EBS volumes appear as NVMe controllers whose model is "Amazon Elastic Block Store"; instance store disks as
# "Amazon EC2 NVMe Instance Storage" (AWS EC2 User Guide, "Amazon EBS and NVMe": "The EBS volumes are exposed as
# NVMe block devices"; `nvme id-ctrl` / sysfs model, checked 2026-11-28).
EBS_MODEL = value("aws.ebs-nvme-model")
_NVME = re.compile(r"(nvme\d+)(?:n\d+(?:p\d+)?)?$")


def system_block_devices(mounts_text: str, watched: list[str]) -> set[str]:
    """Base names of the block devices behind the watched mounts (/, kubelet, containerd, local NVMe) and their
    NVMe controllers: a failing one of these is the node's own disk."""
    out: set[str] = set()
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in watched and parts[0].startswith("/dev/"):
            name = parts[0].rsplit("/", 1)[-1]
            out.add(name)
            m = _NVME.match(name)
            if m:
                out.add(m.group(1))
    return out


def is_ebs_data_volume(device: str, system: set[str], sys_root: Path) -> bool:
    """True for an EBS volume that backs none of the watched mounts (a hot-attached data volume)."""
    m = _NVME.match(device)
    if not m or m.group(1) in system or device in system:
        return False
    try:
        model = (sys_root / "class" / "nvme" / m.group(1) / "model").read_text().strip()
    except OSError:
        return False
    return model == EBS_MODEL
