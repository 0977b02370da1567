"""Deep health checks on recorded tool output, through the same runner the agent uses."""

from __future__ import annotations

import pytest

from openpod_core.instance_types import get
from node_agent import deep_check as dc
from node_agent.findings import Action
from tests.node_agent.conftest import fixture_text

P5, TRN2, CPU_EFA = get("p5.48xlarge"), get("trn2.48xlarge"), get("c6in.32xlarge")


def test_dcgmi_3x_pass_and_fail():
    assert dc.check_dcgmi(fixture_text("deep", "dcgmi-diag-r2-pass.json")) == []
    (f,) = dc.check_dcgmi(fixture_text("deep", "dcgmi-diag-r2-fail.json"))
    assert f.rule == "dcgm-diag-fail" and f.device == "5" and f.action is Action.REPLACE
    assert "GPU Memory" in f.evidence and "row remapping failed" in f.evidence


def test_dcgmi_4x_shape():
    (f,) = dc.check_dcgmi(fixture_text("deep", "dcgmi-diag-r1-dcgm4-fail.json"))
    assert (f.device, f.details["test"]) == ("2", "memory") and "double-bit" in f.evidence


@pytest.mark.parametrize("text,msg", [("Error: unable to connect to host engine", "no JSON"),
                                      ("{not json", "not valid JSON"), ('{"foo": 1}', "neither")])
def test_dcgmi_bad_output_is_a_clear_error(text, msg):
    with pytest.raises(ValueError, match=msg):
        dc.check_dcgmi(text)


def test_nccl_busbw_against_the_instance_floor():
    rows, oob = dc.parse_all_reduce_perf(fixture_text("deep", "all_reduce_perf-p5-pass.txt"))
    assert rows[-1].size == 8589934592 and rows[-1].busbw_oop == pytest.approx(477.9) and oob == 0
    assert dc.check_nccl(fixture_text("deep", "all_reduce_perf-p5-pass.txt"), P5.allreduce_busbw_floor_gbs) == []
    (f,) = dc.check_nccl(fixture_text("deep", "all_reduce_perf-p5-slow.txt"), P5.allreduce_busbw_floor_gbs)
    assert f.rule == "nccl-busbw-low" and f.details == {"busbw_gbs": 251.3, "floor_gbs": 380}


def test_nccl_wrong_results_fail_even_at_full_speed():
    (f,) = dc.check_nccl(fixture_text("deep", "all_reduce_perf-p5-wrong.txt"), P5.allreduce_busbw_floor_gbs)
    assert f.rule == "nccl-wrong"


def test_nccl_crash_output_is_an_error():
    with pytest.raises(ValueError, match="all_reduce_perf"):
        dc.check_nccl("Segmentation fault (core dumped)\n", 380)


def test_efa_loopback_and_nccom():
    assert dc.check_fi_pingpong(fixture_text("deep", "fi_pingpong-efa-pass.txt"), 0) == []
    (f,) = dc.check_fi_pingpong(fixture_text("deep", "fi_pingpong-efa-fail.txt"), 1)
    assert f.rule == "efa-loopback-fail" and "No data available" in f.evidence
    lost = fixture_text("deep", "fi_pingpong-efa-pass.txt").replace("=10      5k", "=7       5k")
    assert dc.check_fi_pingpong(lost, 0)[0].rule == "efa-loopback-fail"
    assert dc.check_nccom(fixture_text("deep", "nccom-test-allr-pass.txt"), 0) == []
    (f,) = dc.check_nccom(fixture_text("deep", "nccom-test-allr-fail.txt"), 1)
    assert f.rule == "neuron-check-fail" and "failed to run" in f.evidence


