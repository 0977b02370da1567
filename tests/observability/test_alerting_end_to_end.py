"""End to end on the real binaries: Debian's Prometheus with the platform's scrape jobs and rules, and its
Alertmanager with the platform's route, on 127.0.0.1; the exporters are this repository's own (the training
runtime's Goodput endpoint, the node agent's metrics server) plus a kube-state-metrics stand-in; a webhook
receiver counts notifications per incident.

One hung job on 64 nodes is one notification, not 64. The time scale is compressed (every minute of the
rules is a second here: ``for``, ranges and offsets), so the incident takes seconds; the rules are otherwise
the production ones. A legacy rule and route (per-pod alert, grouped by node) runs beside them on the same
scrapes as the control: it must count 64, so the harness can see a storm.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from prometheus_client import start_http_server

from node_agent.metrics import DetectorMetrics
from observability import routing
from observability.metrics import JOB_DETECTOR, JOB_KSM, JOB_TRAINING
from observability.rules import AlertThresholds, rule_groups
from observability.scrape import APP, DETECTOR_APP, KSM_APP, MONITORING_NAMESPACE, OPENPOD_NAMESPACE, TEAM, scrape_configs
from tests.conftest import free_port
from tests.observability.conftest import stop_process
from tests.observability.test_prometheus_scrape import _pod_target
from training.goodput import Goodput

pytestmark = pytest.mark.slow   # ~15 s: two daemons, and the incident must run its course

NODES = 64
THRESHOLDS = AlertThresholds(job_hang_minutes=3, node_reboot_pending_minutes=2, node_not_ready_minutes=2)
TIMING = {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"}
# The pre-issue-26 job-hung rule and route (per pod, grouped by node): the control.
LEGACY = "LegacyJobHung"
LEGACY_RULE = {"alert": LEGACY, "expr": "changes(openpod_training_step[3s]) == 0 and openpod_training_step > 0",
               "for": "1s", "labels": {"severity": "critical"}}
LEGACY_ROUTE = {"receiver": "legacy", "matchers": [f'alertname="{LEGACY}"'],
                "group_by": ["alertname", "group", "node", "namespace", "training_job", "cluster_queue"]}


def _seconds_for_minutes(text: str) -> str:
    """Compress time 60x: 15m -> 15s, 6h -> 6m (durations only; numbers and label values are left alone)."""
    return re.sub(r"(?<![\w.])(\d+)([mh])\b", lambda m: m.group(1) + {"m": "s", "h": "m"}[m.group(2)], text)


def compressed_rule_groups(thresholds: AlertThresholds) -> dict:
    """The platform's rule groups with every duration compressed 60x and evaluated each second."""
    groups = rule_groups(thresholds)
    for g in groups["groups"]:
        g["interval"] = "1s"
        for r in g["rules"]:
            r["expr"] = _seconds_for_minutes(r["expr"])
            if "for" in r:
                r["for"] = _seconds_for_minutes(r["for"])
    return groups


def _rules() -> dict:
    groups = compressed_rule_groups(THRESHOLDS)
    groups["groups"][1]["rules"].append(LEGACY_RULE)
    return groups


def file_sd_jobs(tmp_path, targets: dict) -> list[dict]:
    """The platform's scrape jobs that ``targets`` names ({job: file_sd target groups}), each reading its
    targets from a file instead of Kubernetes discovery (its relabelling kept)."""
    jobs = []
    for job in scrape_configs():
        if job["job_name"] in targets:
            path = tmp_path / f"{job['job_name']}.json"
            path.write_text(json.dumps(targets[job["job_name"]]))
            jobs.append({k: v for k, v in job.items() if k != "kubernetes_sd_configs"}
                        | {"file_sd_configs": [{"files": [str(path)]}]})
    return jobs


# kube-state-metrics' exposition for one node gone NotReady, in its format
# (kubernetes/kube-state-metrics@v2.20.0:internal/store/node.go:509-530, utils.go:68-79: one series per status).
KSM_TEXT = "\n".join([
    "# TYPE kube_node_status_condition gauge",
    'kube_node_status_condition{node="gpu-9",condition="Ready",status="true"} 0',
    'kube_node_status_condition{node="gpu-9",condition="Ready",status="false"} 0',
    'kube_node_status_condition{node="gpu-9",condition="Ready",status="unknown"} 1',
    'kube_node_status_condition{node="gpu-8",condition="Ready",status="true"} 1',
    'kube_node_status_condition{node="gpu-8",condition="Ready",status="false"} 0',
    'kube_node_status_condition{node="gpu-8",condition="Ready",status="unknown"} 0', ""])


