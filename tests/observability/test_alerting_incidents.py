"""End to end on the real binaries, the incidents nobody listed: a node flapping Ready/Unknown, kube-state-metrics
restarting (a scrape gap) under a NotReady node, a GPU's Xid held while a new pod lands on it (label churn), a
group's remediation budget used up with a node queued behind it while the node agent and the remediation
controller restart (new pods, the controller on another node), a job crash-looping before step 1, a job whose
metrics endpoint is dead, a finished job's pods, then a fleet event (a quarter of the nodes NotReady at once).

Each incident is one firing notification and none resolves while its fault persists; the fleet event's nodes
raise no per-node notification. Prometheus and Alertmanager are Debian's, with the platform's rules and route;
the node agent and the training runtime are this repository's own exporters; kube-state-metrics and dcgm-exporter
are stand-ins serving their exposition formats (kubernetes/kube-state-metrics@v2.20.0:internal/store/node.go:509,
NVIDIA/dcgm-exporter@4.5.3-4.8.2:etc/default-counters.csv:29 with the Kubernetes pod mapping's labels).
Time is compressed 60x (a minute of the rules is a second here), as in test_alerting_end_to_end.py.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from prometheus_client import start_http_server

from node_agent.metrics import ControllerMetrics, DetectorMetrics
from observability import routing
from observability.metrics import JOB_CONTROLLER, JOB_DCGM, JOB_DETECTOR, JOB_KSM, JOB_TRAINING
from observability.rules import AlertThresholds
from observability.scrape import (APP, CONTROLLER_APP, DCGM_APP, DETECTOR_APP, KSM_APP, MONITORING_NAMESPACE,
                                  OPENPOD_NAMESPACE, TEAM)
from tests.conftest import free_port
from tests.observability.conftest import stop_process
from tests.observability.test_alerting_end_to_end import _daemon, _ready, compressed_rule_groups, file_sd_jobs
from tests.observability.test_prometheus_scrape import _pod_target
from training.goodput import Goodput

pytestmark = pytest.mark.slow   # ~40 s: two daemons and two phases of incidents

THRESHOLDS = AlertThresholds(node_not_ready_minutes=10, xid_minutes=2, node_reboot_pending_minutes=6,
                             budget_exhausted_minutes=1,
                             job_restarts_per_hour=3, job_metrics_down_minutes=3, scrape_down_minutes=600)
TIMING = {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"}
NODES = [f"n{i}" for i in range(20)]
FLEET = {"n10", "n11", "n12", "n13", "n14"}
JOBSET = "__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name"


class World:
    """What the stand-ins serve now; the test's timeline changes it."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.not_ready = {"n7"}
        self.gap = False            # kube-state-metrics restarting: its scrapes fail
        self.gpu_pod = "llm-0"      # the pod dcgm-exporter maps GPU 0 of n3 to

    def ksm(self) -> str:
        flap = int((time.monotonic() - self.t0) / 2) % 2   # n1: Ready, Unknown, Ready, ... every 2 s
        lines = ["# TYPE kube_node_status_condition gauge"]
        for n in NODES:
            ready = 0 if n in self.not_ready or (n == "n1" and flap) else 1
            for status, v in (("true", ready), ("false", 0), ("unknown", 1 - ready)):
                lines.append(f'kube_node_status_condition{{node="{n}",condition="Ready",status="{status}"}} {v}')
        return "\n".join(lines) + "\n"

    def dcgm(self) -> str:
        base = 'gpu="{g}",UUID="GPU-{g}",pci_bus_id="00000000:{g}0:00.0",device="nvidia{g}",modelName="NVIDIA H100",' \
               'Hostname="n3"'
        return ("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
                f'DCGM_FI_DEV_XID_ERRORS{{{base.format(g=0)},namespace="team-a",pod="{self.gpu_pod}",'
                f'container="trainer"}} 48\n'
                f"DCGM_FI_DEV_XID_ERRORS{{{base.format(g=1)}}} 0\n")


