"""The Prometheus scrape configuration of the platform (the managed scraper's, or an in-cluster Prometheus's).

Targets are found with Kubernetes service discovery, never by address, and every
job adds the labels the rules group by (observability/rules.py): ``node``,
``namespace``, ``pod``, and ``training_job`` for training pods.

- the node agent (detector DaemonSet, remediation controller) in openpod-system,
  by ``app.kubernetes.io/name`` and the ``prometheus.io/port`` annotation
  node_agent/deploy.py puts on their pods;
- training pods: pods with the team label that opt in with
  ``prometheus.io/scrape: "true"`` and ``prometheus.io/port`` (rank 0 serves
  ``--metrics-port``);
- Kueue's controller: its metrics Service (HTTPS 8443, authenticated by a
  bearer token and authorized by RBAC: kubernetes-sigs/kueue@v0.19.2:cmd/kueue/main.go:188-191,
  charts/kueue/values.yaml:209-215, templates/_helpers.tpl:75);
- JobSet's controller: its metrics Service, the same way (HTTPS 8443, token and RBAC:
  kubernetes-sigs/jobset@v0.12.0:main.go:77,179-186; charts/jobset/templates/prometheus/manager_metrics_service.yaml
  rendered whatever ``prometheus.enable``, which the platform leaves off);
- kube-state-metrics and dcgm-exporter (platform_constructs/exporters.py), each in a job of its own with
  ``honor_labels: true``: their series describe other objects (``node`` of kube_node_status_condition is the
  node in question; dcgm-exporter's ``namespace``/``pod`` name the pod using the GPU), and without it the
  scrape's own labels overwrite those with the exporter pod's. kube-state-metrics gets no pod identity at all
  (its ``node`` would be where the exporter runs); dcgm-exporter keeps ``node`` (a DaemonSet: its node is
  the GPUs');
- any other pod annotated ``prometheus.io/scrape: "true"`` (node exporter, Neuron monitor).
"""

from __future__ import annotations

from observability.metrics import JOB_CONTROLLER, JOB_DCGM, JOB_DETECTOR, JOB_JOBSET, JOB_KSM, JOB_KUEUE, JOB_TRAINING
from openpod_core import labels as L

OPENPOD_NAMESPACE = "openpod-system"   # node_agent/deploy.py NAMESPACE
KUEUE_NAMESPACE = "kueue-system"       # infra/governance/install.py KUEUE_NAMESPACE
JOBSET_NAMESPACE = "jobset-system"     # infra/governance/install.py JOBSET_NAMESPACE
# "<fullname>-metrics-service", fullname the release "jobset" (it contains the chart's name): jobset@v0.12.0
# charts/jobset/templates/prometheus/_helpers.tpl:20-29, templates/_helpers.tpl:27-33 (infra/governance/install.py
# JOBSET_RELEASE); its one port is named https (manager_metrics_service.yaml:30-34).
JOBSET_METRICS_SERVICE = "jobset-metrics-service"
DETECTOR_APP = "node-health-agent"     # node_agent/deploy.py DETECTOR
CONTROLLER_APP = "node-remediation"    # node_agent/deploy.py CONTROLLER
MONITORING_NAMESPACE = "openpod-monitoring"  # platform_constructs/exporters.py NAMESPACE
# The charts' pod label app.kubernetes.io/name (their "selectorLabels" helpers, checked 2026-11-25):
# prometheus-community/helm-charts@kube-state-metrics-8.4.0:charts/kube-state-metrics/templates/_helpers.tpl
# ("kube-state-metrics.selectorLabels") and NVIDIA/dcgm-exporter@4.5.3-4.8.2:deployment/templates/_helpers.tpl
# ("dcgm-exporter.selectorLabels"); the chart name, the release named after it.
KSM_APP = "kube-state-metrics"
DCGM_APP = "dcgm-exporter"
JOB_OTHER = "kubernetes-pods"
SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def _meta(name: str) -> str:
    """Prometheus's meta label name for a Kubernetes label or annotation name."""
    return "".join(c if c.isalnum() else "_" for c in name)


POD_LABEL = "__meta_kubernetes_pod_label_"
POD_ANNOTATION = "__meta_kubernetes_pod_annotation_"
SCRAPE = POD_ANNOTATION + "prometheus_io_scrape"
PORT = POD_ANNOTATION + "prometheus_io_port"
POD_IP = "__meta_kubernetes_pod_ip"
TEAM = POD_LABEL + _meta(f"{L.DOMAIN}/team")


