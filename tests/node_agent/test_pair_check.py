"""The two-node all-reduce check: its Job's shape, the parsing of all_reduce_perf's table and the decision.

The recorded outputs (fixtures/deep/all_reduce_perf-2node-*.txt) follow nccl-tests v2.19.6's stdout layout:
NVIDIA/nccl-tests@v2.19.6:src/util.cu:457 (size count type redop root), 497-513 (time algbw busbw #wrong per
half, the timestamp after the in-place half with -S 1), 739-760 (headers, including -I 1's per-iteration
columns i_min i_max i_p99 i_cv% after each half) and 777-780 (footer). Their bandwidth figures are
illustrative, not measured.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from node_agent import deep_check as dc
from node_agent import pair_check as pc
from openpod_core import labels as L
from openpod_core.instance_types import get
from tests.node_agent.conftest import fixture_text

P5, TRN2, C6IN, M7I = get("p5.48xlarge"), get("trn2.48xlarge"), get("c6in.32xlarge"), get("m7i.2xlarge")
PAIR = ("ip-10-0-1-17.ec2.internal", "ip-10-0-2-9.ec2.internal")


# ------------------------------------------------------------------ parsing
def test_the_per_iteration_columns_are_not_read_as_bandwidth():
    rows, oob = dc.parse_all_reduce_perf(fixture_text("deep", "all_reduce_perf-2node-p5-slow-per-iter.txt"))
    top = max(rows, key=lambda r: r.size)
    assert (top.size, top.busbw_oop, top.busbw_ip, top.wrong) == (8589934592, 121.00, 120.39, 0) and oob == 0
    assert len(rows) == 31


def test_a_timestamped_table_parses():
    rows, _ = dc.parse_all_reduce_perf(fixture_text("deep", "all_reduce_perf-2node-p5-pass-timestamps.txt"))
    assert len(rows) == 31 and max(rows, key=lambda r: r.size).busbw_oop == 362.0


# ------------------------------------------------------------------ decision
def test_the_floor_is_half_the_nodes_efa_bandwidth():
    assert pc.floor_gbs(P5) == 0.5 * 32 * 100 / 8 == 200.0
    assert pc.floor_gbs(M7I) == 0  # no EFA: only correctness is checked


def test_a_healthy_pair_passes_and_a_slow_one_fails():
    ok = pc.decide(fixture_text("deep", "all_reduce_perf-2node-p5-pass.txt"), P5)
    assert ok.passed and ok.busbw_gbs == 362.0 and ok.floor_gbs == 200.0
    slow = pc.decide(fixture_text("deep", "all_reduce_perf-2node-p5-slow-per-iter.txt"), P5)
    assert not slow.passed and slow.busbw_gbs == 121.0
    assert [f.rule for f in slow.findings] == ["nccl-busbw-low"]


def test_wrong_results_fail_whatever_the_speed():
    text = fixture_text("deep", "all_reduce_perf-2node-p5-pass.txt")
    lines = text.splitlines()
    i = max(i for i, line in enumerate(lines) if line.strip().startswith("8589934592"))
    parts = lines[i].split()
    parts[8] = "1024"  # out-of-place #wrong of the largest size
    lines[i] = "  ".join(parts)
    assert [f.rule for f in pc.decide("\n".join(lines), P5).findings] == ["nccl-wrong"]


def test_a_crashed_run_is_an_error_not_a_pass():
    with pytest.raises(ValueError, match="all_reduce_perf"):
        pc.decide("mpirun noticed that process rank 3 ... exited on signal 11 (Segmentation fault).\n", P5)


# ------------------------------------------------------------------ the Job
def _by_kind(objs):
    return {o["kind"]: o for o in objs}


def test_the_nvidia_job_pins_one_pod_to_each_node_with_gpus_efa_and_hugepages():
    objs = pc.job("pair-p5-1", P5, PAIR, "example.com/nccl-tests:2.19.6")
    assert [o["kind"] for o in objs] == ["Secret", "Service", "Job"]
    j = _by_kind(objs)["Job"]
    s = j["spec"]
    assert (s["completionMode"], s["completions"], s["parallelism"], s["backoffLimit"]) == ("Indexed", 2, 2, 0)
    pod = s["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": L.HOSTNAME, "operator": "In", "values": list(PAIR)}]
    (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == L.HOSTNAME and anti["labelSelector"]["matchLabels"] == s["template"]["metadata"]["labels"]
    (c,) = pod["containers"]
    assert c["image"] == "example.com/nccl-tests:2.19.6"
    assert c["resources"]["limits"] == c["resources"]["requests"] == {
        "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5120Mi", "memory": "64Gi"}
    script = c["command"][-1]
    assert "mpirun" in script and "-np 16" in script and "all_reduce_perf -b 8 -e 8G -f 2 -g 1" in script
    assert "FI_PROVIDER=efa" in script and f"pair-p5-1-1.pair-p5-1:8" in script
    assert pod["subdomain"] == _by_kind(objs)["Service"]["metadata"]["name"] == "pair-p5-1"
    assert _by_kind(objs)["Service"]["spec"]["clusterIP"] == "None"
    assert {t["key"] for t in pod["tolerations"]} == {L.STARTUP_TAINT, L.PAIR_CHECK_TAINT, L.HOT_SPARE_TAINT}
    assert s["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}


def test_the_ssh_secret_holds_a_fresh_openssh_key_pair_per_check():
    from cryptography.hazmat.primitives import serialization

    a, b = pc.ssh_secret("x")["stringData"], pc.ssh_secret("x")["stringData"]
    assert a["id_ed25519"] != b["id_ed25519"]
    key = serialization.load_ssh_private_key(a["id_ed25519"].encode(), None)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    assert a["authorized_keys"].strip() == pub
    host = serialization.load_ssh_private_key(a["ssh_host_ed25519_key"].encode(), None)
    host_pub = host.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                              serialization.PublicFormat.OpenSSH).decode()
    assert f"[x-1.x]:{pc.SSH_PORT} {host_pub}" in a["known_hosts"]


def test_cpu_groups_run_torch_with_gloo_and_no_gpu():
    j = _by_kind(pc.job("pair-c6in", C6IN, PAIR, "example.com/training:1"))["Job"]
    (c,) = j["spec"]["template"]["spec"]["containers"]
    assert c["command"][:2] == ["torchrun", "--nnodes"] and c["command"][c["command"].index("--backend") + 1] == "gloo"
    assert "nvidia.com/gpu" not in c["resources"]["limits"] and c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "1"


@pytest.mark.parametrize("kwargs,msg", [
    (dict(itype=TRN2, tool="torch"), "does not drive Neuron devices"),
    (dict(itype=TRN2, tool="nccl-tests"), "needs a nvidia instance type"),
    (dict(nodes=(PAIR[0], PAIR[0])), "two different node names"),
    (dict(itype=C6IN, tool="nccl-tests"), "needs a nvidia instance type"),
    (dict(image=""), "image is required"),
])
def test_bad_requests_are_refused_with_the_reason(kwargs, msg):
    args = dict(name="p", itype=P5, nodes=PAIR, image="i") | kwargs
    with pytest.raises(ValueError, match=msg):
        pc.job(**args)


# ------------------------------------------------------------------ Neuron: nccom-test across the pair
# nccom-test-2node-*.txt follow nccom-test's documented table (aws-neuron/aws-neuron-sdk@v2.32.0:
# tools/neuron-sys-tools/nccom-test.rst:620-634) and its failure output (lines 604-608); figures illustrative.
def test_the_neuron_job_runs_nccom_test_across_both_hosts_over_mpi():
    objs = pc.job("pair-trn2", TRN2, PAIR, "example.com/neuron-tools:2.x")
    assert [o["kind"] for o in objs] == ["Secret", "Service", "Job"]
    (c,) = _by_kind(objs)["Job"]["spec"]["template"]["spec"]["containers"]
    assert c["resources"]["limits"] == {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "16",
                                        "hugepages-2Mi": "5120Mi", "memory": "64Gi"}
    script = c["command"][-1]
    assert "nccom-test -r 128 -N 2" in script and "--hosts pair-trn2-0.pair-trn2 pair-trn2-1.pair-trn2" in script
    assert "NEURON_RT_ROOT_COMM_ID=" in script and "OMPI_MCA_plm_rsh_args=" in script


def test_a_neuron_pair_is_judged_on_nccom_tests_table():
    assert pc.floor_gbs(TRN2) == 0.5 * 16 * 200 / 8 == 200.0
    ok = pc.decide(fixture_text("deep", "nccom-test-2node-trn2-pass.txt"), TRN2)
    assert ok.passed and ok.busbw_gbs == 262.0
    slow = pc.decide(fixture_text("deep", "nccom-test-2node-trn2-slow.txt"), TRN2)
    assert not slow.passed and slow.busbw_gbs == 91.0 and [f.rule for f in slow.findings] == ["neuron-check-fail"]
    with pytest.raises(ValueError, match="nccom-test failed: 1 errors found"):
        pc.decide(fixture_text("deep", "nccom-test-2node-trn2-fail.txt"), TRN2)


# ------------------------------------------------------------------ the torch tool, run for real (gloo, 2 ranks)
def test_the_torch_tool_prints_a_table_the_same_parser_reads_and_the_decision_applies(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "training.allreduce_bench", "--backend", "gloo", "-b", "8", "-e", "256K",
                          "-n", "3", "-w", "1"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    rows, oob = dc.parse_all_reduce_perf(out.stdout)
    assert [r.size for r in rows] == [8 << i for i in range(16)] and oob == 0
    assert all(r.wrong == 0 and r.busbw_oop > 0 for r in rows[-4:])
    assert pc.decide(out.stdout, M7I).passed                 # no EFA: correctness only
    slow = pc.decide(out.stdout, C6IN)                        # gloo on one host is far below an EFA floor
    assert not slow.passed and slow.floor_gbs == 12.5


# ------------------------------------------------------------------ openpod pair-check
def test_the_cli_renders_the_job_and_decides_from_a_log(tmp_path):
    import yaml
    from click.testing import CliRunner

    from infra.cli.main import main
    from tests.conftest import EXAMPLES
    from tests.node_agent.conftest import FIXTURES

    r = CliRunner().invoke(main, ["pair-check", "render", "--spec", str(EXAMPLES / "default.yaml"), "--group", "p5", "--nodes", ",".join(PAIR),
                                  "--image", "example.com/nccl-tests:2.19.6"])
    assert r.exit_code == 0, r.output
    assert [o["kind"] for o in yaml.safe_load_all(r.stdout)] == ["Secret", "Service", "Job"]   # warnings: stderr
    ok = CliRunner().invoke(main, ["pair-check", "decide", "--spec", str(EXAMPLES / "default.yaml"), "--group", "p5",
                                   str(FIXTURES / "deep" / "all_reduce_perf-2node-p5-pass.txt")])
    assert ok.exit_code == 0 and ok.stdout.startswith("pass: busbw 362.0 GB/s, floor 200.0 GB/s"), ok.output
    slow = CliRunner().invoke(main, ["pair-check", "decide", "--spec", str(EXAMPLES / "default.yaml"), "--group", "p5",
                                     str(FIXTURES / "deep" / "all_reduce_perf-2node-p5-slow-per-iter.txt")])
    assert slow.exit_code == 1 and "nccl-busbw-low" in slow.output
    bad = CliRunner().invoke(main, ["pair-check", "render", "--spec", str(EXAMPLES / "default.yaml"), "--group", "trn2", "--nodes", ",".join(PAIR),
                                    "--image", "i", "--tool", "torch"])
    assert bad.exit_code != 0 and "Neuron" in bad.output and "Traceback" not in bad.output


def test_the_torch_tool_reports_bus_bandwidth_as_nccl_tests_defines_it():
    from training.allreduce_bench import bus_bandwidth, sizes

    # NVIDIA/nccl-tests@v2.19.6:doc/PERFORMANCE.md:63: busbw = algbw * 2(n-1)/n for all-reduce
    assert bus_bandwidth(8 << 30, 0.05, 16) == pytest.approx(((8 << 30) / 0.05 / 1e9, (8 << 30) / 0.05 / 1e9 * 30 / 16))
    assert sizes(8, 64) == [8, 16, 32, 64]


def test_decide_as_data_keeps_its_exit_code():
    import json

    import yaml
    from click.testing import CliRunner

    from infra.cli.main import main
    from tests.conftest import EXAMPLES
    from tests.node_agent.conftest import FIXTURES

    def decide(log: str, fmt: str):
        return CliRunner().invoke(main, ["pair-check", "decide", "--spec", str(EXAMPLES / "default.yaml"), "--group",
                                         "p5", str(FIXTURES / "deep" / log), "-o", fmt])

    ok, slow = decide("all_reduce_perf-2node-p5-pass.txt", "json"), decide("all_reduce_perf-2node-p5-slow-per-iter.txt",
                                                                           "json")
    assert (ok.exit_code, slow.exit_code) == (0, 1)
    assert json.loads(ok.stdout) == {"group": "p5", "instance_type": "p5.48xlarge", "verdict": "pass",
                                     "busbw_gbs": 362.0, "floor_gbs": 200.0, "findings": []}
    data = json.loads(slow.stdout)
    assert data["verdict"] == "fail" and [f["rule"] for f in data["findings"]] == ["nccl-busbw-low"]
    yml = decide("all_reduce_perf-2node-p5-slow-per-iter.txt", "yaml")
    assert yml.exit_code == 1 and yaml.safe_load(yml.stdout) == data
