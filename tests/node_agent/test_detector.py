"""The detector records findings on its node through the boundary; every check is isolated."""

from __future__ import annotations

import json
import threading
import time

from openpod_core import labels as L
from openpod_core.instance_types import get
from node_agent import gpu
from node_agent.config import AgentConfig
from node_agent.detector import Detector, resolve_instance_type
from node_agent.kube import InMemoryCluster, Node, Taint
from node_agent.marking import DEEP_CHECK, DEEP_CHECK_REQUEST, FAULT
from tests.node_agent.conftest import fixture_text
from tests.node_agent.test_deep_check import Replay

P5, CPU = get("p5.48xlarge"), get("m7i.2xlarge")


def make(itype=P5, taints=(), **kw):
    c = InMemoryCluster()
    c.add_node(Node("n1", labels={L.INSTANCE_TYPE: itype.name}, taints=list(taints),
                    provider_id="aws:///us-east-2a/i-0abc"))
    return c, Detector(c, "n1", itype, **kw)


class NoNvml:
    def __call__(self):
        raise gpu.ToolUnavailable("NVML unavailable: NVML Shared Library Not Found")


def test_reboot_fault_marks_the_node():
    c, d = make()
    d.on_kernel_line(fixture_text("kernel", "xid-79.log").splitlines()[1])
    n = c.get_node("n1")
    assert n.labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REBOOT
    assert n.has_taint(L.UNHEALTHY_TAINT)
    cond = n.condition(L.HEALTH_CONDITION)
    assert (cond.status, cond.reason) == ("False", "GpuFellOffBus")
    assert json.loads(n.annotations[FAULT])["fault"] == "gpu-fell-off-bus"
    assert [e.reason for e in c.events] == ["GpuFellOffBus"]


def test_replace_wins_over_reboot_and_repeats_are_idempotent():
    c, d = make()
    d.on_kernel_line(fixture_text("kernel", "xid-79.log").splitlines()[1])
    d.on_kernel_line(fixture_text("kernel", "xid-64.log").strip())
    d.on_kernel_line(fixture_text("kernel", "xid-79.log").splitlines()[1])  # weaker: no downgrade
    n = c.get_node("n1")
    assert n.labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT
    assert [t.key for t in n.taints].count(L.UNHEALTHY_TAINT) == 1
    assert json.loads(n.annotations[FAULT])["fault"] == "gpu-row-remap-failure"
    assert [e.reason for e in c.events] == ["GpuFellOffBus", "GpuRowRemapFailure"]  # the repeat is silent


def test_kmsg_records_are_unwrapped():
    from node_agent.logfollow import kmsg_message

    rec = "4,1843,5107644336,-;NVRM: Xid (PCI:0000:53:00): 79, pid=2207, name=python3, GPU has fallen off the bus."
    assert kmsg_message(rec).startswith("NVRM: Xid") and kmsg_message("plain; line") == "plain; line"


def test_application_xid_only_makes_an_event_rate_limited():
    c, d = make()
    for _ in range(5):
        d.on_kernel_line(fixture_text("kernel", "xid-13.log").splitlines()[2])
    n = c.get_node("n1")
    assert L.HEALTH_STATUS not in n.labels and not n.taints and n.condition(L.HEALTH_CONDITION) is None
    assert [e.reason for e in c.events] == ["GpuGraphicsEngineException"]


def test_missing_nvml_is_a_finding_on_a_gpu_node_and_nothing_on_a_cpu_node():
    c, d = make(P5, gpu_source_factory=NoNvml())
    (f,) = d.poll_gpu()
    assert f.rule == "gpu-tool-missing" and "p5.48xlarge" in f.evidence
    assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REBOOT
    c2, d2 = make(CPU, gpu_source_factory=NoNvml())
    assert d2.poll_gpu() == [] and c2.events == []


def test_a_crashing_check_is_reported_and_the_others_keep_running(tmp_path):
    class Broken:
        def snapshot(self):
            raise RuntimeError("driver returned garbage")

    cfg = AgentConfig()
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "mounts").write_text(fixture_text("host", "proc-1-mounts-ro.txt"))
    (proc / "meminfo").write_text(fixture_text("host", "meminfo-ok.txt"))
    cfg.host.proc_root, cfg.host.mount_prefix = str(proc), str(tmp_path)
    cfg.host.kubelet_healthz_url = "http://127.0.0.1:9/healthz"
    cfg.host.containerd_socket = str(tmp_path / "none.sock")
    c, d = make(P5, config=cfg, gpu_source_factory=lambda: Broken())
    (crash,) = d.poll_gpu()
    assert crash.rule == "check-crashed" and "driver returned garbage" in crash.evidence
    host = d.poll_host()  # still runs, finds the read-only root
    assert {"fs-readonly", "kubelet-unhealthy", "containerd-down", "lustre-client-missing"} <= {f.rule for f in host}
    assert d.metrics.check_errors.labels("gpu")._value.get() == 1


