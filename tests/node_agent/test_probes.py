"""GPU (nvidia-smi / NVML), Neuron, EFA and host probes on recorded outputs."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from openpod_core.instance_types import get
from node_agent import efa, gpu, host, neuron
from node_agent.findings import Action
from tests.node_agent.conftest import fixture_text, materialize_sysfs
from tests.node_agent.nvml_lib import LibNvml, loaded

P5, TRN2, CPU = get("p5.48xlarge"), get("trn2.48xlarge"), get("m7i.2xlarge")


def rules(findings):
    return sorted(f.rule for f in findings)


# ------------------------------------------------------------------------------ GPU
@pytest.mark.parametrize("name", ["nvidia-smi-q-h100-healthy.txt", "query-gpu-healthy.csv"])
def test_healthy_h100_node_has_no_findings(name):
    gpus = gpu.parse_recorded(fixture_text("nvidia", name))
    assert len(gpus) == 8 and all(g.bus_id for g in gpus)
    assert gpu.check_gpus(gpus, P5) == []


def test_nvidia_smi_q_faults():
    gpus = gpu.parse_recorded(fixture_text("nvidia", "nvidia-smi-q-h100-faulty.txt"))
    found = gpu.check_gpus(gpus, P5)
    assert rules(found) == sorted(["gpu-count", "gpu-thermal", "gpu-dbe", "gpu-remap-pending", "gpu-remap-failure",
                                   "gpu-pcie-degraded", "gpu-reset-required", "gpu-power-brake"])
    by = {f.rule: f for f in found}
    assert by["gpu-dbe"].device == "00000000:3A:00.0" and "2 volatile" in by["gpu-dbe"].evidence
    assert by["gpu-remap-failure"].action is Action.REPLACE
    assert by["gpu-count"].details == {"seen": 7, "expected": 8}
    assert by["gpu-thermal"].action is Action.NONE and by["gpu-power-brake"].action is Action.NONE


def test_csv_and_q_formats_agree_on_shared_fields():
    q = gpu.parse_recorded(fixture_text("nvidia", "nvidia-smi-q-h100-faulty.txt"))
    c = gpu.parse_recorded(fixture_text("nvidia", "query-gpu-faulty.csv"))
    fields = ("bus_id", "uuid", "dbe_volatile", "remap_pending", "remap_failure", "hw_thermal_slowdown",
              "hw_power_brake", "pcie_width", "pcie_width_max")
    assert [[getattr(g, f) for f in fields] for g in q] == [[getattr(g, f) for f in fields] for g in c]


# Drivers of the 580 era print, after "Clocks Event Reasons", a "Clocks Event Reasons Counters" block: the time
# (microseconds) each reason was active, under some of the same key names ("HW Thermal Slowdown : 0 us"). NVIDIA's
# own NVML mock renders it for a 580-era nvidia-smi (NVIDIA/k8s-test-infra#691, merged 2026-08-21: "the
# `nvidia-smi -q` `Clocks Event Reasons Counters` block ... SW Power Capping or HW Thermal Slowdown time ...
# defaulting to `0 us`"); a recorded driver 580.173.02 ``nvidia-smi -q`` shows the block's five lines: SW Power
# Capping, Sync Boost, SW Thermal Slowdown, HW Thermal Slowdown, HW Power Braking. Checked 2026-11-25.
COUNTERS_580 = """    Clocks Event Reasons Counters
        SW Power Capping                  : 12234991553 us
        Sync Boost                        : 0 us
        SW Thermal Slowdown               : 11591399010 us
        HW Thermal Slowdown               : {hw_thermal_us} us
        HW Power Braking                  : 0 us
