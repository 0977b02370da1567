"""Every rule in the table is produced by at least one recorded fixture through the real code path."""

from __future__ import annotations

from openpod_core.instance_types import get
from node_agent import deep_check as dc
from node_agent import efa, gpu, host, neuron
from node_agent.config import load_agent_config
from node_agent.detector import Detector
from node_agent.kube import InMemoryCluster, Node
from node_agent.kernel_engine import KernelLogEngine
from node_agent.kernel_match import match_kernel_line
from node_agent.rules import REPEATS, RULES, SXID_ENTRIES, XID_ENTRIES, rule
from tests.node_agent.conftest import FIXTURES, fixture_text, materialize_sysfs
from tests.node_agent.test_deep_check import Replay
from tests.node_agent.test_xid_catalog import xid_line

P5, TRN2 = get("p5.48xlarge"), get("trn2.48xlarge")


def test_every_rule_is_exercised(tmp_path):
    seen = set()
    for p in (FIXTURES / "kernel").glob("*.log"):
        fed = KernelLogEngine()  # CPER records span lines
        seen |= {f.rule for f in map(fed.feed, p.read_text().splitlines()) if f}
    q = gpu.parse_recorded(fixture_text("nvidia", "nvidia-smi-q-h100-faulty.txt"))
    seen |= {f.rule for f in gpu.check_gpus(q, P5)}
    base = lambda: gpu.parse_recorded(fixture_text("nvidia", "query-gpu-healthy.csv"))  # noqa: E731
    before = gpu.merge_nvlink(base(), errors_text=fixture_text("nvidia", "nvlink-e-before.txt"))
    after = gpu.merge_nvlink(base(), fixture_text("nvidia", "nvlink-s-link-down.txt"),
                             fixture_text("nvidia", "nvlink-e-after.txt"))
    seen |= {f.rule for f in gpu.check_gpus(after, P5, previous=before)}
    fabric = gpu.parse_recorded(fixture_text("nvidia", "nvidia-smi-q-h100-fabric-not-registered.txt"))
    seen |= {f.rule for f in gpu.check_gpus(fabric, P5)}
    from tests.node_agent.nvml_lib import LibNvml, loaded  # libnvidia-ml with a lost GPU and a fabric error

    with loaded(LibNvml(lost={3}, fabric_error={1})) as nvml:
        seen |= {f.rule for f in gpu.check_gpus(gpu.NvmlSource(nvml=nvml).snapshot(), P5)}
    seen |= {f.rule for f in neuron.check_neuron(neuron.parse_neuron_ls(
        fixture_text("neuron", "neuron-ls-trn2-missing.json")), TRN2)}
    e0 = efa.read_efa(materialize_sysfs(fixture_text("efa", "p5-sysfs-healthy.txt"), tmp_path / "a"))
    e1 = efa.read_efa(materialize_sysfs(fixture_text("efa", "p5-sysfs-faulty.txt"), tmp_path / "b"))
    seen |= {f.rule for f in efa.check_efa(e1, P5, previous=e0)}
    seen |= {f.rule for f in host.read_only_mounts(fixture_text("host", "proc-1-mounts-ro.txt"), ["/"])}
    (tmp_path / "local").mkdir()
    seen |= {f.rule for f in host.full_mounts(host.HostPaths(mount_prefix=tmp_path), ["/local"], 0.0001)}
    seen |= {f.rule for f in host.memory_pressure(fixture_text("host", "meminfo-low.txt"), None,
                                                  min_available_pct=3, max_psi_full_avg10=40)}
    seen |= {f.rule for f in host.kubelet_health("http://127.0.0.1:9/healthz", timeout=0.5)}
    seen |= {f.rule for f in host.containerd_health(str(tmp_path / "no.sock"))}
    seen |= {f.rule for f in dc.check_dcgmi(fixture_text("deep", "dcgmi-diag-r2-fail.json"))}
    seen |= {f.rule for f in dc.check_nccl(fixture_text("deep", "all_reduce_perf-p5-slow.txt"), 380)}
    seen |= {f.rule for f in dc.check_nccl(fixture_text("deep", "all_reduce_perf-p5-wrong.txt"), 380)}
    seen |= {f.rule for f in dc.check_fi_pingpong(fixture_text("deep", "fi_pingpong-efa-fail.txt"), 1)}
    seen |= {f.rule for f in dc.check_nccom(fixture_text("deep", "nccom-test-allr-fail.txt"), 1)}
    seen |= {f.rule for f in neuron.check_hw_counters({0: {c: 1 for c in neuron.HW_COUNTERS}})}
    seen |= {f.rule for f in dc.DeepCheck(P5, runner=Replay({"all_reduce_perf": (0, "garbage")})).run_all().findings}
    # Missing tools on the hardware that needs them.
    c = InMemoryCluster()
    c.add_node(Node("g"))
    c.add_node(Node("t"))

    def no_nvml():
        raise gpu.ToolUnavailable("NVML unavailable")

    seen |= {f.rule for f in Detector(c, "g", P5, gpu_source_factory=no_nvml).poll_gpu()}
    seen |= {f.rule for f in Detector(c, "t", TRN2, runner=Replay({})).poll_neuron()}
    seen |= {f.rule for f in Detector(c, "g", P5, gpu_source_factory=lambda: 1 / 0).poll_gpu()}
    engine = KernelLogEngine()  # repeat rules: the same line again within the window
    for name in ("soft-lockup", "block-io-error"):
        line = next(x for x in fixture_text("kernel", f"{name}.log").splitlines() if match_kernel_line(x))
        seen |= {engine.feed(line).rule for _ in range(REPEATS[name].count)}
    # A hot-attached EBS data volume's disk fault (the detector reads the host's mounts and disk models).
    from tests.node_agent.test_host_rules import _host_tree

    vol = Detector(c, "g", P5, config=_host_tree(tmp_path / "vol"))
    vol.on_kernel_line("nvme nvme1: Removing after probe failure status: -19", 1.0)
    seen |= {labels[0] for labels in vol.metrics.findings._metrics}
    # Bad configuration.
    (tmp_path / "bad.yaml").write_text("gpu: {interval_seconds: 0}\n")
    _, problems = load_agent_config(tmp_path / "bad.yaml")
    seen |= {rule("config-invalid").finding(p).rule for p in problems}
    # Catalog Xid rows: every code through the real matcher, in the driver's line format (see test_xid_catalog.py).
    seen |= {match_kernel_line(xid_line(code)).rule for code in XID_ENTRIES if code != 154}
    seen |= {match_kernel_line(f"nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): {c}, Fatal, x").rule for c in SXID_ENTRIES}
    assert set(RULES) - seen == set()
