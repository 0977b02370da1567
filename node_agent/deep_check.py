"""Deep health checks: run at node start (and on demand) before a node takes work.

Steps by hardware: DCGM diagnostics (``dcgmi diag -r N -j``) and a single-node
NCCL all-reduce (nccl-tests ``all_reduce_perf``) on NVIDIA nodes, an EFA
loopback (``fi_pingpong -p efa``) on EFA nodes, ``nccom-test`` all-reduce on
Neuron nodes. Each step's output is parsed by a pure function (tested on
recorded output); :class:`DeepCheck` runs the commands through an injectable
runner. Pass = no finding that needs a node action; a missing tool skips its
step with a message (a finding with action none).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

from openpod_core.instance_types import Accelerator, InstanceType
from node_agent.findings import Action, Finding
from node_agent.rules import rule

# ----------------------------------------------------------------------------- DCGM


def parse_dcgmi_diag(text: str) -> list[dict]:
    """Per-test results of ``dcgmi diag -r N -j`` (DCGM 3.x and 4.x JSON shapes).

    Returns ``[{"test", "gpu", "status", "warnings"}]`` with status lowercased.
    """
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in dcgmi output (run it with -j)")
    try:
        doc = json.loads(text[start:])
    except json.JSONDecodeError as e:
        raise ValueError(f"dcgmi output is not valid JSON: {e.msg} at line {e.lineno}") from None
    tests = []
    if "DCGM GPU Diagnostic" in doc:  # 3.x: categories of tests
        for cat in doc["DCGM GPU Diagnostic"].get("test_categories", []):
            tests.extend(cat.get("tests", []))
    elif "tests" in doc:  # 4.x
        tests = doc["tests"]
    else:
        raise ValueError("dcgmi JSON has neither 'DCGM GPU Diagnostic' nor 'tests'")
    out = []
    for t in tests:
        for r in t.get("results", []):
            warnings = []
            for w in r.get("warnings", []) or []:
                warnings.append(w.get("warning", str(w)) if isinstance(w, dict) else str(w))
            gpu = r.get("gpu_ids", r.get("gpu_id", r.get("entity_id", "")))
            out.append({"test": t.get("name", "?"), "gpu": str(gpu), "status": str(r.get("status", "")).lower(),
                        "warnings": warnings})
    return out


def check_dcgmi(text: str) -> list[Finding]:
    results = parse_dcgmi_diag(text)
    if not results:
        raise ValueError("dcgmi JSON lists no test results")
    out = []
    for r in results:
        if r["status"] == "fail":
            why = "; ".join(r["warnings"]) or "no detail"
            out.append(rule("dcgm-diag-fail").finding(f"dcgmi diag {r['test']} GPU {r['gpu']}: Fail: {why}",
                                                      r["gpu"], test=r["test"]))
    return out


# ----------------------------------------------------------------------------- NCCL


@dataclass
class NcclRow:
    size: int
    busbw_oop: float
    busbw_ip: float
    wrong: float  # #wrong (newer nccl-tests) or max error (older)


def parse_all_reduce_perf(text: str) -> tuple[list[NcclRow], int | None]:
    """Rows of nccl-tests ``all_reduce_perf`` output and its "Out of bounds values" count.

    Columns are found by name in the header (NVIDIA/nccl-tests@v2.19.6:src/util.cu:739-760): the first
    ``busbw``/``#wrong`` are out-of-place, the second in-place. Counting from the end of the row would read
    ``-I 1``'s per-iteration columns (i_min i_max i_p99 i_cv%) or ``-S 1``'s timestamp as bandwidth.
    """
    header = None
    for line in text.splitlines():
        if line.startswith("#") and "busbw" in line and "size" in line:
            header = line.lstrip("#").split()
            break
    if header is None:
        raise ValueError("not all_reduce_perf output (no '#  size count type ... busbw' header)")
    busbw = [i for i, h in enumerate(header) if h == "busbw"]
    wrong = [i for i, h in enumerate(header) if h in ("#wrong", "error")]  # "error" (max error): older releases
    if len(busbw) != 2 or len(wrong) != 2:
        raise ValueError(f"all_reduce_perf header without two busbw and #wrong columns: {' '.join(header)}")
    need = max(busbw + wrong) + 1
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or line.lstrip().startswith("#") or not parts[0].isdigit() or len(parts) < need:
            continue
        try:
            rows.append(NcclRow(size=int(parts[0]), busbw_oop=float(parts[busbw[0]]), busbw_ip=float(parts[busbw[1]]),
                                wrong=max(_num(parts[wrong[0]]), _num(parts[wrong[1]]))))
        except ValueError:
            continue
    m = re.search(r"Out of bounds values\s*:\s*(\d+)", text)
    return rows, (int(m.group(1)) if m else None)


def _num(s: str) -> float:
    return 0.0 if s in ("N/A", "-") else float(s)


def check_nccl(text: str, floor_gbs: float) -> list[Finding]:
    rows, oob = parse_all_reduce_perf(text)
    if not rows:
        raise ValueError("all_reduce_perf printed no result rows (did it crash?)")
    out = []
    wrong = [r for r in rows if r.wrong > 0 and float(r.wrong).is_integer()]
    if wrong or oob:
        out.append(rule("nccl-wrong").finding(
            f"all_reduce_perf: {len(wrong)} sizes with #wrong > 0, out of bounds values {oob or 0}"))
    top = max(rows, key=lambda r: r.size)
    busbw = max(top.busbw_oop, top.busbw_ip)
    if floor_gbs and busbw < floor_gbs:
        out.append(rule("nccl-busbw-low").finding(
            f"all_reduce_perf busbw {busbw:.1f} GB/s at {top.size} B < floor {floor_gbs} GB/s",
            busbw_gbs=busbw, floor_gbs=floor_gbs))
    return out


# ------------------------------------------------------------------------------ EFA


def check_fi_pingpong(text: str, returncode: int) -> list[Finding]:
    """``fi_pingpong -p efa`` client output: a table of sizes where #ack must equal #sent."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 8 and re.fullmatch(r"\d+[kmg]?", parts[0]) and parts[2].startswith("="):
            rows.append((parts[0], int(parts[1]), int(parts[2].lstrip("="))))
    if returncode != 0 or not rows:
        last = text.strip().splitlines()[-1] if text.strip() else "no output"
        return [rule("efa-loopback-fail").finding(f"fi_pingpong exit {returncode}: {last}")]
    lost = [(size, sent, ack) for size, sent, ack in rows if ack != sent]
    if lost:
        return [rule("efa-loopback-fail").finding(f"fi_pingpong lost messages: {lost}")]
    return []


