"""Metrics and alerts of the platform: an Amazon Managed Service for Prometheus workspace, its managed
scraper for the EKS cluster, the platform's rule groups, and alert routing to an encrypted SNS topic.

Scraper prerequisites (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html,
checked 2026-11-23): subnets in at least two Availability Zones, the cluster's security group and
subnets, a cluster endpoint with private access, DNS in the VPC. The scraper reaches the cluster as
the service-linked role it is given; an EKS access entry maps that role to a Kubernetes user, and a
ClusterRole lets that user discover targets and read ``/metrics`` (Kueue's metrics endpoint authorizes
each scrape against RBAC: kubernetes-sigs/kueue@v0.19.2:cmd/kueue/main.go:188-191).
"""

from __future__ import annotations

from typing import Literal, Mapping, Sequence

import aws_cdk as cdk
import yaml
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from observability import routing

SCRAPER_USER = "aps-collector-user"   # the Kubernetes user the access entry maps the scraper's role to
RULES_NAMESPACE = "openpod"
APS = "aps.amazonaws.com"
# What a Grafana data source needs to query a workspace (grafana-amazonprometheus-datasource "Before you begin":
# https://grafana.com/docs/plugins/grafana-amazonprometheus-datasource/latest/configure/, checked 2026-11-23).
QUERY_ACTIONS = ["aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"]


