"""The spec's ``observability:`` section: where metrics go, how long they stay, and where alerts are sent.

On by default: an Amazon Managed Service for Prometheus workspace, a managed
scraper for the EKS cluster, the platform's rule groups (observability/rules.py)
in the workspace, and its alert manager publishing to an encrypted SNS topic.
``collector: in-cluster`` creates the workspace, rules and alerting but no
scraper: an in-cluster Prometheus (or agent) remote-writes to the workspace.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from observability.thresholds import AlertThresholds

KMS_KEY_ARN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$"
SNS_TOPIC_ARN = r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$"


class ObservabilitySpec(BaseModel):
    """Metrics collection, rules and alert routing of the platform."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="create the workspace, scraper, rules and alert topic")
    collector: Literal["managed-scraper", "in-cluster"] = Field(
        "managed-scraper", description="managed-scraper: an AMP scraper pulls from the cluster; in-cluster: "
        "your own Prometheus or agent remote-writes to the workspace")
    retention_days: int = Field(150, ge=1, le=1095, description="days the workspace keeps metrics")
    kms_key_arn: str | None = Field(
        None, pattern=KMS_KEY_ARN,
        description="customer managed key of the workspace (in-cluster collector only: AMP managed scrapers "
                    "cannot write to a workspace with a customer managed key); default: AWS owned key")
    scrape_interval_seconds: int = Field(30, ge=10, le=300, description="how often every target is scraped")
    alert_topic_arn: str | None = Field(
        None, pattern=SNS_TOPIC_ARN,
        description="existing SNS topic for alerts (its policy must let aps.amazonaws.com publish); "
                    "default: a topic encrypted with a key of the platform")
    grafana: bool = Field(False, description="an Amazon Managed Grafana workspace (sign-in with IAM Identity Center, "
                                            "which must be enabled) whose role may only query this workspace")
    alerts: AlertThresholds = Field(AlertThresholds(), description="alert thresholds (docs/observability.md)")

    @model_validator(mode="after")
    def _managed_scraper_needs_aws_owned_key(self) -> ObservabilitySpec:
        if self.enabled and self.collector == "managed-scraper" and self.kms_key_arn:
            raise ValueError(
                "kms_key_arn: an AMP workspace with a customer managed key cannot receive metrics from a managed "
                "scraper (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html); "
                "remove kms_key_arn or set collector: in-cluster")
        return self
