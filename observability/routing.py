"""Alert routing as data: which notification an alert joins, who gets it, and what it silences.

One incident, one notification: alerts are grouped by what they are about, never by who reported them.
A job's alerts (labels ``namespace``, ``training_job``; the rules aggregate them by job, observability/rules.py)
form one group per job, whatever alert and however many pods; a node's (``node``) one per node; a team
queue's (``cluster_queue``, or a LocalQueue's ``namespace``/``local_queue``) one per queue; an instance group's (``group``) one per group. The rest group
by alert name. ``info`` alerts go to a receiver that does not notify (dashboards show them), and the
always-firing watchdog to its own receiver, the dead-man's switch (platform_constructs/observability.py
alarms when it stops).

Format: Alertmanager's configuration (https://prometheus.io/docs/alerting/latest/configuration/, route,
inhibit_rule; checked 2026-11-25), the same in Amazon Managed Service for Prometheus.
"""

from __future__ import annotations

from observability.rules import WATCHDOG

PAGE = "page"            # critical and warning alerts: the on-call topic
WATCHDOG_RECEIVER = "watchdog"
SILENT = "dashboard"     # info alerts: no notification
JOB = ["namespace", "training_job"]

# (timing of a group: first wait, then at most one notification per interval, repeated while it fires)
TIMING = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}

# What one alert makes redundant (source -> targets, for the labels in ``equal``).
INHIBIT = [
    # A hung job also misses its goodput, step-time and checkpoint objectives: say it once.
    ("OpenpodJobHung", "OpenpodStepTimeRegression|OpenpodGoodputBelowTarget|OpenpodTrainingStraggler"
     "|OpenpodCheckpointTooOld", JOB),
    # A node that is not Ready explains its agent's silence and its lost devices.
    ("OpenpodNodeNotReady", "OpenpodNodeAgentDown|OpenpodScrapeTargetDown|OpenpodNodeAcceleratorsLost"
     "|OpenpodGPUXidError|OpenpodNodePendingReboot", ["node"]),
    # A node already marked for replacement: its Xids, lost devices and reboot are part of that.
    ("OpenpodNodePendingReplacement", "OpenpodNodePendingReboot|OpenpodNodeAcceleratorsLost|OpenpodGPUXidError",
     ["node"]),
    # Without the controller nothing is remediated: one page for it, not one per waiting node.
    ("OpenpodRemediationControllerDown", "OpenpodNodePendingReboot|OpenpodNodePendingReplacement"
     "|OpenpodRemediationStuck|OpenpodRemediationLeaderless", []),
]


def route(page_timing: dict | None = None) -> dict:
    """The route tree (receivers ``PAGE``, ``WATCHDOG_RECEIVER``, ``SILENT``); ``page_timing`` overrides
    ``TIMING`` (tests run it in seconds)."""
    timing = {**TIMING, **(page_timing or {})}

    def by(matcher: str, labels: list[str]) -> dict:
        return {"receiver": PAGE, "matchers": [matcher], "group_by": labels}

    return {
        "receiver": PAGE, "group_by": ["alertname"], **timing,
        "routes": [
            {"receiver": WATCHDOG_RECEIVER, "matchers": [f'alertname="{WATCHDOG}"'], "group_by": ["alertname"],
             "group_wait": "0s", "group_interval": "1m", "repeat_interval": "5m"},
            {"receiver": SILENT, "matchers": ['severity="info"']},
            by('training_job=~".+"', list(JOB)),
            by('node=~".+"', ["node"]),
            by('cluster_queue=~".+"', ["cluster_queue"]),
            by('local_queue=~".+"', ["namespace", "local_queue"]),
            by('group=~".+"', ["group"]),
        ],
    }


def inhibit_rules() -> list[dict]:
    return [{"source_matchers": [f'alertname="{src}"'], "target_matchers": [f'alertname=~"{targets}"'],
             "equal": list(equal)} for src, targets, equal in INHIBIT]


def alertmanager_config(receivers: dict[str, dict], page_timing: dict | None = None) -> dict:
    """A whole Alertmanager configuration: ``receivers`` maps ``PAGE`` and ``WATCHDOG_RECEIVER`` to their
    notifier settings (e.g. ``{"sns_configs": [...]}``); ``SILENT`` gets none."""
    missing = {PAGE, WATCHDOG_RECEIVER} - set(receivers)
    if missing:
        raise ValueError(f"alertmanager_config: receivers lacks {sorted(missing)} (wants {PAGE!r} and "
                         f"{WATCHDOG_RECEIVER!r})")
    return {"route": route(page_timing), "inhibit_rules": inhibit_rules(),
            "receivers": [{"name": name, **cfg} for name, cfg in receivers.items()] + [{"name": SILENT}]}