# ---------------------------------------------------------------------------- Neuron

# nccom-test ranks per Neuron device: its logical NeuronCores. Trn1: 2; Trn2: 8 physical cores grouped as 4 logical
# by the default LNC=2 (aws-neuron/aws-neuron-sdk@v2.32.0:about-neuron/arch/neuron-features/
# logical-neuroncore-config.rst:14, deploy/eks/prerequisites.rst:46; checked 2026-11-23). A node set to LNC=1
# has 8 per device: the check then runs on half of them.
NEURON_CORES_PER_DEVICE = {"Trainium": 2, "Trainium2": 4}


def check_nccom(text: str, returncode: int) -> list[Finding]:
    """``nccom-test -r N allr``: a size/busbw table and an 'Avg bus bandwidth' line."""
    m = re.search(r"Avg bus bandwidth:\s*([\d.]+)\s*GB/s", text)
    if returncode != 0 or not m or float(m.group(1)) <= 0:
        last = text.strip().splitlines()[-1] if text.strip() else "no output"
        return [rule("neuron-check-fail").finding(f"nccom-test exit {returncode}: {last}")]
    return []


# ---------------------------------------------------------------------------- runner

Runner = Callable[[list[str], float], tuple[int, str]]


# How long `dcgmi diag -r N` normally runs (NVIDIA dcgmi-diag reference,
# https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html, checked
# 2026-11-23): 1 "seconds", 2 "approximately two minutes", 3 "approximately 15 minutes", 4 "extended, longer-running"
# (no figure given: openpod budgets 2 hours). Seconds, rounded up; the controller's post-reboot wait is built on it.
DCGM_LEVEL_SECONDS: dict[int, float] = {1: 60.0, 2: 180.0, 3: 1200.0, 4: 7200.0}


