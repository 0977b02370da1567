"""The detector: the per-node DaemonSet process.

It follows the kernel log, polls the probes on their intervals, runs the deep
health check at start (while the startup taint is on) and on request, and
records findings on its node through the Kubernetes boundary. It never
remediates: the controller does. Every check is isolated: a missing tool, a
bad config section or an exception in one check is reported (log, Event,
metric) and the others keep running.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from openpod_core import instance_types
from openpod_core import labels as L
from openpod_core.instance_types import Accelerator, InstanceType
from node_agent import efa, gpu, host, lustre_client, neuron, scratch
from node_agent.config import AgentConfig
from node_agent.deep_check import DeepCheck, DeepCheckConfig, Runner, subprocess_runner
from node_agent.findings import Action, Finding
from node_agent.kube import Cluster
from node_agent.logfollow import LogFollower
from node_agent.marking import DEEP_CHECK, DEEP_CHECK_REQUEST, mark, mark_healthy
from node_agent.metrics import DetectorMetrics
from node_agent.nvml_events import NvmlEventWatcher
from node_agent.kernel_engine import KernelLogEngine
from node_agent.rules import REPEATS, rule
from node_agent.topology import label_own_nvlink_domain

log = logging.getLogger("node_agent.detector")

IMDS = "http://169.254.169.254/latest"
# Soft lockups: one is often load and a warning; this many within the window (log time) is soft-lockup-repeated.
SOFT_LOCKUP_REPEAT = REPEATS["soft-lockup"].count
SOFT_LOCKUP_WINDOW_S = REPEATS["soft-lockup"].window_s
# Kernel-log rules of one accelerator vendor's driver act only on that vendor's instance types: on a Neuron node
# any process with a device can write a kernel record (rules.NEURON_PRINTK), so an NVRM line there is not the
# NVIDIA driver's, and a NEURON_HW_ERR line on a GPU node is nobody's.
VENDOR_RULES = {Accelerator.NVIDIA: ("xid-", "sxid-", "gpu-"), Accelerator.NEURON: ("neuron-",)}


def vendor_rule_fits(rule_id: str, accelerator: Accelerator) -> bool:
    """False for a kernel-log rule of another accelerator vendor's driver than the node's."""
    return all(accelerator is acc or not rule_id.startswith(p) for acc, p in VENDOR_RULES.items())


# Disk faults that reboot the node when they hit its own disk (root, kubelet, containerd, local NVMe).
VOLUME_RULES = frozenset({"nvme-controller-down", "block-io-error-repeated", "xfs-log-io-error", "fs-remount-ro"})


def instance_type_from_imds(timeout: float = 1.0) -> str | None:
    """The instance type from IMDSv2 (None off EC2)."""
    try:
        req = urllib.request.Request(f"{IMDS}/api/token", method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        token = urllib.request.urlopen(req, timeout=timeout).read().decode()  # noqa: S310
        req = urllib.request.Request(f"{IMDS}/meta-data/instance-type",
                                     headers={"X-aws-ec2-metadata-token": token})
        return urllib.request.urlopen(req, timeout=timeout).read().decode().strip()  # noqa: S310
    except OSError:
        return None


def resolve_instance_type(name: str | None) -> tuple[InstanceType | None, str | None]:
    """(instance type, problem message). Unknown types switch device-count checks off, with a message."""
    if not name:
        return None, "instance type unknown (no node label, no IMDS): device-count checks are off"
    try:
        return instance_types.get(name), None
    except instance_types.UnknownInstanceType as e:
        return None, f"{e}: device-count checks are off"


@dataclass
class Detector:
    cluster: Cluster
    node_name: str
    itype: InstanceType | None
    config: AgentConfig = field(default_factory=AgentConfig)
    metrics: DetectorMetrics = field(default_factory=DetectorMetrics)
    gpu_source_factory: Callable[[], gpu.GpuSource] = gpu.NvmlSource
    nvml_events_factory: Callable[[], NvmlEventWatcher] = NvmlEventWatcher
    runner: Runner = subprocess_runner
    event_interval: float = 300.0   # the same action-none fault makes at most one Event per interval
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._action_rank = 0
        self._last_event: dict[tuple[str, str], float] = {}
        self.engine = KernelLogEngine()
        self._gpu_source: gpu.GpuSource | None = None
        self._prev_gpu: list[gpu.GpuState] | None = None
        self._fabric_pending_since: float | None = None
        self._nvlink_label: str | None = None
        self._prev_efa: list[efa.EfaDevice] | None = None
        self.stop_event = threading.Event()
        self.follower: LogFollower | None = None

    # ------------------------------------------------------------------ findings
    def report(self, findings: list[Finding]) -> None:
        for f in findings:
            self.metrics.findings.labels(f.rule, f.fault, f.action.value).inc()
            if f.action is Action.NONE:
                key, now = (f.rule, f.device), time.monotonic()
                with self._lock:
                    last = self._last_event.get(key)
                    if last is not None and now - last < self.event_interval:
                        continue
                    self._last_event[key] = now
            log.warning("%s [%s] %s", f.fault, f.action.value, f.evidence)
            try:
                if mark(self.cluster, self.node_name, f) and f.action.rank > self._action_rank:
                    self._action_rank = f.action.rank
                    self.metrics.node_action.set(self._action_rank)
            except Exception as e:  # noqa: BLE001 (the API may be briefly unavailable; retried on next finding)
                log.error("cannot record %s on node %s: %s", f.fault, self.node_name, e)

    def on_kernel_line(self, line: str, ts: float | None = None) -> bool:
        """Classify one kernel log line (``ts``: its log time, seconds since boot); True when it made a finding."""
        self.metrics.kernel_lines.inc()
        f = self.engine.feed(line, ts, now=self.clock())
        if f is not None and f.rule in VOLUME_RULES and f.device:
            f = self._data_volume(f)
        if f is not None and self.itype is not None and not vendor_rule_fits(f.rule, self.itype.accelerator):
            log.warning("%s on a %s node is not that vendor's driver: ignored (%s)", f.rule,
                        self.itype.accelerator.value, f.evidence[:200])
            f = None
        if f:
            self.report([f])
        return f is not None

    def _data_volume(self, f: Finding) -> Finding:
        """A disk fault on a hot-attached EBS data volume is the workload's, not the node's: no node action."""
        c = self.config.host
        try:
            system = host.system_block_devices((Path(c.proc_root) / "1" / "mounts").read_text(), c.watched_mounts)
        except OSError as e:
            log.warning("cannot read the host's mounts (%s): %s keeps its action", e, f.rule)
            return f
        if host.is_ebs_data_volume(f.device, system, Path(c.sys_root)):
            return rule("ebs-data-volume-failed").finding(f.evidence, device=f.device, was=f.rule)
        return f

    def _guard(self, check: str, fn: Callable[[], list[Finding]]) -> list[Finding]:
        """Run one check; an unexpected error is a finding, never the end of the agent."""
        try:
            found = fn()
        except Exception as e:  # noqa: BLE001
            log.exception("check %s failed", check)
            self.metrics.check_errors.labels(check).inc()
            found = [rule("check-crashed").finding(f"{check}: {type(e).__name__}: {e}", check)]
        self.metrics.last_run.labels(check).set_to_current_time()
        self.report(found)
        return found

    # -------------------------------------------------------------------- probes
    def poll_gpu(self) -> list[Finding]:
        def run() -> list[Finding]:
            nvidia = self.itype is not None and self.itype.accelerator is Accelerator.NVIDIA
            if self._gpu_source is None:
                try:
                    self._gpu_source = self.gpu_source_factory()
                except gpu.ToolUnavailable as e:
                    if nvidia:
                        return [rule("gpu-tool-missing").finding(f"{e} on {self.itype.name}")]
                    return []  # not a GPU node: nothing to say
            states = self._gpu_source.snapshot()
            pending = any(g.fabric_registered is False and g.fabric_state != "Completed" for g in states)
            if not pending:
                self._fabric_pending_since = None
            elif self._fabric_pending_since is None:
                self._fabric_pending_since = self.clock()
            grace_over = pending and self.clock() - self._fabric_pending_since >= self.config.gpu.fabric_grace_seconds
            if self.itype is not None and self.itype.ultraserver and nvidia:
                self._nvlink_label = label_own_nvlink_domain(self.cluster, self.node_name, states, self._nvlink_label)
            found = gpu.check_gpus(states, self.itype, previous=self._prev_gpu,
                                   nvlink_error_threshold=self.config.gpu.nvlink_error_threshold,
                                   fabric_grace_over=grace_over)
            self._prev_gpu = states
            return found
        return self._guard("gpu", run)

    def poll_neuron(self) -> list[Finding]:
        def run() -> list[Finding]:
            if self.itype is None or self.itype.accelerator is not Accelerator.NEURON:
                return []
            try:
                rc, out = self.runner(neuron.LIST_COMMAND, 60)
            except FileNotFoundError:
                return [rule("neuron-tool-missing").finding(f"neuron-ls not installed on {self.itype.name}")]
            if rc != 0:
                return [rule("neuron-tool-missing").finding(f"neuron-ls exit {rc}: {out.strip()[-200:]}")]
            return (neuron.check_neuron(neuron.parse_neuron_ls(out), self.itype)
                    + neuron.check_hw_counters(neuron.read_hw_counters(Path(self.config.neuron.sys_root))))
        return self._guard("neuron", run)

    def poll_efa(self) -> list[Finding]:
        def run() -> list[Finding]:
            devices = efa.read_efa(Path(self.config.efa.sys_root))
            found = efa.check_efa(devices, self.itype, previous=self._prev_efa,
                                  counter_threshold=self.config.efa.counter_threshold)
            self._prev_efa = devices
            for d in devices:
                self.metrics.efa_port_active.labels(d.name).set(1 if d.active else 0)
                for name, v in {**d.counters, **d.traffic}.items():
                    self.metrics.efa_counter.labels(d.name, name).set(v)
            return found
        return self._guard("efa", run)

    def poll_host(self) -> list[Finding]:
        c = self.config.host

        def run() -> list[Finding]:
            proc = Path(c.proc_root)
            found = host.read_only_mounts((proc / "1" / "mounts").read_text(), c.watched_mounts)  # host init's view
            found += host.full_mounts(host.HostPaths(proc, Path(c.mount_prefix)), c.watched_mounts,
                                      c.full_threshold_pct)
            psi = proc / "pressure" / "memory"
            found += host.memory_pressure((proc / "meminfo").read_text(), psi.read_text() if psi.exists() else None,
                                          min_available_pct=c.min_available_pct,
                                          max_psi_full_avg10=c.max_psi_full_avg10)
            found += host.kubelet_health(c.kubelet_healthz_url)
            found += host.containerd_health(c.containerd_socket)
            if c.lustre_client:
                found += lustre_client.read_and_check(proc, Path(c.mount_prefix) / "lib" / "modules")
            return found
        return self._guard("host", run)

    def sweep_scratch(self) -> list[Finding]:
        """Remove node-local checkpoint directories of jobs that are gone (no findings; a failure is one)."""
        c = self.config.scratch

        def run() -> list[Finding]:
            roots = [Path(c.mount_prefix + r) for r in c.roots]
            for r in scratch.sweep(roots, Path(self.config.host.proc_root), ttl_seconds=c.ttl_hours * 3600):
                self.metrics.scratch_removed.inc()
                self.metrics.scratch_removed_bytes.inc(r.nbytes)
            return []
        return self._guard("scratch", run)

    # ---------------------------------------------------------------- deep check
    def run_deep_check(self) -> bool:
        """Run the deep check; pass -> startup taint off and Schedulable; fail -> marked for replacement."""
        if self.itype is None:
            self.report([rule("deep-check-error").finding("instance type unknown: cannot choose deep checks")])
            return False
        d = self.config.deep_check
        group = self.cluster.get_node(self.node_name).labels.get(L.INSTANCE_GROUP, "")
        cfg = DeepCheckConfig(dcgm_level=d.dcgm_level_by_group.get(group, d.dcgm_level),
                              nccl_max_bytes=d.nccl_max_bytes,
                              timeout_seconds=d.timeout_seconds, efa_loopback=d.efa_loopback)
        started = time.time()
        result = DeepCheck(self.itype, cfg, self.runner).run_all()
        self.report(result.findings)
        self.metrics.deep_check_passed.set(1 if result.passed else 0)
        summary = {"passed": result.passed, "steps": result.steps, "seconds": round(time.time() - started, 1),
                   "at": started}
        self.cluster.patch_node(self.node_name, annotations={DEEP_CHECK: json.dumps(summary, sort_keys=True),
                                                             DEEP_CHECK_REQUEST: None})
        if result.passed:
            steps = ", ".join(f"{k} {v}" for k, v in result.steps.items()) or "no steps for this type"
            mark_healthy(self.cluster, self.node_name, f"deep health check passed ({steps})")
        return result.passed

    def deep_check_due(self) -> bool:
        node = self.cluster.get_node(self.node_name)
        if DEEP_CHECK_REQUEST in node.annotations:
            return True
        return self.config.deep_check.on_start and node.has_taint(L.STARTUP_TAINT) and \
            node.labels.get(L.HEALTH_STATUS) not in (L.HEALTH_PENDING_REPLACEMENT,)

    def _warn_startup_taint_stays(self) -> None:
        """With the deep check off, nothing lifts the startup taint: say so rather than wait silently."""
        try:
            if self.cluster.get_node(self.node_name).has_taint(L.STARTUP_TAINT):
                self.cluster.create_event(self.node_name, "DeepCheckDisabled",
                                          f"deep check disabled in the agent config: the {L.STARTUP_TAINT} taint "
                                          "stays until it is enabled or the taint is removed by hand")
        except Exception as e:  # noqa: BLE001
            log.error("cannot read node %s: %s", self.node_name, e)

    # ----------------------------------------------------------------------- run
    def start_follower(self) -> threading.Thread | None:
        if not self.config.kernel_log.enabled:
            return None
        k = self.config.kernel_log
        self.follower = LogFollower(k.path, self.on_kernel_line, state_path=k.state_path or None,
                                    boot_id_path=k.boot_id_path)

        def follow() -> None:
            try:
                self.follower.run()
            except OSError as e:
                log.error("cannot follow %s: %s; kernel-log rules are off, other checks keep running",
                          self.config.kernel_log.path, e)
                self.metrics.check_errors.labels("kernel-log").inc()
                self.report([rule("check-crashed").finding(f"kernel-log: cannot follow "
                                                           f"{self.config.kernel_log.path}: {e}", "kernel-log")])

        t = threading.Thread(target=follow, name="kernel-log", daemon=True)
        t.start()
        return t

    def start_nvml_events(self) -> threading.Thread | None:
        """On NVIDIA nodes: NVML Xid / ECC events next to the kernel log (node_agent/nvml_events.py)."""
        if not (self.config.gpu.enabled and self.config.gpu.nvml_events and self.itype is not None
                and self.itype.accelerator is Accelerator.NVIDIA):
            return None
        try:
            watcher = self.nvml_events_factory()
        except gpu.ToolUnavailable as e:
            log.warning("%s; the kernel log and polls still watch the GPUs", e)
            return None

        def listen() -> None:
            while not self.stop_event.is_set():
                try:
                    self.report(watcher.wait(1000))
                except Exception as e:  # noqa: BLE001
                    self.metrics.check_errors.labels("nvml-events").inc()
                    log.error("NVML event wait failed: %s; retrying", e)
                    self.stop_event.wait(5)
            watcher.close()

        t = threading.Thread(target=listen, name="nvml-events", daemon=True)
        t.start()
        return t

    def run(self) -> None:
        """Follow the log and poll every enabled probe until ``stop_event`` is set."""
        self.start_follower()
        self.start_nvml_events()
        c = self.config
        polls = [(name, interval, fn) for name, enabled, interval, fn in (
            ("gpu", c.gpu.enabled, c.gpu.interval_seconds, self.poll_gpu),
            ("neuron", c.neuron.enabled, c.neuron.interval_seconds, self.poll_neuron),
            ("efa", c.efa.enabled, c.efa.interval_seconds, self.poll_efa),
            ("host", c.host.enabled, c.host.interval_seconds, self.poll_host),
            ("scratch", c.scratch.enabled, c.scratch.interval_seconds, self.sweep_scratch),
        ) if enabled]
        due = {name: 0.0 for name, _, _ in polls}
        if not (c.deep_check.enabled and c.deep_check.on_start):
            self._warn_startup_taint_stays()
        next_deep_look = 0.0
        while not self.stop_event.is_set():
            now = time.monotonic()
            for name, interval, fn in polls:
                if now >= due[name]:
                    fn()
                    due[name] = now + interval
            if c.deep_check.enabled and now >= next_deep_look:
                next_deep_look = now + c.deep_check.poll_seconds
                try:
                    if self.deep_check_due():
                        self.run_deep_check()
                except Exception as e:  # noqa: BLE001
                    log.error("deep check could not run: %s", e)
            self.stop_event.wait(max(0.05, min([due[n] for n in due] + [next_deep_look]) - time.monotonic()))
        if self.follower:
            self.follower.stop()
