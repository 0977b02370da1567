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

from observability.metrics import JOB_CONTROLLER, JOB_DCGM
from observability.rule_base import MANAGERS
from observability.rules import WATCHDOG
from observability.scrape import MONITORING_NAMESPACE, OPENPOD_NAMESPACE

PAGE = "page"            # critical and warning alerts: the on-call topic
WATCHDOG_RECEIVER = "watchdog"
SILENT = "dashboard"     # info alerts: no notification
JOB = ["namespace", "training_job"]

# (timing of a group: first wait, then at most one notification per interval, repeated while it fires)
TIMING = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}

# The remediation controller's Deployment and the node agent's DaemonSets (node_agent/deploy.py CONTROLLER,
# DETECTOR-<arch>); tests/observability/test_incident_pages.py holds them to it.
REMEDIATION_DEPLOYMENT = "node-remediation"
AGENT_DAEMONSETS = "node-health-agent-.+"
DCGM_PODS = "dcgm-exporter-.+"      # the dcgm-exporter chart's release (platform_constructs/exporters.py)
# The remediation controller gone: down, or its scrape job absent (no pod scheduled)
_REMEDIATION_GONE = (("OpenpodRemediationControllerDown", ()), ("OpenpodScrapeJobAbsent", (f'job="{JOB_CONTROLLER}"',)))

# What one alert makes redundant (source -> targets, for the labels in ``equal``; [] = whatever their labels),
# and, where given, the source's further matchers and then the targets' (a target pinned to one object where no
# label joins it to the source). observability/incidents.py is the incidents they are checked on: one page each.
INHIBIT = [
    # A fleet event (many nodes not Ready at once) is one incident, not one per node.
    ("OpenpodManyNodesNotReady", "OpenpodNodeNotReady|OpenpodNodeReadyFlapping|OpenpodNodeAgentDown"
     "|OpenpodScrapeTargetDown|OpenpodNodeAcceleratorsLost|OpenpodNodePendingReboot|OpenpodNodePendingReplacement"
     "|OpenpodJobMetricsDown", []),
    # Nodes queued behind a used-up remediation budget are that incident (a rolling reboot, an AZ event), not
    # one ticket each. The node agent's series carry no group, so this holds across groups: the budget alert
    # names its group and the queued nodes are on its dashboard.
    ("OpenpodRemediationBudgetExhausted", "OpenpodNodePendingReboot|OpenpodNodePendingReplacement", []),
    # A crash-looping job is also blind, slow and behind on checkpoints: say it once. (Not its JobHung, a
    # critical, when it loops past step 1: both go in the job's one notification.)
    ("OpenpodJobCrashLooping", "OpenpodJobMetricsDown|OpenpodGoodputBelowTarget|OpenpodCheckpointTooOld"
     "|OpenpodStepTimeRegression", JOB),
    # An inactive ClusterQueue explains its stalled and starving queue, and its LocalQueues' oldest workloads (their
    # alert carries the ClusterQueue where the LocalQueue's series gives it; one without it is not silenced).
    ("OpenpodClusterQueueInactive", "OpenpodTeamQueueStalled|OpenpodTeamQueueStarving"
     "|OpenpodTeamStarvedUnderQuota|OpenpodWorkloadsEvictedRepeatedly|OpenpodWorkloadStarving", ["cluster_queue"]),
    # A hung job also misses its goodput, step-time and checkpoint objectives: say it once.
    ("OpenpodJobHung", "OpenpodStepTimeRegression|OpenpodGoodputBelowTarget|OpenpodTrainingStraggler"
     "|OpenpodCheckpointTooOld", JOB),
    # A node that is not Ready explains its agent's silence and its lost devices.
    ("OpenpodNodeNotReady", "OpenpodNodeAgentDown|OpenpodScrapeTargetDown|OpenpodNodeAcceleratorsLost"
     "|OpenpodGPUXidError|OpenpodNodePendingReboot|OpenpodNodeAgentCheckErroring", ["node"]),
    # A node already marked for replacement: its Xids, lost devices and reboot are part of that.
    ("OpenpodNodePendingReplacement", "OpenpodNodePendingReboot|OpenpodNodeAcceleratorsLost|OpenpodGPUXidError"
     "|OpenpodNodeFindingRepeated|OpenpodNodeAgentCheckErroring|OpenpodGPUPCIeReplaysHigh", ["node"]),
    # A node waiting for its reboot: the Xid it holds is the reason.
    ("OpenpodNodePendingReboot", "OpenpodGPUXidError|OpenpodNodeFindingRepeated", ["node"]),
    # A controller manager (Kueue's, JobSet's) gone, crash-looping or short of replicas is one incident: its
    # Deployment's and scrape target's warnings follow from it. The managers' scrape alerts carry their namespace
    # (rule_base.with_manager_namespace); the crash loop's is held to those namespaces, where the manager is the
    # only workload (elsewhere one component's crash loop would hide another's outage). Nothing critical is
    # silenced by a warning (a manager without a leader pages whatever its Deployment says).
    ("OpenpodScrapeJobAbsent", "OpenpodPlatformDeploymentUnavailable|OpenpodPlatformPodCrashLooping", ["namespace"]),
    ("OpenpodPlatformPodCrashLooping", "OpenpodPlatformDeploymentUnavailable|OpenpodScrapeTargetDown",
     ["namespace"], (MANAGERS,)),
    ("OpenpodPlatformDeploymentUnavailable", "OpenpodScrapeTargetDown", ["namespace"]),
    # A node's dcgm-exporter or agent crash-looping is why that node's exporter or agent does not answer: the crash
    # loop carries its pod's node (kube_pod_info, platform_rules.py) and groups with the node's alerts. Held to
    # that component's pods and to alerts that always carry node (dcgm-exporter's target, the agent's), the crash
    # loop with node (no node, no join: a missing label on both sides would match every node).
    ("OpenpodPlatformPodCrashLooping", "OpenpodScrapeTargetDown", ["node"],
     (f'namespace="{MONITORING_NAMESPACE}"', f'pod=~"{DCGM_PODS}"', 'node=~".+"'), (f'job="{JOB_DCGM}"',)),
    ("OpenpodPlatformPodCrashLooping", "OpenpodNodeAgentDown", ["node"],
     (f'namespace="{OPENPOD_NAMESPACE}"', f'pod=~"{AGENT_DAEMONSETS}"', 'node=~".+"')),
    # Without the controller (down, or no pod scheduled: its scrape job absent) nothing is remediated: one page
    # for it, not one per waiting node; and its own Deployment short or pod crash-looping is that same outage.
    # Its alerts carry only the scrape job, so those targets are held to the controller's own objects by name.
    *((src, "OpenpodNodePendingReboot|OpenpodNodePendingReplacement|OpenpodRemediationStuck"
       "|OpenpodRemediationLeaderless", [], more) for src, more in _REMEDIATION_GONE),
    *((src, "OpenpodPlatformDeploymentUnavailable", [], more,
       (f'namespace="{OPENPOD_NAMESPACE}"', f'deployment="{REMEDIATION_DEPLOYMENT}"'))
      for src, more in _REMEDIATION_GONE),
    *((src, "OpenpodPlatformPodCrashLooping", [], more,
       (f'namespace="{OPENPOD_NAMESPACE}"', f'pod=~"{REMEDIATION_DEPLOYMENT}-.+"')) for src, more in _REMEDIATION_GONE),
    # Without a leader nothing is remediated either (the controller is up, so the alert above stays off).
    ("OpenpodRemediationLeaderless", "OpenpodNodePendingReboot|OpenpodNodePendingReplacement", []),
    # The node agent's DaemonSet short of nodes: the nodes without an agent are that one incident (both warnings).
    ("OpenpodPlatformDaemonSetUnavailable", "OpenpodNodeAgentMissing", [],
     (f'namespace="{OPENPOD_NAMESPACE}"', f'daemonset=~"{AGENT_DAEMONSETS}"')),
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
            by('group=~".+"', ["group"]),
            by('node=~".+"', ["node"]),
            by('cluster_queue=~".+"', ["cluster_queue"]),
            by('local_queue=~".+"', ["namespace", "local_queue"]),
        ],
    }


