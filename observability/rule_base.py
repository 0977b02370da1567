"""What every rule of observability/rules.py is made of: the rule types and the selectors (each names its scrape
job) shared by the rule modules."""

from __future__ import annotations

from dataclasses import dataclass

from observability.metrics import JOB_CONTROLLER, JOB_DCGM, JOB_DETECTOR, JOB_JOBSET, JOB_KSM, JOB_KUEUE, JOB_TRAINING
from observability.scrape import JOBSET_NAMESPACE, KUEUE_NAMESPACE

JOB = ("namespace", "training_job")   # a training job's identity across its pods and incarnations
BY_JOB = "by (namespace, training_job)"
# Every selector names its scrape job: a team pod serving the same metric names (scraped as JOB_EXPORTERS or
# JOB_TRAINING) must not raise platform alerts (tests/observability/test_rules.py, the impostor cases).
DET = f'job="{JOB_DETECTOR}"'
CTL = f'job="{JOB_CONTROLLER}"'
TRN = f'job="{JOB_TRAINING}"'
KSM = f'job="{JOB_KSM}"'
DCGM = f'job="{JOB_DCGM}"'
# Kueue HA followers report too (kueue@v0.19.2:pkg/metrics/metrics.go:300-312)
LEADER = f'job="{JOB_KUEUE}", replica_role!="follower"'
READY = f'kube_node_status_condition{{{KSM}, condition="Ready", status="true"}}'
# A gap in scraping (an exporter restarting, a missed scrape) must not restart a ``for:``: rules that need a
# condition to hold read the last sample within GAP, not only the current one.
GAP = "5m"
# Extended resources as kube-state-metrics names them ("." and "/" -> "_"; observability/metrics.py _ksm):
# nvidia.com/gpu, aws.amazon.com/neuron, aws.amazon.com/neuroncore, aws.amazon.com/neurondevice, vpc.amazonaws.com/efa.
ACCELERATOR_RESOURCES = ("nvidia_com_gpu|aws_amazon_com_neuron|aws_amazon_com_neuroncore|aws_amazon_com_neurondevice"
                         "|vpc_amazonaws_com_efa")
# The namespaces of the two controller managers the kueue and jobset scrape jobs read. Their targets carry no
# namespace label (one on the target would rename the Kueue metrics' own to exported_namespace), so the alerts
# about a manager add it (:func:`with_manager_namespace`): an alert about the manager's pods or Deployment in that
# namespace then silences them (observability/routing.py INHIBIT).
MANAGERS = f'namespace=~"{KUEUE_NAMESPACE}|{JOBSET_NAMESPACE}"'
RUNBOOKS = "docs/runbooks.md"   # one section per alert (observability/runbooks.py); relative to the repository


def with_manager_namespace(expr: str) -> str:
    """``expr``'s series of the kueue and jobset scrape jobs labelled with their manager's namespace."""
    return (f'label_replace(label_replace({expr}, "namespace", "{KUEUE_NAMESPACE}", "job", "{JOB_KUEUE}"), '
            f'"namespace", "{JOBSET_NAMESPACE}", "job", "{JOB_JOBSET}")')


def runbook_url(alert: str) -> str:
    """The alert's runbook section: GitHub's anchor of the heading ``## <alert>`` (lower case)."""
    return f"{RUNBOOKS}#{alert.lower()}"


@dataclass(frozen=True)
class Record:
    record: str
    expr: str
    help: str


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str          # critical: pages; warning: ticket; info: dashboard
    summary: str
    description: str
    runbook: str           # what the operator does, one line (docs/runbooks.md renders it)
    about: tuple[str, ...] = ()   # the labels it carries: the object the incident is about (routing groups by them)