def _serve(world: World):
    notes: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.server.kind == "ksm" and world.gap:
                self.send_response(503)
                self.end_headers()
                return
            body = (world.ksm() if self.server.kind == "ksm" else world.dcgm()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            notes.append((self.path.strip("/"), json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    servers = {}
    for kind in ("ksm", "dcgm", "hook"):
        s = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        s.kind = kind
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers[kind] = s
    return servers, notes


def _crash_loop(run_dir, port: int, stop: threading.Event) -> None:
    """A job that dies before its first step every 2 s: each incarnation serves briefly, then a gap."""
    while not stop.is_set():
        g = Goodput(run_dir, rank=0, metrics_port=port, started=time.time())
        g.persist()
        stop.wait(1.5)
        g.close()
        stop.wait(0.5)


def test_unlisted_incidents_are_one_notification_each_and_a_fleet_event_is_one(prometheus_bin, alertmanager_bin,
                                                                                tmp_path):
    world = World()
    servers, notes = _serve(world)
    hook = f"http://127.0.0.1:{servers['hook'].server_port}"
    agent = DetectorMetrics()
    agent.node_action.set(1)                  # n5 waits for a reboot, queued behind the group's budget
    controller = ControllerMetrics()
    controller.leader.set(1)
    controller.budget_blocked.labels("gpu").set(1)
    agent_port, ctl_port, loop_port = free_port(), free_port(), free_port()
    agent_server, _ = start_http_server(agent_port, addr="127.0.0.1", registry=agent.registry)
    ctl_server, _ = start_http_server(ctl_port, addr="127.0.0.1", registry=controller.registry)
    stop = threading.Event()
    looper = threading.Thread(target=_crash_loop, args=(tmp_path / "loop", loop_port, stop), daemon=True)
    looper.start()

    def train(port: int, job: str, pod: str, **meta: str) -> list[dict]:
        return _pod_target(port, "team-a", pod, "n2", {TEAM: "team-a", JOBSET: job, **meta})

    def agent_targets(pod: str) -> list[dict]:
        return _pod_target(agent_port, OPENPOD_NAMESPACE, pod, "n5", {APP: DETECTOR_APP})

    def controller_targets(pod: str, node: str) -> list[dict]:
        return _pod_target(ctl_port, OPENPOD_NAMESPACE, pod, node, {APP: CONTROLLER_APP})

    targets = {
        JOB_TRAINING: train(loop_port, "loop", "loop-0") + train(free_port(), "blind", "blind-0")
        + train(free_port(), "done", "done-0", __meta_kubernetes_pod_phase="Succeeded"),
        JOB_DETECTOR: agent_targets("node-health-agent-a"),
        JOB_CONTROLLER: controller_targets("node-remediation-a", "sys-2"),
        JOB_KSM: _pod_target(servers["ksm"].server_port, MONITORING_NAMESPACE, "kube-state-metrics-0", "sys-1",
                             {APP: KSM_APP}),
        JOB_DCGM: _pod_target(servers["dcgm"].server_port, MONITORING_NAMESPACE, "dcgm-exporter-n3", "n3",
                              {APP: DCGM_APP}),
    }
    jobs = file_sd_jobs(tmp_path, targets)
    groups = compressed_rule_groups(THRESHOLDS)
    am_port, prom_port = free_port(), free_port()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups, sort_keys=False))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(
        {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": ["rules.yaml"],
         "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
         "scrape_configs": jobs}, sort_keys=False))
    am = routing.alertmanager_config({routing.PAGE: {"webhook_configs": [{"url": f"{hook}/page"}]},
                                      routing.WATCHDOG_RECEIVER: {"webhook_configs": [{"url": f"{hook}/watchdog"}]}},
                                     TIMING)
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(am, sort_keys=False))
    alertmanager = _daemon([alertmanager_bin, f"--config.file={tmp_path / 'alertmanager.yml'}",
                            f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
                            "--cluster.listen-address="], tmp_path / "alertmanager.log")
    _ready(f"http://127.0.0.1:{am_port}/-/ready")
    prometheus = _daemon([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                          f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
                          "--rules.alert.resend-delay=1s"], tmp_path / "prometheus.log")
    try:
        _ready(f"http://127.0.0.1:{prom_port}/-/ready")
        world.t0 = start = time.monotonic()

        def at(second: float) -> None:
            time.sleep(max(0.0, start + second - time.monotonic()))

        at(14)   # restarts and churn, after the first incidents fired
        world.gap = True                                   # kube-state-metrics restarting under NotReady n7
        world.gpu_pod = "llm-1"                            # a new pod on the GPU holding Xid 48
        for server in (agent_server, ctl_server):          # the agent's and the controller's pods replaced
            server.shutdown()
            server.server_close()
        (tmp_path / f"{JOB_DETECTOR}.json").write_text(json.dumps(agent_targets("node-health-agent-b")))
        (tmp_path / f"{JOB_CONTROLLER}.json").write_text(json.dumps(controller_targets("node-remediation-b",
                                                                                        "sys-3")))
        at(16)
        agent_server, _ = start_http_server(agent_port, addr="127.0.0.1", registry=agent.registry)
        ctl_server, _ = start_http_server(ctl_port, addr="127.0.0.1", registry=controller.registry)
        at(17)
        world.gap = False
        at(20)   # the fleet event
        world.not_ready |= FLEET
        at(34)
    finally:
        stop.set()
        looper.join(timeout=5)
        stop_process(prometheus)
        stop_process(alertmanager)
        agent_server.shutdown()
        ctl_server.shutdown()
        for s in servers.values():
            s.shutdown()
    logs = (tmp_path / "prometheus.log").read_text()[-1500:] + (tmp_path / "alertmanager.log").read_text()[-1500:]

    def sent(alertname: str, status: str, **labels: str) -> list[dict]:
        return [n for p, n in notes if p == "page" and any(
            a["labels"]["alertname"] == alertname and a["status"] == status
            and all(a["labels"].get(k) == v for k, v in labels.items()) for a in n["alerts"])]

    once = [("OpenpodNodeReadyFlapping", {"node": "n1"}), ("OpenpodNodeNotReady", {"node": "n7"}),
            ("OpenpodGPUXidError", {"node": "n3", "gpu": "0", "xid": "48"}),
            ("OpenpodRemediationBudgetExhausted", {"group": "gpu"}),
            ("OpenpodJobCrashLooping", {"training_job": "loop"}), ("OpenpodJobMetricsDown", {"training_job": "blind"}),
            ("OpenpodManyNodesNotReady", {})]
    summary = sorted({(a["labels"]["alertname"], a["labels"].get("node", a["labels"].get("training_job", "")),
                       a["status"]) for p, n in notes if p == "page" for a in n["alerts"]})
    for alertname, labels in once:
        firing = sent(alertname, "firing", **labels)
        assert len(firing) == 1, f"{alertname} {labels}: {len(firing)} notifications\n{summary}\n{logs}"
        assert not sent(alertname, "resolved", **labels), f"{alertname} {labels} resolved while its fault holds"
    # the fleet's nodes: one fleet notification, none per node; the flapping node is no NotReady; a finished
    # job's pods are not scraped, so it is no blind job
    for n in FLEET | {"n1"}:
        assert not sent("OpenpodNodeNotReady", "firing", node=n), f"{n}: a per-node notification\n{summary}"
    assert not any(a["labels"].get("training_job") == "done" for _, n in notes for a in n["alerts"]), summary
    assert not sent("OpenpodJobHung", "firing", training_job="loop"), "a job that never stepped is not hung"
    # the node queued behind the budget is that incident, not a ticket of its own; the budget's notification is
    # about the group, whichever node the controller ran on
    assert not sent("OpenpodNodePendingReboot", "firing", node="n5"), summary
    (budget,) = sent("OpenpodRemediationBudgetExhausted", "firing", group="gpu")
    assert budget["groupLabels"] == {"group": "gpu"}
    assert all(a["labels"]["severity"] != "info" for p, n in notes if p == "page" for a in n["alerts"])