"""


def _with_counters(text: str, hw_thermal_us: int) -> str:
    """A recorded driver-550 ``nvidia-smi -q`` as a 580 driver prints it: the counters block after the reasons."""
    block = COUNTERS_580.format(hw_thermal_us=hw_thermal_us)
    return text.replace("        Display Clock Setting             : Not Active\n",
                        "        Display Clock Setting             : Not Active\n" + block)


@pytest.mark.parametrize("hw_thermal_us", [0, 5_000_000])
def test_the_580_counters_block_does_not_hide_the_thermal_flag(hw_thermal_us):
    """The old parser took the last "HW Thermal Slowdown" line, the counter ("0 us"): state unknown on every GPU,
    while NVML read the flag. A counter of past slowdown time is not an active slowdown either."""
    healthy = fixture_text("nvidia", "nvidia-smi-q-h100-healthy.txt")
    assert "Clocks Event Reasons Counters" not in healthy
    gpus = gpu.parse_recorded(_with_counters(healthy, hw_thermal_us))
    assert len(gpus) == 8 and [g.hw_thermal_slowdown for g in gpus] == [False] * 8
    assert [g.hw_power_brake for g in gpus] == [False] * 8 and gpu.check_gpus(gpus, P5) == []
    faulty = gpu.parse_recorded(_with_counters(fixture_text("nvidia", "nvidia-smi-q-h100-faulty.txt"), hw_thermal_us))
    before = gpu.parse_recorded(fixture_text("nvidia", "nvidia-smi-q-h100-faulty.txt"))
    assert [g.hw_thermal_slowdown for g in faulty] == [g.hw_thermal_slowdown for g in before]
    assert True in [g.hw_thermal_slowdown for g in faulty]
    # drivers before the rename print "Clocks Throttle Reasons" (kubeflow/kubeflow#68, a 2018 nvidia-smi -q)
    older = fixture_text("nvidia", "nvidia-smi-q-h100-faulty.txt").replace("Clocks Event Reasons\n",
                                                                            "Clocks Throttle Reasons\n")
    assert [g.hw_thermal_slowdown for g in gpu.parse_recorded(older)] == [g.hw_thermal_slowdown for g in before]


def test_gpu_count_only_on_gpu_instance_types():
    gpus = gpu.parse_recorded(fixture_text("nvidia", "query-gpu-healthy.csv"))[:3]
    assert rules(gpu.check_gpus(gpus, P5)) == ["gpu-count"]
    assert gpu.check_gpus(gpus, CPU) == [] and gpu.check_gpus(gpus, None) == []


def test_nvlink_status_and_error_counters():
    base = gpu.parse_recorded(fixture_text("nvidia", "query-gpu-healthy.csv"))
    healthy = gpu.merge_nvlink(base, fixture_text("nvidia", "nvlink-s-healthy.txt"))
    assert all(len(g.nvlink_active) == 18 for g in healthy) and gpu.check_gpus(healthy, P5) == []
    down = gpu.merge_nvlink(gpu.parse_recorded(fixture_text("nvidia", "query-gpu-healthy.csv")),
                            fixture_text("nvidia", "nvlink-s-link-down.txt"))
    (f,) = gpu.check_gpus(down, P5)
    assert f.rule == "gpu-nvlink-down" and "[11]" in f.evidence and f.device == "00000000:BA:00.0"
    before = gpu.merge_nvlink(gpu.parse_recorded(fixture_text("nvidia", "query-gpu-healthy.csv")),
                              errors_text=fixture_text("nvidia", "nvlink-e-before.txt"))
    after = gpu.merge_nvlink(gpu.parse_recorded(fixture_text("nvidia", "query-gpu-healthy.csv")),
                             errors_text=fixture_text("nvidia", "nvlink-e-after.txt"))
    assert gpu.check_gpus(after, P5) == []  # counters alone are not a fault: only a rise between polls
    (f,) = gpu.check_gpus(after, P5, previous=before, nvlink_error_threshold=100)
    assert f.rule == "gpu-nvlink-errors" and f.action is Action.NONE and "6301" in f.evidence


@pytest.mark.parametrize("text", ["", "hello\n", "index\n0, 1", "{}"])
def test_unrecognised_gpu_output_is_a_clear_error(text):
    with pytest.raises(ValueError, match="nvidia-smi"):
        gpu.parse_recorded(text)


def test_nvml_is_missing_here_and_says_so():
    with pytest.raises(gpu.ToolUnavailable, match="NVML unavailable"):
        gpu.NvmlSource()


# --------------------------------------------------------------------------- Neuron
def test_neuron_device_count():
    ok = neuron.parse_neuron_ls(fixture_text("neuron", "neuron-ls-trn2-healthy.json"))
    assert len(ok) == 16 and neuron.check_neuron(ok, TRN2) == []
    (f,) = neuron.check_neuron(neuron.parse_neuron_ls(fixture_text("neuron", "neuron-ls-trn2-missing.json")), TRN2)
    assert f.rule == "neuron-count" and "missing [11]" in f.evidence
    assert neuron.check_neuron([], P5) == []  # not a Neuron node


def test_neuron_ls_garbage_is_a_clear_error():
    with pytest.raises(ValueError, match="neuron-ls"):
        neuron.parse_neuron_ls("neuron-ls: command not found")


# ------------------------------------------------------------------------------ EFA
def test_efa_healthy(tmp_path):
    root = materialize_sysfs(fixture_text("efa", "p5-sysfs-healthy.txt"), tmp_path)
    devices = efa.read_efa(root)
    assert len(devices) == P5.efa_count == 32
    assert efa.check_efa(devices, P5, previous=devices) == []


def test_efa_missing_device_port_down_and_counter_rise(tmp_path):
    before = efa.read_efa(materialize_sysfs(fixture_text("efa", "p5-sysfs-healthy.txt"), tmp_path / "a"))
    after = efa.read_efa(materialize_sysfs(fixture_text("efa", "p5-sysfs-faulty.txt"), tmp_path / "b"))
    found = efa.check_efa(after, P5, previous=before, counter_threshold=1000)
    assert rules(found) == ["efa-count", "efa-counters", "efa-port-down"]
    by = {f.rule: f for f in found}
    assert "retrans_timeout_events +52000" in by["efa-counters"].evidence
    assert by["efa-port-down"].action is Action.REBOOT and "DOWN" in by["efa-port-down"].evidence


def test_efa_absent_is_a_finding_only_where_efa_belongs(tmp_path):
    assert rules(efa.check_efa(efa.read_efa(tmp_path), P5)) == ["efa-count"]
    assert efa.check_efa(efa.read_efa(tmp_path), CPU) == []


# ----------------------------------------------------------------------------- host
def test_read_only_mounts():
    watched = ["/", "/var/lib/kubelet", "/local"]
    found = host.read_only_mounts(fixture_text("host", "proc-1-mounts-ro.txt"), watched)
    assert sorted(f.device for f in found) == ["/", "/var/lib/kubelet"]
    assert host.read_only_mounts(fixture_text("host", "proc-1-mounts-rw.txt"), watched) == []


def test_memory_pressure():
    found = host.memory_pressure(fixture_text("host", "meminfo-low.txt"),
                                 fixture_text("host", "pressure-memory-high.txt"),
                                 min_available_pct=3, max_psi_full_avg10=40)
    assert len(found) == 2 and all(f.rule == "memory-pressure" for f in found)
    assert host.memory_pressure(fixture_text("host", "meminfo-ok.txt"), fixture_text("host", "pressure-memory-ok.txt"),
                                min_available_pct=3, max_psi_full_avg10=40) == []


def test_full_filesystem(tmp_path):
    (tmp_path / "local").mkdir()
    assert host.full_mounts(host.HostPaths(mount_prefix=tmp_path), ["/local"], threshold_pct=100.0) == []
    (f,) = host.full_mounts(host.HostPaths(mount_prefix=tmp_path), ["/local", "/absent"], threshold_pct=0.0001)
    assert f.rule == "fs-full" and f.device == "/local"


class _Healthz(http.server.BaseHTTPRequestHandler):
    body = b"ok"

    def do_GET(self):  # noqa: N802
        self.send_response(200 if self.body == b"ok" else 500)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


def test_kubelet_healthz_against_a_real_http_server():
    srv = http.server.HTTPServer(("127.0.0.1", 0), _Healthz)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}/healthz"
    try:
        assert host.kubelet_health(url) == []
        _Healthz.body = b"[-]syncloop failed"
        (f,) = host.kubelet_health(url)
        assert f.rule == "kubelet-unhealthy" and "500" in f.evidence
    finally:
        _Healthz.body = b"ok"
        srv.shutdown()
    (f,) = host.kubelet_health(url, timeout=0.5)  # nothing listening any more
    assert f.rule == "kubelet-unhealthy"


def test_containerd_socket(tmp_path):
    path = str(tmp_path / "containerd.sock")
    (f,) = host.containerd_health(path)
    assert f.rule == "containerd-down"
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(1)
    try:
        assert host.containerd_health(path) == []
    finally:
        s.close()


# ------------------------------------------------------------ GPU lost, NVSwitch fabric
def test_fabric_registration_from_nvidia_smi_q():
    """nvidia-smi -q prints a ``Fabric`` block (State, Status) per GPU on NVSwitch systems (driver 550 output in
    nvidia-smi-q-h100-healthy.txt). The fixture with two GPUs not registered is that output with GPU 2 "In
    Progress" and GPU 5 "Not Started": the states NVML enumerates (NVML_GPU_FABRIC_STATE_*) and that
    NVIDIA/NVSentinel#883/#889 report from nodes whose Fabric Manager was down (checked 2026-11-23)."""
    healthy = gpu.parse_recorded(fixture_text("nvidia", "nvidia-smi-q-h100-healthy.txt"))
    assert {(g.fabric_state, g.fabric_status) for g in healthy} == {("Completed", "Success")}
    assert all(g.fabric_registered for g in healthy)
    gpus = gpu.parse_recorded(fixture_text("nvidia", "nvidia-smi-q-h100-fabric-not-registered.txt"))
    found = gpu.check_gpus(gpus, P5)
    assert rules(found) == ["gpu-fabric-not-registered"] * 2
    assert {f.action for f in found} == {Action.REBOOT} and {f.fault for f in found} == {"nvlink-fabric-not-registered"}
    assert "In Progress" in found[0].evidence and "Not Started" in found[1].evidence
    assert gpu.check_gpus(gpus, P5, fabric_grace_over=False) == []  # still within the boot-time grace