def _matches(matcher: str, labels: dict[str, str]) -> bool:
    import re

    name, op, value = re.fullmatch(r'(\w+)(=~|=)"(.*)"', matcher).groups()
    got = labels.get(name, "")
    return re.fullmatch(value, got) is not None if op == "=~" else got == value


def receiver_of(labels: dict[str, str]) -> tuple[str, list[str]]:
    """Where an alert with ``labels`` goes: (receiver, group_by), the first matching sub-route as Alertmanager
    picks it (``continue`` is never set). Only the matcher forms route() uses are understood."""
    r = route()
    for sub in r["routes"]:
        if all(_matches(m, labels) for m in sub["matchers"]):
            return sub["receiver"], sub.get("group_by", r["group_by"])
    return r["receiver"], r["group_by"]


def inhibited_by(alertname: str) -> list[str]:
    """The alerts that silence ``alertname`` (with the labels they must share)."""
    import re

    return [(f"{src} (same {', '.join(eq)})" if eq else src) + "".join(f" ({m})" for m in src_m)
            + "".join(f" (if {m})" for m in tgt_m)
            for src, targets, eq, src_m, tgt_m in map(expanded, INHIBIT) if re.fullmatch(targets, alertname)]


def expanded(rule: tuple) -> tuple:
    """An INHIBIT entry with its optional source and target matchers filled in: (src, targets, equal, src_m, tgt_m)."""
    src, targets, equal, *more = rule
    return (src, targets, equal, *(tuple(more) + ((), ()))[:2])


def inhibit_rules() -> list[dict]:
    return [{"source_matchers": [f'alertname="{src}"', *src_m],
             "target_matchers": [f'alertname=~"{targets}"', *tgt_m], "equal": list(equal)}
            for src, targets, equal, src_m, tgt_m in map(expanded, INHIBIT)]


def alertmanager_config(receivers: dict[str, dict], page_timing: dict | None = None) -> dict:
    """A whole Alertmanager configuration: ``receivers`` maps ``PAGE`` and ``WATCHDOG_RECEIVER`` to their
    notifier settings (e.g. ``{"sns_configs": [...]}``); ``SILENT`` gets none."""
    missing = {PAGE, WATCHDOG_RECEIVER} - set(receivers)
    if missing:
        raise ValueError(f"alertmanager_config: receivers lacks {sorted(missing)} (wants {PAGE!r} and "
                         f"{WATCHDOG_RECEIVER!r})")
    return {"route": route(page_timing), "inhibit_rules": inhibit_rules(),
            "receivers": [{"name": name, **cfg} for name, cfg in receivers.items()] + [{"name": SILENT}]}
