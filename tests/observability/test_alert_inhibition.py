"""One incident of a controller manager, one page: the real Alertmanager (Debian's ``prometheus-alertmanager``)
given the platform's alert manager configuration and the alerts a Kueue manager in a crash loop raises, with the
labels the rules give them (the promtool cases of rule_cases.py hold the rules to those labels)."""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import datetime, timedelta, timezone

import yaml

from observability import routing
from tests.conftest import free_port
from tests.observability.conftest import stop_process
from tests.observability.test_alerting_end_to_end import _daemon, _ready

KUEUE_DOWN = [  # what a Kueue manager in a crash loop raises, in the order the rules fire
    {"alertname": "OpenpodPlatformPodCrashLooping", "severity": "warning", "namespace": "kueue-system",
     "pod": "kueue-controller-manager-6d9", "container": "manager"},
    {"alertname": "OpenpodScrapeTargetDown", "severity": "warning", "job": "kueue", "namespace": "kueue-system"},
    {"alertname": "OpenpodPlatformDeploymentUnavailable", "severity": "warning", "namespace": "kueue-system",
     "deployment": "kueue-controller-manager"},
]
ELSEWHERE = [  # other incidents at the same time: none may be silenced by the one above
    {"alertname": "OpenpodScrapeTargetDown", "severity": "warning", "job": "kube-state-metrics"},
    {"alertname": "OpenpodScrapeTargetDown", "severity": "warning", "job": "jobset", "namespace": "jobset-system"},
    {"alertname": "OpenpodPlatformDeploymentUnavailable", "severity": "warning", "namespace": "openpod-system",
     "deployment": "node-remediation"},
    {"alertname": "OpenpodPlatformControllerLeaderless", "severity": "critical", "job": "kueue"},
]
NODE_AGENT_LOOP = [  # a crash loop outside the managers' namespaces silences nothing else there
    {"alertname": "OpenpodPlatformPodCrashLooping", "severity": "warning", "namespace": "openpod-system",
     "pod": "node-health-agent-x2", "container": "agent"},
]


def _post(url: str, alerts: list[dict]) -> None:
    now = datetime.now(timezone.utc)
    body = [{"labels": a, "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat()}
            for a in alerts]
    req = urllib.request.Request(f"{url}/api/v2/alerts", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def _states(url: str, want: int, settled) -> dict[tuple, str]:
    """Each alert's state (active / suppressed) once Alertmanager holds ``want`` alerts and ``settled(states)``
    holds (its inhibitor takes the alerts in as they arrive), or as it is after 20 s."""
    deadline, got = time.monotonic() + 20, {}
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/api/v2/alerts", timeout=10) as r:
            got = {tuple(sorted(a["labels"].items())): a["status"]["state"] for a in json.load(r)}
        if len(got) == want and settled(got):
            break
        time.sleep(0.2)
    return got


def test_a_crash_looping_controller_manager_pages_once_and_silences_no_other_incident(alertmanager_bin, tmp_path):
    """Failed on the old inhibitions: a Kueue manager in a crash loop paged three times (its pod's crash loop,
    its scrape target down, its Deployment unavailable)."""
    port = free_port()
    cfg = routing.alertmanager_config({routing.PAGE: {"webhook_configs": [{"url": "http://127.0.0.1:9/page"}]},
                                       routing.WATCHDOG_RECEIVER: {"webhook_configs": [{"url": "http://127.0.0.1:9/w"}]}})
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    am = _daemon([alertmanager_bin, f"--config.file={tmp_path / 'alertmanager.yml'}",
                  f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{port}",
                  "--cluster.listen-address="], tmp_path / "alertmanager.log")
    url = f"http://127.0.0.1:{port}"
    try:
        _ready(f"{url}/-/ready")
        alerts = KUEUE_DOWN + ELSEWHERE + NODE_AGENT_LOOP
        key = {id(a): tuple(sorted(a.items())) for a in alerts}
        _post(url, alerts)
        states = _states(url, len(alerts), lambda got: all(got.get(key[id(a)]) == "suppressed" for a in KUEUE_DOWN[1:]))
    finally:
        stop_process(am)
    active = [a for a in alerts if states[key[id(a)]] == "active"]
    assert [a for a in active if a in KUEUE_DOWN] == KUEUE_DOWN[:1]   # the crash loop pages; its effects do not
    assert all(a in active for a in ELSEWHERE + NODE_AGENT_LOOP)