def test_nvml_gpu_is_lost_and_a_fabric_error():
    """Through the real nvidia-ml-py over a libnvidia-ml stand-in (tests/node_agent/nvml_lib.py): pynvml hands
    ``busId`` back as str (its structures decode bytes, pynvml.py:1212-1222), and the fabric probe's structure
    must go by pointer. The old NvmlSource called ``.decode()`` on it: AttributeError on every real GPU node."""
    with loaded(LibNvml(lost={3}, fabric_error={1})) as nvml:
        gpus = gpu.NvmlSource(nvml=nvml).snapshot()
    assert len(gpus) == 8 and [g.index for g in gpus if g.lost] == [3]
    assert gpus[0].bus_id == "00000000:18:00.0" and gpus[0].uuid.startswith("GPU-00000000")
    assert gpus[1].fabric_state == "Completed" and gpus[1].fabric_status == "Unknown Error"
    assert gpus[0].fabric_registered and gpus[0].nvlink_active == [True] * 18 and gpus[0].nvlink_errors == 0
    assert (gpus[0].pcie_width, gpus[0].pcie_width_max, gpus[0].dbe_volatile) == (16, 16, 0)
    assert (gpus[0].remap_pending, gpus[0].remap_failure, gpus[0].hw_thermal_slowdown) == (False, False, False)
    found = {f.rule: f for f in gpu.check_gpus(gpus, P5)}
    assert sorted(found) == ["gpu-fabric-error", "gpu-lost"]  # 8 enumerated: not also a count finding
    assert found["gpu-lost"].action is Action.REBOOT and "GPU is lost" in found["gpu-lost"].evidence
    assert found["gpu-fabric-error"].fault == "nvlink-fabric-error" and found["gpu-fabric-error"].device.endswith(
        "19:00.0")