def scraper_rbac() -> list[dict]:
    """What the scraper may read: target discovery (pods, endpoints, services, nodes) and ``GET /metrics``."""
    name = "openpod-aps-collector"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [
             {"apiGroups": [""], "resources": ["nodes", "nodes/metrics", "services", "endpoints", "pods"],
              "verbs": ["get", "list", "watch"]},
             {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
             {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
         ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": SCRAPER_USER}]},
    ]


def alertmanager_definition(region: str) -> str:
    """The workspace's alert manager configuration (observability/routing.py): pages to the alert topic
    (``${TopicArn}``), the watchdog to its own topic (``${WatchdogTopicArn}``); both are substituted.

    Format: https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-config.html
    (an ``alertmanager_config`` key holding Alertmanager's YAML; ``sns_configs`` with ``sigv4``).
    """
    def sns_to(arn: str) -> dict:
        return {"sns_configs": [{"topic_arn": arn, "sigv4": {"region": region}}]}

    config = routing.alertmanager_config({routing.PAGE: sns_to("${TopicArn}"),
                                          routing.WATCHDOG_RECEIVER: sns_to("${WatchdogTopicArn}")})
    inner = yaml.safe_dump(config, sort_keys=False)
    return "alertmanager_config: |\n" + "".join(f"  {line}\n" for line in inner.splitlines())


class PlatformObservability(Construct):
    """An AMP workspace with the platform's rules and alert routing and, for ``collector="managed-scraper"``,
    a managed scraper of ``cluster``.

    ``rule_groups`` and ``scrape_config`` are Prometheus rule-file and configuration documents
    (observability/rules.py, observability/scrape.py). ``kms_key_arn`` encrypts the workspace (not
    allowed with the managed scraper, see infra/spec/observability.py); ``alert_topic`` is an existing
    topic, else one encrypted with a new key is created (an existing topic's key must let
    ``cloudwatch.amazonaws.com`` publish: the watchdog alarm pages through it). A second topic receives the
    always-firing watchdog alert; an alarm on it pages when it falls silent (a dead-man's switch).
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.Cluster, subnets: Sequence[ec2.ISubnet],
                 rule_groups: Mapping, scrape_config: Mapping, alias: str,
                 collector: Literal["managed-scraper", "in-cluster"] = "managed-scraper",
                 retention_days: int = 150, kms_key_arn: str | None = None,
                 alert_topic: sns.ITopic | None = None, grafana: bool = False) -> None:
        super().__init__(scope, id)
        if collector not in ("managed-scraper", "in-cluster"):
            raise ValueError(f"PlatformObservability: collector must be managed-scraper or in-cluster, got {collector!r}")
        if not 1 <= retention_days <= 1095:
            raise ValueError(f"PlatformObservability: retention_days must be 1..1095, got {retention_days}")
        if collector == "managed-scraper" and kms_key_arn:
            raise ValueError("PlatformObservability: kms_key_arn cannot be used with the managed scraper (AMP "
                             "managed collectors cannot write to a workspace with a customer managed key)")
        azs = {s.availability_zone for s in subnets}
        if collector == "managed-scraper" and (len(subnets) < 2 or len(azs) < 2):
            raise ValueError(f"PlatformObservability: the managed scraper needs subnets in at least two "
                             f"Availability Zones, got {len(subnets)} subnet(s) in {sorted(azs)}")
        if not rule_groups.get("groups"):
            raise ValueError("PlatformObservability: rule_groups has no groups")
        stack = cdk.Stack.of(self)

        # -- where alerts go
        if alert_topic is None:
            self.alert_key: kms.Key | None = kms.Key(
                self, "AlertKey", enable_key_rotation=True, description=f"openpod {alias} alert topic")
            self.alert_key.grant(iam.ServicePrincipal(APS), "kms:GenerateDataKey*", "kms:Decrypt")
            alert_topic = sns.Topic(self, "Alerts", display_name=f"openpod {alias} alerts",
                                    master_key=self.alert_key, enforce_ssl=True)
        else:
            self.alert_key = None
        self.alert_topic = alert_topic
        # The dead-man's switch: the always-firing watchdog alert is published to its own topic every 5 minutes
        # (observability/routing.py); an alarm on that topic's published messages pages when it stops.
        # (encrypted with the alert topic's key when this construct made it, else with a key of its own)
        self.watchdog_key = self.alert_key or kms.Key(self, "WatchdogKey", enable_key_rotation=True,
                                                      description=f"openpod {alias} watchdog topic")
        if self.alert_key is None:
            self.watchdog_key.grant(iam.ServicePrincipal(APS), "kms:GenerateDataKey*", "kms:Decrypt")
        self.watchdog_topic = sns.Topic(self, "Watchdog", display_name=f"openpod {alias} watchdog",
                                        master_key=self.watchdog_key, enforce_ssl=True)
        self.watchdog_alarm = cloudwatch.Alarm(
            self, "WatchdogSilent", alarm_description=f"OpenpodWatchdogSilent: openpod {alias}: the alerting pipeline "
            "stopped sending its watchdog (rule evaluation, alert manager or SNS delivery is broken)",
            metric=self.watchdog_topic.metric_number_of_messages_published(period=cdk.Duration.minutes(5),
                                                                           statistic="Sum"),
            threshold=1, comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=3, treat_missing_data=cloudwatch.TreatMissingData.BREACHING)
        self.watchdog_alarm.add_alarm_action(cw_actions.SnsAction(alert_topic))
        self._alias = alias
        if self.alert_key is not None:  # CloudWatch publishes the alarm to the encrypted alert topic
            self.alert_key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:GenerateDataKey*",
                                 "kms:Decrypt")

        # -- the workspace, its rules and alert manager
        self.workspace = aps.CfnWorkspace(
            self, "Workspace", alias=alias, kms_key_arn=kms_key_arn,
            workspace_configuration=aps.CfnWorkspace.WorkspaceConfigurationProperty(
                retention_period_in_days=retention_days),
            alert_manager_definition=cdk.Fn.sub(alertmanager_definition(stack.region),
                                                {"TopicArn": alert_topic.topic_arn,
                                                 "WatchdogTopicArn": self.watchdog_topic.topic_arn}),
        )
        for topic in (alert_topic, self.watchdog_topic):
            if isinstance(topic, sns.Topic):
                topic.add_to_resource_policy(iam.PolicyStatement(
                    sid="AmpAlertManagerPublish", principals=[iam.ServicePrincipal(APS)],
                    actions=["sns:Publish", "sns:GetTopicAttributes"], resources=[topic.topic_arn],
                    conditions={"ArnEquals": {"aws:SourceArn": self.workspace.attr_arn},
                                "StringEquals": {"aws:SourceAccount": stack.account}}))
        self.rules = aps.CfnRuleGroupsNamespace(
            self, "Rules", workspace=self.workspace.attr_arn, name=RULES_NAMESPACE,
            data=yaml.safe_dump(dict(rule_groups), sort_keys=False, width=200))

        # -- dashboards: a Managed Grafana workspace that may read this workspace and nothing else
        self.grafana: aws_grafana.CfnWorkspace | None = None
        if grafana:
            self.grafana_role = iam.Role(
                self, "GrafanaRole", description=f"Amazon Managed Grafana {alias}: query the Prometheus workspace",
                assumed_by=iam.ServicePrincipal("grafana.amazonaws.com", conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account}}))
            self.grafana_role.add_to_policy(iam.PolicyStatement(actions=QUERY_ACTIONS,
                                                                resources=[self.workspace.attr_arn]))
            self.grafana = grafana_workspace = _grafana_workspace(self, alias, self.grafana_role)
            grafana_workspace.node.add_dependency(self.grafana_role)

        # -- the managed scraper and its way into the cluster
        self.scraper: aps.CfnScraper | None = None
        if collector == "managed-scraper":
            self.scraper = aps.CfnScraper(
                self, "Scraper", alias=alias,
                source=aps.CfnScraper.SourceProperty(eks_configuration=aps.CfnScraper.EksConfigurationProperty(
                    cluster_arn=cluster.cluster_arn, subnet_ids=[s.subnet_id for s in subnets],
                    security_group_ids=[cluster.cluster_security_group_id])),
                destination=aps.CfnScraper.DestinationProperty(
                    amp_configuration=aps.CfnScraper.AmpConfigurationProperty(
                        workspace_arn=self.workspace.attr_arn)),
                scrape_configuration=aps.CfnScraper.ScrapeConfigurationProperty(
                    configuration_blob=cdk.Fn.base64(yaml.safe_dump(dict(scrape_config), sort_keys=False))),
            )
            # The scraper's RoleArn carries the service-linked role's path
            # (role/aws-service-role/scraper.aps.amazonaws.com/<name>); the access entry names role/<name>.
            role_name = cdk.Fn.select(3, cdk.Fn.split("/", self.scraper.attr_role_arn))
            self.access_entry = eks.CfnAccessEntry(
                self, "ScraperAccess", cluster_name=cluster.cluster_name, type="STANDARD",
                principal_arn=cdk.Fn.join("", [f"arn:{stack.partition}:iam::{stack.account}:role/", role_name]),
                username=SCRAPER_USER)
            self.rbac = cluster.add_manifest("ScraperRbac", *scraper_rbac())


    def alarm_on_lustre(self, file_system_id: str, *, storage_capacity_gib: int, free_percent: int) -> cloudwatch.Alarm:
        """Page (the alert topic) when the FSx for Lustre file system's free data capacity falls under
        ``free_percent`` of ``storage_capacity_gib``: AWS/FSx FreeDataStorageCapacity, Sum over its storage
        targets (facts: fsx.cloudwatch.free-data-storage-capacity). Prometheus never sees this metric."""
        if not 1 <= free_percent <= 50:
            raise ValueError(f"PlatformObservability: free_percent must be 1..50, got {free_percent}")
        if storage_capacity_gib < 1:
            raise ValueError(f"PlatformObservability: storage_capacity_gib must be >= 1, got {storage_capacity_gib}")
        free = cloudwatch.Metric(namespace="AWS/FSx", metric_name="FreeDataStorageCapacity",
                                 dimensions_map={"FileSystemId": file_system_id}, statistic="Sum",
                                 period=cdk.Duration.minutes(5))
        alarm = cloudwatch.Alarm(
            self, "FSxNearlyFull", metric=free,
            alarm_description=f"OpenpodFSxNearlyFull: openpod {self._alias}: the FSx for Lustre file system has "
            f"under {free_percent}% of its {storage_capacity_gib} GiB free (checkpoint saves fail when it is full)",
            threshold=storage_capacity_gib * 2**30 * free_percent / 100,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=3, datapoints_to_alarm=2, treat_missing_data=cloudwatch.TreatMissingData.MISSING)
        alarm.add_alarm_action(cw_actions.SnsAction(self.alert_topic))
        alarm.add_ok_action(cw_actions.SnsAction(self.alert_topic))
        return alarm

    def alarm_on_usage(self, *, usage_percent: int, active_series_quota: int,
                       ingestion_rate_quota: int) -> tuple[cloudwatch.Alarm, cloudwatch.Alarm]:
        """Page (the alert topic) when the workspace's active series or ingestion rate passes ``usage_percent`` of
        its quota: AMP refuses samples past a quota (HTTP 429), and the alerts on them go quiet while the
        watchdog, which needs no samples, still fires. AWS/Usage ResourceCount with Service Prometheus, Type
        Resource, Class None, ResourceId the workspace ID, Resource ActiveSeries or IngestionRate (facts:
        amp.cloudwatch.usage-dimensions). The quotas are values, not SERVICE_QUOTA(): that function's reach to
        AMP's per-workspace quotas is not confirmed."""
        if not 1 <= usage_percent <= 100:
            raise ValueError(f"PlatformObservability: usage_percent must be 1..100, got {usage_percent}")
        if not 1 <= active_series_quota <= 1_000_000_000:
            raise ValueError(f"PlatformObservability: active_series_quota must be 1..1000000000 (AMP's maximum), "
                             f"got {active_series_quota}")
        if ingestion_rate_quota < 1:
            raise ValueError(f"PlatformObservability: ingestion_rate_quota must be >= 1 samples per second, "
                             f"got {ingestion_rate_quota}")
        alarms = []
        for id_, resource, quota, statistic, what in (
                ("AmpActiveSeriesNearQuota", "ActiveSeries", active_series_quota, "Maximum", "active series count"),
                ("AmpIngestionRateNearQuota", "IngestionRate", ingestion_rate_quota, "Average",
                 "ingestion rate (samples per second)")):
            usage = cloudwatch.Metric(
                namespace="AWS/Usage", metric_name="ResourceCount", statistic=statistic,
                period=cdk.Duration.minutes(5),
                dimensions_map={"Service": "Prometheus", "Type": "Resource", "Class": "None",
                                "Resource": resource, "ResourceId": self.workspace.attr_workspace_id})
            alarm = cloudwatch.Alarm(
                self, id_, metric=usage,
                alarm_description=f"Openpod{id_}: openpod {self._alias}: the Prometheus workspace's {what} is over "
                f"{usage_percent}% of its quota {quota} (past it AMP refuses samples and alerts go quiet)",
                threshold=quota * usage_percent / 100,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=3, datapoints_to_alarm=2, treat_missing_data=cloudwatch.TreatMissingData.MISSING)
            alarm.add_alarm_action(cw_actions.SnsAction(self.alert_topic))
            alarm.add_ok_action(cw_actions.SnsAction(self.alert_topic))
            alarms.append(alarm)
        return alarms[0], alarms[1]

# Pinned: Amazon Managed Grafana versions move, and the dashboards' data source type needs 12 or later
# (facts: grafana.amg-versions, grafana.amg-version-12.4, grafana.amp-datasource-plugin).
GRAFANA_VERSION = "12.4"


def _grafana_workspace(scope: Construct, alias: str, role: iam.Role) -> aws_grafana.CfnWorkspace:
    return aws_grafana.CfnWorkspace(
        scope, "Grafana", name=alias, grafana_version=GRAFANA_VERSION, account_access_type="CURRENT_ACCOUNT",
        authentication_providers=["AWS_SSO"],
        permission_type="CUSTOMER_MANAGED", role_arn=role.role_arn, data_sources=["PROMETHEUS"],
        description=f"openpod {alias} dashboards (openpod dashboards --out DIR)")