def _keep(label: str, regex: str) -> dict:
    return {"source_labels": [label], "regex": regex, "action": "keep"}


def _drop(label: str, regex: str) -> dict:
    return {"source_labels": [label], "regex": regex, "action": "drop"}


def _copy(source: str, target: str) -> dict:
    return {"source_labels": [source], "regex": "(.+)", "target_label": target, "replacement": "$1"}


ANNOTATED_ADDRESS = {"source_labels": [POD_IP, PORT], "regex": r"(.+);(\d+)",
                     "target_label": "__address__", "replacement": "$1:$2"}
POD_IDENTITY = [_copy("__meta_kubernetes_namespace", "namespace"), _copy("__meta_kubernetes_pod_name", "pod"),
                _copy("__meta_kubernetes_pod_node_name", "node")]


def _pods(job: str, *, namespaces: list[str] | None, relabel: list[dict], identity: list[dict] | None = None) -> dict:
    sd: dict = {"role": "pod"}
    if namespaces:
        sd["namespaces"] = {"names": namespaces}
    return {"job_name": job, "kubernetes_sd_configs": [sd],
            "relabel_configs": [_keep(SCRAPE, "true"), *relabel, ANNOTATED_ADDRESS,
                                *(POD_IDENTITY if identity is None else identity)]}


APP = POD_LABEL + "app_kubernetes_io_name"


def scrape_configs() -> list[dict]:
    app = APP
    return [
        _pods(JOB_DETECTOR, namespaces=[OPENPOD_NAMESPACE], relabel=[_keep(app, DETECTOR_APP)]),
        _pods(JOB_CONTROLLER, namespaces=[OPENPOD_NAMESPACE], relabel=[_keep(app, CONTROLLER_APP)]),
        _pods(JOB_TRAINING, namespaces=None, relabel=[
            _keep(TEAM, ".+"),
            # a finished pod serves nothing: scraping it would hold up == 0 for a job that is done
            _drop("__meta_kubernetes_pod_phase", "Succeeded|Failed"),
            # the job's identity across its pods and restarts: the JobSet's name
            # (kubernetes-sigs/jobset@v0.12.0:api/jobset/v1alpha2/jobset_types.go:24), else the Job's
            # (batch.kubernetes.io/job-name, https://kubernetes.io/docs/reference/labels-annotations-taints/)
            _copy(POD_LABEL + "batch_kubernetes_io_job_name", "training_job"),
            _copy(POD_LABEL + _meta("jobset.sigs.k8s.io/jobset-name"), "training_job"),
        ]),
        {"job_name": JOB_KUEUE, "scheme": "https",
         "tls_config": {"insecure_skip_verify": True},   # the chart's self-signed serving certificate
         "authorization": {"credentials_file": SA_TOKEN},
         "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": [KUEUE_NAMESPACE]}}],
         "relabel_configs": [
             _keep("__meta_kubernetes_service_label_app_kubernetes_io_component", "metrics-service"),
             _keep("__meta_kubernetes_endpoint_port_name", "https"),
             _copy("__meta_kubernetes_pod_name", "pod")]},
        {"job_name": JOB_JOBSET, "scheme": "https",
         # no certificate is mounted (certManager off), so controller-runtime serves a self-signed one
         "tls_config": {"insecure_skip_verify": True},
         "authorization": {"credentials_file": SA_TOKEN},
         "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": [JOBSET_NAMESPACE]}}],
         "relabel_configs": [
             _keep("__meta_kubernetes_service_name", JOBSET_METRICS_SERVICE),
             _keep("__meta_kubernetes_endpoint_port_name", "https"),
             _copy("__meta_kubernetes_pod_name", "pod")]},
        {**_pods(JOB_KSM, namespaces=[MONITORING_NAMESPACE], relabel=[_keep(APP, KSM_APP)], identity=[]),
         "honor_labels": True},
        {**_pods(JOB_DCGM, namespaces=[MONITORING_NAMESPACE], relabel=[_keep(APP, DCGM_APP)],
                 identity=[_copy("__meta_kubernetes_pod_node_name", "node")]),
         "honor_labels": True},
        _pods(JOB_OTHER, namespaces=None, relabel=[
            _drop("__meta_kubernetes_namespace", OPENPOD_NAMESPACE), _drop(TEAM, ".+"),
            _drop(APP, f"{KSM_APP}|{DCGM_APP}")]),
    ]


def prometheus_config(scrape_interval: str = "30s") -> dict:
    """A whole Prometheus configuration (``global`` + ``scrape_configs``), the managed scraper's format."""
    return {"global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": scrape_configs()}
