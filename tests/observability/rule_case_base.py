"""What the alert cases of rule_cases.py and rule_cases_platform.py are made of: the series builder, the case
type and the label sets of each scrape job's series."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES_FILE = ROOT / "docs" / "prometheus-rules.yaml"

DET = {"job": "openpod-node-agent"}
CTL = {"job": "openpod-remediation", "pod": "node-remediation-7c9"}
TRAIN = {"job": "openpod-training", "namespace": "team-a", "training_job": "llm", "pod": "llm-node-0-0"}
KUEUE = {"job": "kueue", "replica_role": "leader"}
KSM = {"job": "kube-state-metrics", "instance": "10.0.0.3:8080"}
JS = {"job": "jobset", "instance": "10.0.0.6:8443", "pod": "jobset-controller-7f5"}
DCGM = {"job": "dcgm-exporter", "instance": "10.0.1.4:9400", "UUID": "GPU-1", "modelName": "NVIDIA H100 80GB HBM3"}
# dcgm-exporter's Kubernetes mapping labels the GPU's series with the pod using it (scraped with honor_labels)
DCGM_POD = {"namespace": "team-a", "pod": "llm-node-3-0", "container": "trainer"}
JOB = {"namespace": "team-a", "training_job": "llm"}


def s(name: str, labels: dict, values: str) -> dict:
    sel = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{sel}}}", "values": values}


@dataclass
class Case:
    alert: str
    at: str
    series: list[dict]
    fires: list[dict] = field(default_factory=list)   # expected alert labels (without severity/alertname)
    summaries: list[str] = field(default_factory=list)
    also_at: tuple[str, ...] = ()   # more evaluation times with the same expectation (one alert throughout)

    @property
    def kind(self) -> str:
        return "fires" if self.fires else "silent"