def subprocess_runner(cmd: list[str], timeout: float) -> tuple[int, str]:
    """Run a command; FileNotFoundError when the tool is missing, TimeoutError on timeout."""
    if cmd == ["efa-loopback"]:
        return efa_loopback(timeout)
    if shutil.which(cmd[0]) is None:
        raise FileNotFoundError(cmd[0])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{cmd[0]} did not finish in {timeout:.0f}s") from None
    return p.returncode, p.stdout + p.stderr


def efa_loopback(timeout: float) -> tuple[int, str]:
    """fi_pingpong over the EFA provider against itself: a server, then a client to localhost."""
    if shutil.which("fi_pingpong") is None:
        raise FileNotFoundError("fi_pingpong")
    base = ["fi_pingpong", "-p", "efa", "-e", "rdm"]  # default port on both ends
    server = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        p = subprocess.run(base + ["localhost"], capture_output=True, text=True, timeout=timeout, check=False)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"fi_pingpong did not finish in {timeout:.0f}s") from None
    finally:
        server.kill()
        server.wait()


@dataclass
class DeepCheckConfig:
    dcgm_level: int = 2              # dcgmi diag -r: 1 quick, 2 medium (~2 min), 3 long, 4 extended
    nccl_max_bytes: str = "8G"
    timeout_seconds: float = 900.0
    efa_loopback: bool = True


@dataclass
class DeepCheckResult:
    findings: list[Finding] = field(default_factory=list)
    steps: dict[str, str] = field(default_factory=dict)  # step -> pass | fail | skipped | error

    @property
    def passed(self) -> bool:
        return all(f.action is Action.NONE for f in self.findings)


class DeepCheck:
    """Runs the steps that apply to an instance type and collects findings."""

    def __init__(self, itype: InstanceType, config: DeepCheckConfig | None = None,
                 runner: Runner = subprocess_runner):
        self.itype, self.config, self.run = itype, config or DeepCheckConfig(), runner

    def timeout(self, step: str) -> float:
        """Each step's time limit: the configured one, or for DCGM what its level needs if longer."""
        if step == "dcgm":
            return max(self.config.timeout_seconds, DCGM_LEVEL_SECONDS[self.config.dcgm_level])
        return self.config.timeout_seconds

    def steps(self) -> list[tuple[str, list[str], Callable[[str, int], list[Finding]]]]:
        t, c = self.itype, self.config
        out: list[tuple[str, list[str], Callable[[str, int], list[Finding]]]] = []
        if t.accelerator is Accelerator.NVIDIA:
            out.append(("dcgm", ["dcgmi", "diag", "-r", str(c.dcgm_level), "-j"], lambda o, rc: check_dcgmi(o)))
            if t.allreduce_busbw_floor_gbs:
                out.append(("nccl", ["all_reduce_perf", "-b", "8", "-e", c.nccl_max_bytes, "-f", "2",
                                     "-g", str(t.accelerator_count)],
                            lambda o, rc: check_nccl(o, t.allreduce_busbw_floor_gbs)))
        if t.accelerator is Accelerator.NEURON:
            cores = NEURON_CORES_PER_DEVICE.get(t.accelerator_model, 2) * t.accelerator_count
            out.append(("nccom", ["nccom-test", "-r", str(cores), "allr"], check_nccom))
        if t.efa_supported and c.efa_loopback:
            # The agent starts the fi_pingpong server itself; the client talks to it over EFA.
            out.append(("efa-loopback", ["efa-loopback"], check_fi_pingpong))
        return out

    def run_all(self) -> DeepCheckResult:
        result = DeepCheckResult()
        for name, cmd, check in self.steps():
            try:
                rc, output = self.run(cmd, self.timeout(name))
                found = check(output, rc)
                result.steps[name] = "fail" if any(f.action is not Action.NONE for f in found) else "pass"
            except FileNotFoundError as e:
                found = [rule("deep-check-tool-missing").finding(f"{name}: {e.args[0] if e.args else cmd[0]} "
                                                                 "not installed; step skipped", name)]
                result.steps[name] = "skipped"
            except (TimeoutError, ValueError) as e:
                found = [rule("deep-check-error").finding(f"{name}: {e}", name)]
                result.steps[name] = "error"
            result.findings.extend(found)
        return result