class _Receiver(BaseHTTPRequestHandler):
    got: list[tuple[str, dict]] = []

    def do_GET(self):   # the kube-state-metrics stand-in
        body = KSM_TEXT.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # Alertmanager's webhook notifications
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.got.append((self.path.strip("/"), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def _daemon(argv: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def _ready(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} not ready within {timeout}s")


@pytest.fixture
def exporters(tmp_path):
    """A hung job (every node's local rank 0 serves the job's figures: 64 scrape targets), a healthy job, one
    node agent asking for a reboot: the real exporters, on loopback."""
    hung = Goodput(tmp_path / "hung", rank=0, metrics_port=free_port())
    for step in range(10):
        hung.step_done(step, 0.1)
    healthy = Goodput(tmp_path / "ok", rank=0, metrics_port=free_port())
    stop = threading.Event()

    def train():
        step = 0
        while not stop.wait(0.2):
            healthy.step_done(step, 0.2)
            step += 1

    t = threading.Thread(target=train, daemon=True)
    t.start()
    agent = DetectorMetrics()
    agent.node_action.set(1)
    agent_port = free_port()
    server, thread = start_http_server(agent_port, addr="127.0.0.1", registry=agent.registry)
    yield {"hung": hung._http[0].server_port, "ok": healthy._http[0].server_port, "agent": agent_port}
    stop.set()
    t.join(timeout=5)
    server.shutdown()
    hung.close()
    healthy.close()


def test_one_hung_job_on_64_nodes_is_one_notification(prometheus_bin, alertmanager_bin, tmp_path, exporters):
    _Receiver.got = []
    web = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{web.server_port}"

    train_meta = {TEAM: "team-a", "__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name": "llm"}
    targets = {
        JOB_TRAINING: [g for i in range(NODES) for g in _pod_target(exporters["hung"], "team-a", f"llm-{i}", f"gpu-{i}",
                                                                    train_meta)]
        + _pod_target(exporters["ok"], "team-b", "ok-0", "gpu-70",
                      {TEAM: "team-b", "__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name": "ok"}),
        JOB_DETECTOR: _pod_target(exporters["agent"], OPENPOD_NAMESPACE, "node-health-agent-x1", "gpu-5",
                                  {APP: DETECTOR_APP}),
        # kube-state-metrics runs on a system node: with honor_labels its series keep the node they describe
        JOB_KSM: _pod_target(web.server_port, MONITORING_NAMESPACE, "kube-state-metrics-0", "sys-1", {APP: KSM_APP}),
    }
    jobs = file_sd_jobs(tmp_path, targets)
    am_port, prom_port = free_port(), free_port()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rules(), sort_keys=False))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(
        {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": ["rules.yaml"],
         "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
         "scrape_configs": jobs}, sort_keys=False))
    am = routing.alertmanager_config({routing.PAGE: {"webhook_configs": [{"url": f"{hook}/page"}]},
                                      routing.WATCHDOG_RECEIVER: {"webhook_configs": [{"url": f"{hook}/watchdog"}]},
                                      "legacy": {"webhook_configs": [{"url": f"{hook}/legacy"}]}}, TIMING)
    am["route"]["routes"].insert(0, LEGACY_ROUTE)
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(am, sort_keys=False))

    alertmanager = _daemon([alertmanager_bin, f"--config.file={tmp_path / 'alertmanager.yml'}",
                            f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
                            "--cluster.listen-address="], tmp_path / "alertmanager.log")
    _ready(f"http://127.0.0.1:{am_port}/-/ready")   # else Prometheus's first alerts wait for their resend
    prometheus = _daemon([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                          f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
                          "--rules.alert.resend-delay=1s"], tmp_path / "prometheus.log")
    try:
        deadline = time.monotonic() + 32   # typically done in ~10 s; the whole test stays under 40 s
        want = {("page", "OpenpodJobHung"), ("page", "OpenpodNodePendingReboot"), ("page", "OpenpodNodeNotReady"),
                ("legacy", LEGACY), ("watchdog", "OpenpodWatchdog")}
        while time.monotonic() < deadline:
            seen = {(path, a["labels"]["alertname"]) for path, n in _Receiver.got for a in n["alerts"]}
            legacy = {n["groupKey"] for path, n in _Receiver.got if path == "legacy"}
            if want <= seen and len(legacy) >= NODES:
                break
            time.sleep(0.25)
        time.sleep(3)   # a storm would still be arriving: group_interval is 2 s
    finally:
        stop_process(prometheus)
        stop_process(alertmanager)
        web.shutdown()
    logs = (tmp_path / "prometheus.log").read_text()[-2000:] + (tmp_path / "alertmanager.log").read_text()[-2000:]

    def notifications(path: str, alertname: str) -> list[dict]:
        return [n for p, n in _Receiver.got if p == path and any(a["labels"]["alertname"] == alertname
                                                                 for a in n["alerts"])]

    hung = notifications("page", "OpenpodJobHung")
    assert len(hung) == 1, f"{len(hung)} notifications for one hung job\n{logs}"
    (alert,) = [a for a in hung[0]["alerts"] if a["labels"]["alertname"] == "OpenpodJobHung"]
    assert alert["labels"] == {"alertname": "OpenpodJobHung", "namespace": "team-a", "training_job": "llm",
                               "severity": "critical"}
    assert hung[0]["groupLabels"] == {"namespace": "team-a", "training_job": "llm"}
    # the control: the same scrapes through the legacy rule and route are one notification per node
    legacy_groups = {n["groupKey"] for n in notifications("legacy", LEGACY)}
    assert len(legacy_groups) == NODES, f"control: {len(legacy_groups)} legacy groups\n{logs}"
    # the healthy job never alerts; the node's reboot and the NotReady node each make one notification
    assert not any(a["labels"].get("training_job") == "ok" for _, n in _Receiver.got for a in n["alerts"])
    (reboot,) = notifications("page", "OpenpodNodePendingReboot")
    assert reboot["groupLabels"] == {"node": "gpu-5"}
    (not_ready,) = notifications("page", "OpenpodNodeNotReady")
    assert not_ready["groupLabels"] == {"node": "gpu-9"}, "the node in question, not the exporter's (honor_labels)"
    # the watchdog reaches its own receiver; info alerts reach none
    assert notifications("watchdog", "OpenpodWatchdog")
    assert not notifications("page", "OpenpodWatchdog")
