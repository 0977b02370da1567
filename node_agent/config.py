"""Agent and controller configuration (a YAML file, one section per check).

Each section is validated on its own: a bad section is reported with its field,
what was wrong and what is allowed, that check runs with its defaults disabled
(``enabled: false``) and every other check keeps running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from openpod_core.labels import JOB_SCRATCH_ROOTS


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True


class KernelLogConfig(_Section):
    path: str = Field("/dev/kmsg", description="/dev/kmsg (journald where it cannot be opened), journald, or a log "
                                               "file to follow (e.g. /var/log/messages)")
    state_path: str = Field("", description="file keeping the boot id and the last /dev/kmsg record (or journald "
                                            "cursor) handled, on a hostPath: a restarted agent resumes there "
                                            "instead of acting twice; empty: none (every start reads this boot's "
                                            "log from its first record)")
    boot_id_path: str = Field("/proc/sys/kernel/random/boot_id", description="the kernel's boot id")


class GpuConfig(_Section):
    interval_seconds: float = Field(30.0, gt=0)
    nvlink_error_threshold: int = Field(100, ge=0)
    nvml_events: bool = Field(True, description="also listen for NVML Xid / double-bit ECC events (a kernel log "
                                                "line that was missed or rate-limited still raises the fault)")
    fabric_grace_seconds: float = Field(600.0, ge=0, description="NVSwitch fabric registration may stay Not Started "
                                                                 "/ In Progress this long after the agent first "
                                                                 "sees it (boot) before it is a fault")


class NeuronConfig(_Section):
    interval_seconds: float = Field(60.0, gt=0)
    sys_root: str = Field("/host/sys", description="the host's /sys inside the agent container (hardware counters)")


class EfaConfig(_Section):
    interval_seconds: float = Field(30.0, gt=0)
    sys_root: str = Field("/host/sys", description="the host's /sys inside the agent container")
    counter_threshold: int = Field(1000, ge=0)


class HostConfig(_Section):
    interval_seconds: float = Field(30.0, gt=0)
    proc_root: str = Field("/host/proc", description="the host's /proc inside the agent container")
    sys_root: str = Field("/host/sys", description="the host's /sys inside the agent container (disk models)")
    mount_prefix: str = Field("/host", description="where the host's / is mounted in the agent container")
    watched_mounts: list[str] = ["/", "/var/lib/kubelet", "/var/lib/containerd", "/local"]
    full_threshold_pct: float = Field(95.0, gt=0, le=100)
    min_available_pct: float = Field(3.0, ge=0, le=100)
    max_psi_full_avg10: float = Field(40.0, ge=0, le=100)
    kubelet_healthz_url: str = "http://127.0.0.1:10248/healthz"
    containerd_socket: str = "/run/containerd/containerd.sock"
    lustre_client: bool = Field(True, description="check that the node can mount FSx for Lustre (every node's "
                                                  "user data installs the client: node_agent/lustre_client.py)")


class ScratchConfig(_Section):
    """Cleanup of per-job node-local checkpoint directories (see node_agent/scratch.py)."""

    interval_seconds: float = Field(600.0, gt=0)
    ttl_hours: float = Field(24.0, gt=0, description="remove a job's directory once idle this long and unmounted")
    roots: list[str] = Field(list(JOB_SCRATCH_ROOTS), description="host paths holding <team>/<job> directories")
    mount_prefix: str = Field("/host-scratch", description="where the agent container mounts each root "
                                                           "(prefix + host path)")


class DeepCheckSection(_Section):
    on_start: bool = True
    poll_seconds: float = Field(30.0, gt=0, description="how often the node is read for the startup taint / request")
    dcgm_level: int = Field(2, ge=1, le=4, description="dcgmi diag -r level: 1 quick .. 4 extended")
    dcgm_level_by_group: dict[str, int] = Field({}, description="per instance group (the node's "
                                                "openpod.io/instance-group label), from the cluster spec")
    nccl_max_bytes: str = Field("8G", pattern=r"^\d+[KMG]?$")
    timeout_seconds: float = Field(900.0, gt=0)
    efa_loopback: bool = True


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metrics_port: int = Field(9101, ge=1, le=65535)
    kernel_log: KernelLogConfig = KernelLogConfig()
    gpu: GpuConfig = GpuConfig()
    neuron: NeuronConfig = NeuronConfig()
    efa: EfaConfig = EfaConfig()
    host: HostConfig = HostConfig()
    deep_check: DeepCheckSection = DeepCheckSection()
    scratch: ScratchConfig = ScratchConfig()


class GroupConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hot_spares: int = Field(0, ge=0)
    dcgm_level: int | None = Field(None, ge=1, le=4, description="the group's deep-check DCGM level (sets its "
                                                                 "post-reboot wait); default: dcgm_level")
    instance_type: str | None = Field(None, description="the group's instance type (the two-node check's tool and "
                                                        "floor); default: the node's instance-type label")
    pair_check_image: str | None = Field(None, description="set: new and rebooted nodes are held until a two-node "
                                                           "all-reduce in this image passes "
                                                           "(node_agent/pair_runner.py)")


class LeaderElectionConfig(BaseModel):
    """The controller's Lease (coordination.k8s.io/v1). Defaults are client-go's / kube-controller-manager's
    (--leader-elect-lease-duration=15s, --leader-elect-renew-deadline=10s, --leader-elect-retry-period=2s)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description="off only for a single replica (e.g. a local dry run)")
    lease_name: str = "node-remediation"
    namespace: str = "openpod-system"
    lease_duration_seconds: float = Field(15.0, gt=0, description="a silent leader is replaced after this")
    renew_deadline_seconds: float = Field(10.0, gt=0, description="a leader that cannot renew stops acting after "
                                                                  "this (< lease_duration_seconds)")
    retry_period_seconds: float = Field(2.0, gt=0, description="renew / acquire attempt interval")

    @model_validator(mode="after")
    def _ordered(self):
        if not self.lease_duration_seconds > self.renew_deadline_seconds > 1.2 * self.retry_period_seconds:
            raise ValueError("need lease_duration_seconds > renew_deadline_seconds > 1.2 x retry_period_seconds "
                             f"(got {self.lease_duration_seconds}, {self.renew_deadline_seconds}, "
                             f"{self.retry_period_seconds})")
        return self


class ControllerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    region: str | None = None
    poll_seconds: float = Field(10.0, gt=0)
    drain_timeout_seconds: float = Field(600.0, gt=0, description="after this, act even if pods remain")
    escalation_window_seconds: float = Field(24 * 3600.0, gt=0,
                                             description="a second reboot for the same fault within it -> replace")
    budget_max_nodes: int = Field(2, ge=1, description="remediations in flight per group, at most")
    dcgm_level: int = Field(2, ge=1, le=4, description="the nodes' deep-check DCGM level: sets the post-reboot wait")
    budget_max_percent: float = Field(10.0, gt=0, le=100, description="... and at most this % of the group")
    reboot_cap: int = Field(3, ge=1, le=10, description="reboots of one node (any fault class) within "
                                                 "reboot_cap_window_seconds; the next fault replaces it")
    reboot_cap_window_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    retry_base_seconds: float = Field(10.0, gt=0, description="first wait after a failed step of one node "
                                                              "(doubling, jittered)")
    retry_max_seconds: float = Field(600.0, gt=0, description="cap of that wait")
    groups: dict[str, GroupConfig] = {}
    pair_check_timeout_seconds: float = Field(1800.0, gt=0, description="the two-node check's Job deadline "
                                              "(image pull, SSH start-up, the all-reduce); past it the node fails "
                                              "the check")
    metrics_port: int = Field(9102, ge=1, le=65535)
    leader_election: LeaderElectionConfig = LeaderElectionConfig()


def _problem(section: str, err: dict) -> str:
    where = ".".join(str(p) for p in (section, *err["loc"]) if p != "")
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    elif "input" in err and not isinstance(err["input"], (dict, list)):
        msg = f"{msg} (got {err['input']!r})"
    return f"{where}: {msg}"


def load_agent_config(path: str | Path | None) -> tuple[AgentConfig, list[str]]:
    """Load the agent config; returns (config, problems). Never raises on bad content."""
    problems: list[str] = []
    data: Any = {}
    if path:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as e:
            problems.append(f"{path}: cannot read config ({e.strerror}); using defaults")
        except yaml.YAMLError as e:
            problems.append(f"{path}: not valid YAML ({getattr(e, 'problem', e)}); using defaults")
    if not isinstance(data, dict):
        problems.append(f"{path}: config must be a mapping of sections; using defaults")
        data = {}
    values: dict[str, Any] = {}
    for name, fld in AgentConfig.model_fields.items():
        if name not in data:
            continue
        model = fld.annotation
        try:
            if isinstance(model, type) and issubclass(model, BaseModel):
                values[name] = model.model_validate(data[name])
            else:
                values[name] = AgentConfig.model_validate({name: data[name]}).__dict__[name]
        except ValidationError as e:
            problems.extend(_problem(name, err) for err in e.errors())
            if isinstance(model, type) and issubclass(model, _Section):
                values[name] = model(enabled=False)
                problems.append(f"{name}: check disabled until the config is fixed; other checks keep running")
    for extra in sorted(set(data) - set(AgentConfig.model_fields)):
        problems.append(f"{extra}: unknown section; allowed: {', '.join(AgentConfig.model_fields)}")
    return AgentConfig(**values), problems


def load_controller_config(path: str | Path | None) -> ControllerConfig:
    """Load the controller config; raises ValueError with one line per problem."""
    if not path:
        return ControllerConfig()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: cannot load: {e}") from None
    try:
        return ControllerConfig.model_validate(data)
    except ValidationError as e:
        raise ValueError("\n".join(f"{path}: {_problem('', err)}" for err in e.errors())) from None