def test_recorded_gpu_faults_flow_through_the_detector():
    c, d = make(P5, gpu_source_factory=lambda: gpu.RecordedSource(fixture_text("nvidia",
                                                                               "nvidia-smi-q-h100-faulty.txt")))
    d.poll_gpu()
    assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT


def test_deep_check_pass_removes_the_startup_taint():
    run = Replay({"dcgmi": (0, fixture_text("deep", "dcgmi-diag-r2-pass.json")),
                  "all_reduce_perf": (0, fixture_text("deep", "all_reduce_perf-p5-pass.txt")),
                  "efa-loopback": (0, fixture_text("deep", "fi_pingpong-efa-pass.txt"))})
    c, d = make(P5, taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)], runner=run)
    assert d.deep_check_due()
    assert d.run_deep_check()
    n = c.get_node("n1")
    assert not n.has_taint(L.STARTUP_TAINT) and n.labels[L.HEALTH_STATUS] == L.HEALTH_SCHEDULABLE
    assert n.condition(L.HEALTH_CONDITION).status == "True"
    assert json.loads(n.annotations[DEEP_CHECK])["steps"] == {"dcgm": "pass", "nccl": "pass", "efa-loopback": "pass"}
    assert not d.deep_check_due()


def test_deep_check_fail_marks_for_replacement_and_keeps_the_taint():
    run = Replay({"dcgmi": (0, fixture_text("deep", "dcgmi-diag-r2-fail.json")),
                  "all_reduce_perf": (0, fixture_text("deep", "all_reduce_perf-p5-pass.txt")),
                  "efa-loopback": (0, fixture_text("deep", "fi_pingpong-efa-pass.txt"))})
    c, d = make(P5, taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)], runner=run)
    assert not d.run_deep_check()
    n = c.get_node("n1")
    assert n.has_taint(L.STARTUP_TAINT) and n.labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT


def test_on_demand_deep_check_by_annotation():
    c, d = make(P5)
    assert not d.deep_check_due()
    c.patch_node("n1", annotations={DEEP_CHECK_REQUEST: "1"})
    assert d.deep_check_due()


def test_unknown_instance_type_gives_a_message_not_a_crash():
    itype, problem = resolve_instance_type("p9.mega")
    assert itype is None and "unknown instance type 'p9.mega'" in problem
    assert resolve_instance_type(None)[1].startswith("instance type unknown")


