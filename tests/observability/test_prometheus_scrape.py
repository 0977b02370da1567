"""A real Prometheus (Debian's package) on loopback, with the platform's scrape jobs and rules, scraping a real
node-agent metrics endpoint and a running `python -m training run`: the documented metrics arrive with the
labels the rules group by, move, and the recording rules evaluate on them.

Debian builds Prometheus without Kubernetes service discovery, so each job's ``kubernetes_sd_configs`` is
swapped for a file_sd target carrying the same ``__meta_kubernetes_*`` labels Kubernetes discovery would
give the pod; the job's relabeling - what this test is about - is used unchanged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client import start_http_server

from node_agent.metrics import DetectorMetrics
from observability.metrics import JOB_DETECTOR, JOB_TRAINING, METRICS
from observability.rules import rule_groups
from observability.scrape import DETECTOR_APP, OPENPOD_NAMESPACE, POD_IP, PORT, SCRAPE, TEAM, scrape_configs
from tests.conftest import free_port
from tests.observability.conftest import stop_process

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _pod_target(port: int, namespace: str, pod: str, node: str, labels: dict[str, str]) -> list[dict]:
    """A file_sd target group with the meta labels Kubernetes pod discovery would attach."""
    return [{"targets": ["127.0.0.1:1"],  # replaced by the job's relabeling from pod IP + annotated port
             "labels": {SCRAPE: "true", PORT: str(port), POD_IP: "127.0.0.1", "__meta_kubernetes_namespace": namespace,
                        "__meta_kubernetes_pod_name": pod, "__meta_kubernetes_pod_node_name": node, **labels}}]


def _query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def _wait(base: str, expr: str, timeout: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if res := _query(base, expr):
                return res
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"no result for {expr} within {timeout}s")


@pytest.fixture
def detector_endpoint():
    m = DetectorMetrics()
    m.node_action.set(2)
    m.findings.labels("dcgm-diag-fail", "gpu-diagnostic-failed", "replace").inc()
    m.check_errors.labels("efa").inc()
    m.last_run.labels("gpu").set_to_current_time()
    m.kernel_lines.inc(10)
    m.efa_counter.labels("rdmap79s0", "rx_bytes").set(91823719283)
    m.efa_port_active.labels("rdmap79s0").set(1)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=m.registry)
    yield port, m
    server.shutdown()
    thread.join(timeout=5)


@pytest.fixture
def training_run(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENPOD_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    log = open(tmp_path / "train.log", "w")
    p = subprocess.Popen(
        [sys.executable, "-m", "training", "run", "--model", "tiny", "--steps", "2000", "--checkpoint-every", "50",
         "--checkpoint-dir", str(tmp_path / "ck"), "--memory-dir", str(tmp_path / "shm"), "--nproc-per-node", "1",
         "--metrics-port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    yield port
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)
    log.close()


@pytest.fixture
def prometheus(prometheus_bin, tmp_path, detector_endpoint, training_run):
    det_port, _ = detector_endpoint
    targets = {
        JOB_DETECTOR: _pod_target(det_port, OPENPOD_NAMESPACE, "node-health-agent-amd64-x1", "n1",
                                  {"__meta_kubernetes_pod_label_app_kubernetes_io_name": DETECTOR_APP}),
        JOB_TRAINING: _pod_target(training_run, "team-a", "llm-node-0-0-abcde", "n2",
                                  {TEAM: "team-a", "__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name": "llm",
                                   "__meta_kubernetes_pod_label_batch_kubernetes_io_job_name": "llm-node-0"}),
    }
    jobs = []
    for job in scrape_configs():
        if job["job_name"] not in targets:
            continue
        path = tmp_path / f"{job['job_name']}.json"
        path.write_text(json.dumps(targets[job["job_name"]]))
        jobs.append({k: v for k, v in job.items() if k != "kubernetes_sd_configs"}
                    | {"file_sd_configs": [{"files": [str(path)]}]})
    groups = rule_groups()
    for g in groups["groups"]:
        g["interval"] = "1s"  # evaluate at once, not on the production 1m cadence
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups, sort_keys=False))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(
        {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": ["rules.yaml"],
         "scrape_configs": jobs}, sort_keys=False))
    web = free_port()
    log = open(tmp_path / "prometheus.log", "w")
    p = subprocess.Popen([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                          f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{web}"],
                         cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield f"http://127.0.0.1:{web}"
    finally:
        stop_process(p, timeout=20)
        log.close()


def test_prometheus_scrapes_the_node_agent_and_a_training_run_with_the_rules_labels(prometheus):
    base = prometheus
    (action,) = _wait(base, 'openpod_node_agent_node_action{job="openpod-node-agent"}')
    assert {"node": "n1", "namespace": OPENPOD_NAMESPACE,
            "pod": "node-health-agent-amd64-x1"}.items() <= action["metric"].items() and action["value"][1] == "2"

    first = _wait(base, 'openpod_training_step{job="openpod-training"} > 0', timeout=120)
    assert {"namespace": "team-a", "training_job": "llm", "pod": "llm-node-0-0-abcde",
            "node": "n2"}.items() <= first[0]["metric"].items()
    step0 = float(first[0]["value"][1])
    moved = _wait(base, f'openpod_training_step{{training_job="llm"}} > {step0}', timeout=60)
    assert float(moved[0]["value"][1]) > step0, "the step did not move"

    # every metric the table documents for these exporters is there (histograms of later issues excepted)
    names = set(json.loads(urllib.request.urlopen(f"{base}/api/v1/label/__name__/values", timeout=5).read())["data"])
    for m in METRICS:
        if m.exporter in (JOB_DETECTOR, JOB_TRAINING) and not m.pending:
            assert m.name in names, f"{m.name} documented but not scraped"

    # the recording rules evaluate on the live series
    (rec,) = _wait(base, 'openpod:job_training_step:max{training_job="llm"}')
    assert rec["metric"] == {"__name__": "openpod:job_training_step:max", "namespace": "team-a", "training_job": "llm"}
    _wait(base, 'openpod:job_training_seconds:max{category="productive", training_job="llm"} > 0')
    # the node's replace action reaches the alert's expression (it fires after its `for`). Waited for: the alert's
    # group is evaluated on its own, so it may not have run yet when the recording rules' group has (a loaded CI
    # run once read no ALERTS series here).
    assert _wait(base, 'ALERTS{alertname="OpenpodNodePendingReplacement", node="n1"}', timeout=30)
