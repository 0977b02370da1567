"""The controllers' metrics Services the scrape jobs select are the ones the platform's installs create."""

from __future__ import annotations

from infra.governance import install
from observability.metrics import JOB_JOBSET, JOB_KUEUE
from observability.scrape import JOBSET_METRICS_SERVICE, JOBSET_NAMESPACE, KUEUE_NAMESPACE, SA_TOKEN, scrape_configs


def _job(name: str) -> dict:
    return next(j for j in scrape_configs() if j["job_name"] == name)


def test_the_jobset_controller_is_scraped_where_its_chart_puts_its_metrics_service():
    """jobset@v0.12.0 charts/jobset: Service <fullname>-metrics-service, fullname the release name when that
    contains the chart's name "jobset" (templates/_helpers.tpl:27-33), port https (facts jobset.metrics.endpoint)."""
    job = _job(JOB_JOBSET)
    assert JOBSET_NAMESPACE == install.JOBSET_NAMESPACE and "jobset" in install.JOBSET_RELEASE
    assert JOBSET_METRICS_SERVICE == f"{install.JOBSET_RELEASE}-metrics-service"
    assert job["kubernetes_sd_configs"] == [{"role": "endpoints", "namespaces": {"names": [JOBSET_NAMESPACE]}}]
    keep = {r["source_labels"][0]: r["regex"] for r in job["relabel_configs"] if r.get("action") == "keep"}
    assert keep == {"__meta_kubernetes_service_name": JOBSET_METRICS_SERVICE,
                    "__meta_kubernetes_endpoint_port_name": "https"}
    assert job["scheme"] == "https" and job["authorization"] == {"credentials_file": SA_TOKEN}
    assert KUEUE_NAMESPACE == install.KUEUE_NAMESPACE and _job(JOB_KUEUE)["scheme"] == "https"