class Replay:
    """A runner that answers each tool with recorded output (or raises like the real runner)."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, cmd, timeout):
        self.calls.append(cmd)
        a = self.answers.get(cmd[0])
        if isinstance(a, BaseException):
            raise a
        if a is None:
            raise FileNotFoundError(cmd[0])
        return a


def test_p5_deep_check_steps_and_pass():
    run = Replay({"dcgmi": (0, fixture_text("deep", "dcgmi-diag-r2-pass.json")),
                  "all_reduce_perf": (0, fixture_text("deep", "all_reduce_perf-p5-pass.txt")),
                  "efa-loopback": (0, fixture_text("deep", "fi_pingpong-efa-pass.txt"))})
    result = dc.DeepCheck(P5, dc.DeepCheckConfig(dcgm_level=3), run).run_all()
    assert result.passed and result.steps == {"dcgm": "pass", "nccl": "pass", "efa-loopback": "pass"}
    assert ["dcgmi", "diag", "-r", "3", "-j"] in run.calls
    assert ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8"] in run.calls


def test_missing_tool_skips_its_step_and_the_others_still_decide():
    run = Replay({"all_reduce_perf": (0, fixture_text("deep", "all_reduce_perf-p5-slow.txt")),
                  "efa-loopback": (0, fixture_text("deep", "fi_pingpong-efa-pass.txt"))})
    result = dc.DeepCheck(P5, runner=run).run_all()
    assert result.steps == {"dcgm": "skipped", "nccl": "fail", "efa-loopback": "pass"}
    assert not result.passed
    skipped = [f for f in result.findings if f.rule == "deep-check-tool-missing"]
    assert skipped and "dcgmi not installed" in skipped[0].evidence and skipped[0].action is Action.NONE


def test_timeout_or_garbage_fails_the_check():
    run = Replay({"dcgmi": TimeoutError("dcgmi did not finish in 900s"), "all_reduce_perf": (0, "garbage"),
                  "efa-loopback": (0, fixture_text("deep", "fi_pingpong-efa-pass.txt"))})
    result = dc.DeepCheck(P5, runner=run).run_all()
    assert result.steps == {"dcgm": "error", "nccl": "error", "efa-loopback": "pass"} and not result.passed


def test_neuron_and_cpu_efa_steps():
    run = Replay({"nccom-test": (0, fixture_text("deep", "nccom-test-allr-pass.txt")),
                  "efa-loopback": (0, fixture_text("deep", "fi_pingpong-efa-pass.txt"))})
    r = dc.DeepCheck(TRN2, runner=run).run_all()
    assert r.passed and r.steps == {"nccom": "pass", "efa-loopback": "pass"}
    # nccom-test ranks are logical NeuronCores: trn2 runs LNC=2 by default, 8 physical cores as 4 logical per
    # device (aws-neuron/aws-neuron-sdk@v2.32.0:about-neuron/arch/neuron-features/logical-neuroncore-config.rst:14;
    # neuron-ls -j shows "nc_count": 4, tools/neuron-sys-tools/neuron-ls.rst:216-228), so 16 x 4 = 64
    assert ["nccom-test", "-r", "64", "allr"] in run.calls
    assert dc.DeepCheck(CPU_EFA, runner=run).run_all().steps == {"efa-loopback": "pass"}
    assert dc.DeepCheck(get("m7i.xlarge"), runner=run).run_all().steps == {}


def test_subprocess_runner_reports_missing_tools():
    with pytest.raises(FileNotFoundError):
        dc.subprocess_runner(["dcgmi-definitely-not-installed", "diag"], 5)
    rc, out = dc.subprocess_runner(["python3", "-c", "print('hi')"], 30)
    assert (rc, out.strip()) == (0, "hi")


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_the_dcgm_step_gets_the_time_its_level_needs(level):
    """Old code gave every step the same 900 s: `dcgmi diag -r 3` (~15 min) or `-r 4` (hours, what HyperPod runs on
    new nodes) was killed, reported as deep-check-error, and the healthy node was replaced."""
    from node_agent.deep_check import DCGM_LEVEL_SECONDS, DeepCheck, DeepCheckConfig

    timeouts = {}

    def runner(cmd, timeout):
        timeouts[cmd[0]] = timeout
        raise FileNotFoundError(cmd[0])

    DeepCheck(get("p5.48xlarge"), DeepCheckConfig(dcgm_level=level, timeout_seconds=900), runner).run_all()
    assert timeouts["dcgmi"] >= DCGM_LEVEL_SECONDS[level] and timeouts["dcgmi"] >= 900
    assert timeouts["all_reduce_perf"] == 900