def test_nvml_reads_hw_thermal_slowdown():
    with loaded(LibNvml(gpus=2, thermal={1})) as nvml:
        gpus = gpu.NvmlSource(nvml=nvml).snapshot()
    assert [g.hw_thermal_slowdown for g in gpus] == [False, True]
    assert [f.rule for f in gpu.check_gpus(gpus, None)] == ["gpu-thermal"]


# Neuron hardware counters in sysfs as the driver creates them: each device's kobject gets stats/hardware/ with one
# attribute file per counter, mem_ecc_uncorrected, mem_ecc_repairable_uncorrected and sram_ecc_uncorrected, each
# printing "%u\n" (aws-neuron/aws-neuron-driver@fca19f7df31b44cbbffaf121230a66df6f59d118:neuron_sysfs_metrics.c:
# 146-150,328-360,927-955 and v2/neuron_dhal_v2.c:849-857): files, not the {total,present} counter directories the
# sysfs user guide describes for other counters (aws-neuron-sdk tools/neuron-sys-tools/neuron-sysfs-user-guide.rst).
def _neuron_sysfs(root, devices=16, guide_layout=False, **totals):
    for n in range(devices):
        hw = root / "devices" / "virtual" / "neuron_device" / f"neuron{n}" / "stats" / "hardware"
        hw.mkdir(parents=True)
        for c in ("mem_ecc_uncorrected", "mem_ecc_repairable_uncorrected", "sram_ecc_uncorrected"):
            if guide_layout:  # the guide's generic counter shape: a directory with total and present
                (hw / c).mkdir()
                (hw / c / "total").write_text(f"{totals.get(f'{c}_{n}', 0)}\n")
                (hw / c / "present").write_text("0\n")
            else:
                (hw / c).write_text(f"{totals.get(f'{c}_{n}', 0)}\n")
    return root