def test_follows_a_real_log_file_end_to_end(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(fixture_text("kernel", "xid-48.log"))  # old content: must not be acted on
    cfg = AgentConfig()
    cfg.kernel_log.path = str(log)
    c, d = make(P5, config=cfg)
    d.start_follower()
    try:
        time.sleep(0.3)
        assert L.HEALTH_STATUS not in c.get_node("n1").labels
        with open(log, "a") as f:
            f.write(fixture_text("kernel", "xid-74.log"))
        deadline = time.time() + 5
        while L.HEALTH_STATUS not in c.get_node("n1").labels and time.time() < deadline:
            time.sleep(0.02)
        assert json.loads(c.get_node("n1").annotations[FAULT])["rule"] == "xid-74"
        # rotation: the file is replaced; the follower picks up the new one
        log.rename(tmp_path / "kern.log.1")
        log.write_text("")
        time.sleep(0.3)
        with open(log, "a") as f:
            f.write(fixture_text("kernel", "xid-64.log"))
        deadline = time.time() + 5
        while c.get_node("n1").labels[L.HEALTH_STATUS] != L.HEALTH_PENDING_REPLACEMENT and time.time() < deadline:
            time.sleep(0.02)
        assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REPLACEMENT
    finally:
        d.follower.stop()


def test_missing_kernel_log_is_reported_and_polling_continues(tmp_path):
    cfg = AgentConfig()
    cfg.kernel_log.path = str(tmp_path / "absent.log")
    c, d = make(CPU, config=cfg, gpu_source_factory=NoNvml())
    d.start_follower().join(timeout=5)
    assert any("cannot follow" in e.message for e in c.events)
    assert d.poll_gpu() == []


def test_run_loop_starts_and_stops(tmp_path):
    cfg = AgentConfig()
    cfg.kernel_log.enabled = cfg.host.enabled = cfg.deep_check.enabled = False
    cfg.efa.sys_root = str(tmp_path)
    c, d = make(CPU, config=cfg, gpu_source_factory=NoNvml())
    t = threading.Thread(target=d.run)
    t.start()
    time.sleep(0.3)
    d.stop_event.set()
    t.join(timeout=5)
    assert not t.is_alive()
    assert d.metrics.last_run.labels("efa")._value.get() > 0


def test_metrics_endpoint_serves_findings():
    import urllib.request

    from node_agent.metrics import serve
    from tests.conftest import free_port

    c, d = make()
    d.on_kernel_line(fixture_text("kernel", "xid-79.log").splitlines()[1])
    port = free_port()
    serve(d.metrics.registry, port)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'openpod_node_agent_findings_total{action="reboot",fault="gpu-fell-off-bus",rule="xid-79"} 1.0' in body
    assert "openpod_node_agent_node_action 1.0" in body


def test_disabled_deep_check_explains_why_the_startup_taint_stays(tmp_path):
    cfg = AgentConfig()
    cfg.kernel_log.enabled = cfg.host.enabled = cfg.gpu.enabled = cfg.deep_check.enabled = False
    cfg.efa.sys_root = str(tmp_path)
    c, d = make(CPU, config=cfg, taints=[Taint(L.STARTUP_TAINT, L.STARTUP_TAINT_VALUE)])
    t = threading.Thread(target=d.run)
    t.start()
    time.sleep(0.2)
    d.stop_event.set()
    t.join(timeout=5)
    assert [e.reason for e in c.events] == ["DeepCheckDisabled"]
    assert c.get_node("n1").has_taint(L.STARTUP_TAINT)


def test_fabric_registration_is_a_fault_only_after_the_grace_period():
    from node_agent import gpu

    t = [0.0]
    recorded = gpu.RecordedSource(fixture_text("nvidia", "nvidia-smi-q-h100-fabric-not-registered.txt"))
    c, d = make(P5, gpu_source_factory=lambda: recorded, clock=lambda: t[0])
    assert d.poll_gpu() == []  # Fabric Manager registers GPUs after boot
    t[0] += d.config.gpu.fabric_grace_seconds - 1
    assert d.poll_gpu() == []
    t[0] += 1
    assert {f.rule for f in d.poll_gpu()} == {"gpu-fabric-not-registered"}
    assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REBOOT


def test_the_deep_check_runs_at_its_groups_dcgm_level():
    from node_agent.config import AgentConfig

    run = Replay({"dcgmi": (0, fixture_text("deep", "dcgmi-diag-r2-pass.json"))})
    cfg = AgentConfig()
    cfg.deep_check.dcgm_level_by_group = {"p5": 4, "p5-dev": 2}
    c, d = make(P5, runner=run, config=cfg)
    c.patch_node("n1", labels={L.INSTANCE_GROUP: "p5"})
    d.run_deep_check()
    assert run.calls[0][:4] == ["dcgmi", "diag", "-r", "4"]
    c.patch_node("n1", labels={L.INSTANCE_GROUP: "elsewhere"})
    run.calls.clear()
    d.run_deep_check()
    assert run.calls[0][:4] == ["dcgmi", "diag", "-r", str(cfg.deep_check.dcgm_level)]  # not listed: default


def test_live_repeat_windows_run_on_the_log_time_like_diagnose():
    """A replayed buffer arrives in a burst: three soft lockups an hour apart in the log are not a repeat."""
    c, d = make()
    lockup = "watchdog: BUG: soft lockup - CPU#47 stuck for 23s! [kworker/47:1:1203]"
    for i in range(3):
        d.on_kernel_line(lockup, 100.0 + 3600 * i)
    assert L.HEALTH_STATUS not in c.get_node("n1").labels
    for i in range(3):
        d.on_kernel_line(lockup, 20000.0 + 10 * i)
    assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REBOOT


def test_one_block_io_error_is_watched_ten_on_one_device_reboot():
    c, d = make()
    line = "[ 880.1] I/O error, dev nvme1n1, sector 1953523712 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2"
    d.on_kernel_line(line)
    assert L.HEALTH_STATUS not in c.get_node("n1").labels
    for _ in range(9):
        d.on_kernel_line(line)
    assert c.get_node("n1").labels[L.HEALTH_STATUS] == L.HEALTH_PENDING_REBOOT
    assert json.loads(c.get_node("n1").annotations[FAULT])["rule"] == "block-io-error-repeated"


def test_the_host_poll_reports_a_node_that_cannot_mount_lustre(tmp_path):
    cfg = AgentConfig()
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "1" / "mounts").write_text("")
    (proc / "meminfo").write_text(fixture_text("host", "meminfo-ok.txt"))
    (proc / "sys" / "kernel" / "osrelease").write_text("6.12.46-66.121.amzn2023.x86_64\n")
    (proc / "filesystems").write_text("nodev\tsysfs\n\txfs\n")
    cfg.host.proc_root, cfg.host.mount_prefix, cfg.host.watched_mounts = str(proc), str(tmp_path), []
    cfg.host.kubelet_healthz_url = "http://127.0.0.1:9/healthz"
    cfg.host.containerd_socket = str(tmp_path / "none.sock")
    c, d = make(P5, config=cfg)
    assert "lustre-client-missing" in {f.rule for f in d.poll_host()}
    (proc / "filesystems").write_text("nodev\tsysfs\n\txfs\nnodev\tlustre\n")  # the client loaded
    assert "lustre-client-missing" not in {f.rule for f in d.poll_host()}
    cfg.host.lustre_client = False
    (proc / "filesystems").write_text("nodev\tsysfs\n")
    assert "lustre-client-missing" not in {f.rule for f in d.poll_host()}
