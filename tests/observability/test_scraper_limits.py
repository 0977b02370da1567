"""The managed scraper's configuration keeps within what AMP's managed collectors accept.

Limits from https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html (facts
amp.scraper.authorization; checked 2026-11-23): scrape interval >= 30 s; authorization only as Bearer with
credentials_file /var/run/secrets/kubernetes.io/serviceaccount/token; only kubernetes_sd_config discovery;
static targets by IP. ``tls_config`` is not in the guide's list: it stays listed unverified in the register.
"""

from __future__ import annotations

import re

from observability.scrape import SA_TOKEN, prometheus_config
from openpod_core.facts.register import fact
from openpod_core.facts.unverified import UNVERIFIED

ALLOWED_JOB_KEYS = {"job_name", "scheme", "metrics_path", "authorization", "kubernetes_sd_configs",
                    "relabel_configs", "metric_relabel_configs", "honor_labels", "scrape_interval",
                    "scrape_timeout", "static_configs", "tls_config"}


def _seconds(d: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", d)
    assert m, d
    return int(m[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m[2]]


def test_scrape_config_is_within_the_managed_collectors_limits():
    config = prometheus_config()
    assert _seconds(config["global"]["scrape_interval"]) >= 30
    for job in config["scrape_configs"]:
        assert set(job) <= ALLOWED_JOB_KEYS, job["job_name"]
        assert "bearer_token" not in job and "bearer_token_file" not in job
        if "authorization" in job:
            assert job["authorization"].get("type", "Bearer") == "Bearer"
            assert job["authorization"]["credentials_file"] == SA_TOKEN
        if "scrape_interval" in job:
            assert _seconds(job["scrape_interval"]) >= 30
        assert "static_configs" not in job  # discovery only, never hostnames
        for sd in job.get("kubernetes_sd_configs", []):
            assert sd["role"] in {"pod", "endpoints", "service", "node", "endpointslice"}


def test_tls_config_use_is_registered_as_unverified():
    users = [j["job_name"] for j in prometheus_config()["scrape_configs"] if "tls_config" in j]
    assert users, "no job uses tls_config any more: drop its UNVERIFIED entry"
    assert any(name == "AMP scraper and tls_config" for name, _ in UNVERIFIED)
    assert "aps-collector-user" in fact("amp.scraper.access-entry").value