def test_neuron_hardware_counters_from_sysfs(tmp_path):
    healthy = neuron.read_hw_counters(_neuron_sysfs(tmp_path / "a"))
    assert len(healthy) == 16 and healthy[3] == {"mem_ecc_uncorrected": 0, "mem_ecc_repairable_uncorrected": 0,
                                                "sram_ecc_uncorrected": 0}
    assert neuron.check_hw_counters(healthy) == []
    bad = neuron.read_hw_counters(_neuron_sysfs(tmp_path / "b", mem_ecc_uncorrected_5=2, sram_ecc_uncorrected_7=1,
                                                mem_ecc_repairable_uncorrected_1=3))
    found = {(f.rule, f.device, f.action.value) for f in neuron.check_hw_counters(bad)}
    assert found == {("neuron-hbm-ecc-uncorrected", "5", "replace"), ("neuron-sram-ecc-uncorrected", "7", "replace"),
                     ("neuron-hbm-ecc-repairable", "1", "none")}
    assert neuron.read_hw_counters(tmp_path / "no-driver") == {}  # no sysfs tree: nothing to read


def test_neuron_counters_in_the_guides_counter_directories_are_read_too(tmp_path):
    bad = neuron.read_hw_counters(_neuron_sysfs(tmp_path, devices=2, guide_layout=True, sram_ecc_uncorrected_1=4))
    assert bad[1]["sram_ecc_uncorrected"] == 4 and bad[0] == {c: 0 for c in neuron.HW_COUNTERS}


def test_the_detector_reads_the_neuron_counters(tmp_path):
    from node_agent.config import AgentConfig
    from tests.node_agent.test_detector import make
    from tests.node_agent.test_deep_check import Replay

    cfg = AgentConfig.model_validate({"neuron": {"sys_root": str(_neuron_sysfs(tmp_path, sram_ecc_uncorrected_2=1))}})
    _, d = make(TRN2, config=cfg, runner=Replay({"neuron-ls": (0, fixture_text("neuron", "neuron-ls-trn2-healthy.json"))}))
    assert [f.rule for f in d.poll_neuron()] == ["neuron-sram-ecc-uncorrected"]


def test_the_detector_exports_each_efa_devices_counters(tmp_path):
    """node_exporter 1.12.1 does not export EFA's hw_counters (facts: node-exporter.infiniband-efa), so the agent does."""
    from node_agent.config import AgentConfig
    from tests.node_agent.test_detector import make

    root = materialize_sysfs(fixture_text("efa", "p5-sysfs-healthy.txt"), tmp_path)
    cfg = AgentConfig.model_validate({"efa": {"sys_root": str(root)}})
    _, d = make(P5, config=cfg)
    assert d.poll_efa() == []
    value = d.metrics.registry.get_sample_value
    assert value("openpod_node_agent_efa_counter", {"device": "rdmap79s0", "counter": "rx_bytes"}) == 91823719283
    assert value("openpod_node_agent_efa_counter", {"device": "rdmap79s0", "counter": "rdma_read_wr_err"}) == 0
    assert value("openpod_node_agent_efa_port_active", {"device": "rdmap79s0"}) == 1
