"""Node agent: detection latency and the detector's idle cost.

1. Latency: a real Detector follows a real log file; a fault line is appended
   and the clock stops when the node is marked through the Kubernetes boundary
   (the in-memory implementation, which calls back on every node write).
   Repeated for N injected faults (1000 by default), with the node's state reset
   between faults; p50/p99/max reported.
2. Idle cost: a separate detector process (``--idle-child``) follows a log file
   with every probe enabled at its default interval; its CPU time and resident
   memory are read from /proc over a few seconds.

Targets: p99 < 1 s, < 1% of a core, < 100 MB RSS. Run: python -m benchmarks.node_agent_latency [--quick]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from openpod_core import labels as L  # noqa: E402
from openpod_core.instance_types import get  # noqa: E402
from node_agent.config import AgentConfig  # noqa: E402
from node_agent.detector import Detector  # noqa: E402
from node_agent.kube import InMemoryCluster, Node  # noqa: E402
from node_agent.marking import FAULT  # noqa: E402

FAULT_LINES = [
    "NVRM: Xid (PCI:0000:53:00): 79, pid=2207, name=python3, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:0f:00): 64, pid=57530, Row Remapper Error: (0x00000005d28c03a0) - All reserved rows for "
    "bank are remapped",
    # (a NEURON_HW_ERR line is a claim, recorded without action, and a p5 node ignores it: docs/node-agent.md)
    "mce: [Hardware Error]: Machine check: Processor context corrupt",
    "efa 0000:31:00.0 rdmap49s0: Admin queue is closed",
]
NOISE = "[ 1234.567890] IPv6: ADDRCONF(NETDEV_CHANGE): eth1: link becomes ready"


class _NoNvml:
    def __call__(self):
        from node_agent.gpu import ToolUnavailable

        raise ToolUnavailable("no NVML on the benchmark host")


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def latency(n: int, poll: float) -> list[float]:
    cluster = InMemoryCluster()
    cluster.add_node(Node("n1", provider_id="aws:///us-east-2a/i-0abc"))
    marked = threading.Event()
    cluster.on_change.append(lambda name: marked.set())
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "kern.log"
        log.write_text(NOISE + "\n")
        cfg = AgentConfig()
        cfg.kernel_log.path = str(log)
        det = Detector(cluster, "n1", get("p5.48xlarge"), cfg, gpu_source_factory=_NoNvml())
        det.start_follower()
        det.follower.poll = poll
        time.sleep(0.3)
        out: list[float] = []
        rnd = random.Random(7)
        with open(log, "a", buffering=1) as f:
            for i in range(n):
                # reset the node (not timed) so each fault is a fresh mark
                with cluster._lock:
                    node = cluster.nodes["n1"]
                    node.labels.clear()
                    node.annotations.pop(FAULT, None)
                    node.taints.clear()
                    node.conditions.clear()
                marked.clear()
                time.sleep(rnd.uniform(0, poll))  # land anywhere in the follower's poll cycle
                for _ in range(rnd.randint(0, 3)):
                    f.write(NOISE + "\n")
                start = time.perf_counter()
                f.write(FAULT_LINES[i % len(FAULT_LINES)] + "\n")
                if not marked.wait(5.0):
                    raise SystemExit(f"fault {i} was not marked within 5 s")
                out.append(time.perf_counter() - start)
                assert L.HEALTH_STATUS in cluster.nodes["n1"].labels
        det.follower.stop()
    return out


def idle_child(log: str, kube: bool = False) -> None:
    """The measured process: a detector with every probe on, following ``log``. ``kube``: as the DaemonSet's
    entry point runs it (``python -m node_agent detector``): the official kubernetes client (KubeCluster, here
    against the tests' fake API server in the same process) and the metrics endpoint."""
    if kube:
        from node_agent.kube import KubeCluster
        from node_agent.metrics import DetectorMetrics, serve
        from tests.node_agent.fake_apiserver import FakeApiServer

        api = FakeApiServer().__enter__()
        api.add_node("n1", {})
        cluster = KubeCluster(api.client())
        metrics = DetectorMetrics()
        serve(metrics.registry, 0)
    else:
        cluster = InMemoryCluster()
        cluster.add_node(Node("n1"))
    cfg = AgentConfig()
    cfg.kernel_log.path = log
    cfg.host.proc_root, cfg.host.mount_prefix, cfg.efa.sys_root = "/proc", "/", "/sys"
    cfg.deep_check.enabled = False
    det = Detector(cluster, "n1", get("p5.48xlarge"), cfg, **({"metrics": metrics} if kube else {}),
                   gpu_source_factory=_NoNvml())
    det.run()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def idle_cost(seconds: float, kube: bool = False) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "kern.log"
        log.write_text(NOISE + "\n")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        p = subprocess.Popen([sys.executable, "-m", "benchmarks.node_agent_latency", "--idle-child", str(log)]
                             + (["--kube"] if kube else []),
                             cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # imports and the first round of probes (compiling the kubernetes client's 4.4 MB core_v1_api.py
            # takes seconds where no .pyc is cached)
            time.sleep(15.0 if kube else 3.0)
            c0, t0 = _cpu_seconds(p.pid), time.monotonic()
            time.sleep(seconds)
            c1, t1 = _cpu_seconds(p.pid), time.monotonic()
            rss = _rss_mb(p.pid)
        finally:
            p.terminate()
            p.wait(timeout=10)
    return 100.0 * (c1 - c0) / (t1 - t0), rss


def line_cost(rounds: int = 20) -> tuple[float, float]:
    """Microseconds per kernel line through the rule engine: (recorded fault lines, routine lines)."""
    try:
        from node_agent.kernel_engine import KernelLogEngine

        feed = KernelLogEngine().feed
    except ImportError:  # before the engine existed: the matcher alone
        from node_agent.rules import match_kernel_line as feed
    faults = [ln for p in sorted((ROOT / "tests" / "node_agent" / "fixtures" / "kernel").glob("*.log"))
              for ln in p.read_text().splitlines() if ln and not ln.startswith("#")]
    routine = [NOISE, "[  12.3] nvme nvme0: 32/0/0 default/read/poll queues", "[ 5.1] NVRM: loading NVIDIA UNIX",
               "[ 9.9] ena 0000:00:05.0: Elastic Network Adapter (ENA) v2.8.0g", "[ 3.2] rcu: Hierarchical RCU",
               "[ 7.7] XFS (nvme0n1p1): Ending clean mount", "[ 8.8] EXT4-fs (nvme1n1): mounted filesystem",
               "[ 4.4] audit: type=1400 audit(1700000000.000:2): apparmor=\"STATUS\"",
               "[ 6.6] IPv6: ADDRCONF(NETDEV_UP): eth0: link is not ready"]
    out = []
    for lines in (faults, routine):
        start = time.perf_counter()
        for _ in range(rounds):
            for ln in lines:
                feed(ln)
        out.append(1e6 * (time.perf_counter() - start) / (rounds * len(lines)))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 faults, 5 s idle sample")
    ap.add_argument("--faults", type=int, default=None)
    ap.add_argument("--idle-child", metavar="LOG", help=argparse.SUPPRESS)
    ap.add_argument("--kube", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--idle-only", action="store_true", help="only the idle samples (in-memory and kube client)")
    args = ap.parse_args()
    logging.getLogger("node_agent").setLevel(logging.ERROR)  # findings are expected here; keep the report clean
    if args.idle_child:
        idle_child(args.idle_child, args.kube)
        return
    if args.idle_only:
        for kube in (False, True):
            cpu, rss = idle_cost(5.0 if args.quick else 20.0, kube)
            print(f"idle detector ({'kubernetes client + metrics' if kube else 'in-memory cluster'}): "
                  f"CPU {cpu:.3f}% of a core, RSS {rss:.1f} MB")
        return
    n = args.faults or (100 if args.quick else 1000)
    poll = 0.1  # LogFollower default
    lat = latency(n, poll)
    p50, p99, worst = _pct(lat, 50), _pct(lat, 99), max(lat)
    cpu, rss = idle_cost(5.0 if args.quick else 20.0, kube=True)
    print("node agent: detection latency and idle cost")
    print(f"  faults injected: {n} (follower poll {poll * 1000:.0f} ms; line appended -> node marked via boundary)")
    print(f"  latency  p50 {p50 * 1000:7.1f} ms   p99 {p99 * 1000:7.1f} ms   max {worst * 1000:7.1f} ms   "
          f"mean {statistics.mean(lat) * 1000:.1f} ms")
    print(f"  idle detector process (kubernetes client, metrics endpoint): CPU {cpu:.3f}% of a core, "
          f"RSS {rss:.1f} MB")
    fault_us, routine_us = line_cost()
    print(f"  rule engine: {routine_us:.1f} us per routine kernel line, {fault_us:.1f} us per recorded fault line")
    print("  vs targets (figure / target, < 1 is within target):")
    print(f"    p99 latency {p99:.3f} s / 1 s       = {p99 / 1.0:.3f}")
    print(f"    idle CPU    {cpu:.3f}% / 1%        = {cpu / 1.0:.3f}")
    print(f"    idle RSS    {rss:.1f} MB / 100 MB   = {rss / 100.0:.3f}")


if __name__ == "__main__":
    main()
