"""The observability construct: the AMP workspace, scraper, rule groups and alert topic the spec asks for."""

from __future__ import annotations

import copy
import json

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2

from infra.spec.base import SpecError
from infra.spec.loading import parse_spec
from observability.rules import rule_groups
from observability.scrape import prometheus_config
from platform_constructs.observability import SCRAPER_USER, PlatformObservability
from tests.conftest import EXAMPLES

KMS = "arn:aws:kms:us-east-2:123456789012:key/0f5e3b1c-1111-2222-3333-444455556666"


def _one(synth, type_: str) -> dict:
    (r,) = synth.resources(type_).values()
    return r["Properties"]


def _logical(synth, type_: str) -> str:
    (k,) = synth.resources(type_)
    return k


def test_the_workspace_keeps_metrics_as_long_as_the_spec_says_with_the_aws_owned_key(default):
    ws = _one(default, "AWS::APS::Workspace")
    o = default.stack.spec.observability
    assert ws["WorkspaceConfiguration"] == {"RetentionPeriodInDays": o.retention_days}
    assert "KmsKeyArn" not in ws  # managed scrapers cannot write to a customer-managed-key workspace
    assert ws["Alias"] == f"openpod-{default.stack.spec.name}"


def test_the_rule_groups_are_the_platforms_rules_at_the_spec_thresholds(default):
    rules = _one(default, "AWS::APS::RuleGroupsNamespace")
    assert rules["Workspace"] == {"Fn::GetAtt": [_logical(default, "AWS::APS::Workspace"), "Arn"]}
    assert yaml.safe_load(rules["Data"]) == rule_groups(default.stack.spec.observability.alerts)


def test_the_scraper_watches_this_cluster_from_its_private_subnets_and_writes_to_the_workspace(default):
    sc = _one(default, "AWS::APS::Scraper")
    eks_src = sc["Source"]["EksConfiguration"]
    subnets = eks_src["SubnetIds"]
    assert len(subnets) == len(default.stack.spec.availability_zones) >= 2
    assert all("nodes" in s["Ref"] for s in subnets)  # the private (node) subnets
    assert eks_src["ClusterArn"]["Fn::GetAtt"][1] == "Arn"
    assert eks_src["SecurityGroupIds"][0]["Fn::GetAtt"][1] == "ClusterSecurityGroupId"
    assert sc["Destination"]["AmpConfiguration"]["WorkspaceArn"] == {
        "Fn::GetAtt": [_logical(default, "AWS::APS::Workspace"), "Arn"]}
    blob = sc["ScrapeConfiguration"]["ConfigurationBlob"]["Fn::Base64"]
    interval = default.stack.spec.observability.scrape_interval_seconds
    assert yaml.safe_load(blob) == prometheus_config(f"{interval}s")


def test_the_scraper_role_gets_an_access_entry_and_read_only_rbac(default):
    entries = [r["Properties"] for r in default.resources("AWS::EKS::AccessEntry").values()
               if r["Properties"].get("Username") == SCRAPER_USER]
    assert len(entries) == 1 and entries[0]["Type"] == "STANDARD"
    assert "AccessPolicies" not in entries[0]  # Kubernetes RBAC only, no EKS access policy
    role = entries[0]["PrincipalArn"]["Fn::Join"][1][-1]   # arn:<partition>:iam::<account>:role/ + the name
    assert role["Fn::Select"][0] == 3 and role["Fn::Select"][1]["Fn::Split"][0] == "/"
    manifests = [r for r in default.resources("Custom::AWSCDK-EKS-KubernetesResource").values()
                 if "openpod-aps-collector" in str(r["Properties"].get("Manifest"))]
    assert len(manifests) == 1
    text = str(manifests[0]["Properties"]["Manifest"])
    assert "nonResourceURLs" in text and "/metrics" in text
    for verb in ("create", "update", "patch", "delete"):
        assert f'"{verb}"' not in text and f"'{verb}'" not in text


def test_alerts_go_to_an_encrypted_topic_only_this_workspace_may_publish_to(default):
    topics = default.resources("AWS::SNS::Topic")
    topic_id = next(k for k in topics if k.startswith("ObservabilityAlerts"))
    watchdog_id = next(k for k in topics if k.startswith("ObservabilityWatchdog"))
    key_id = next(k for k in default.resources("AWS::KMS::Key") if k.startswith("ObservabilityAlertKey"))
    for t in (topic_id, watchdog_id):
        assert topics[t]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    for policy in default.resources("AWS::SNS::TopicPolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        aps = next(s for s in statements if s.get("Sid") == "AmpAlertManagerPublish")
        assert aps["Principal"] == {"Service": "aps.amazonaws.com"}
        assert aps["Condition"]["ArnEquals"]["aws:SourceArn"] == {
            "Fn::GetAtt": [_logical(default, "AWS::APS::Workspace"), "Arn"]}
        assert any(s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false" for s in statements)
    key_policy = default.template["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    for service in ("aps.amazonaws.com", "cloudwatch.amazonaws.com"):  # AMP publishes; the watchdog alarm too
        assert any(service in str(s["Principal"].get("Service")) and "kms:GenerateDataKey*" in s["Action"]
                   for s in key_policy), service
    am = _one(default, "AWS::APS::Workspace")["AlertManagerDefinition"]["Fn::Sub"]
    assert am[1] == {"TopicArn": {"Ref": topic_id}, "WatchdogTopicArn": {"Ref": watchdog_id}}
    config = yaml.safe_load(yaml.safe_load(am[0])["alertmanager_config"])
    receivers = {r["name"]: r for r in config["receivers"]}
    assert receivers["page"]["sns_configs"][0]["topic_arn"] == "${TopicArn}"
    assert receivers["watchdog"]["sns_configs"][0]["topic_arn"] == "${WatchdogTopicArn}"
    assert config["route"]["receiver"] == "page"
    alarm = next(r["Properties"] for k, r in default.resources("AWS::CloudWatch::Alarm").items()
                 if k.startswith("ObservabilityWatchdogSilent"))
    assert alarm["AlarmActions"] == [{"Ref": topic_id}] and alarm["TreatMissingData"] == "breaching"
    assert alarm["Dimensions"] == [{"Name": "TopicName", "Value": {"Fn::GetAtt": [watchdog_id, "TopicName"]}}]


# ---------------------------------------------------------------------------- the construct alone (no synth)
def _stack_and_subnets(azs: int):
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(account="123456789012", region="us-east-2"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=[f"us-east-2{c}" for c in "abc"[:azs]], nat_gateways=0,
                  subnet_configuration=[ec2.SubnetConfiguration(name="p", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
    return stack, vpc.isolated_subnets


def test_the_managed_scraper_refuses_subnets_in_one_availability_zone():
    stack, subnets = _stack_and_subnets(1)
    with pytest.raises(ValueError, match="at least two Availability Zones"):
        PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                              scrape_config=prometheus_config(), alias="t")


def test_the_managed_scraper_refuses_a_customer_managed_workspace_key():
    stack, subnets = _stack_and_subnets(2)
    with pytest.raises(ValueError, match="kms_key_arn"):
        PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                              scrape_config=prometheus_config(), alias="t", kms_key_arn=KMS)


def test_the_in_cluster_collector_gets_workspace_rules_and_alerts_but_no_scraper():
    stack, subnets = _stack_and_subnets(2)
    PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                          scrape_config=prometheus_config(), alias="t", collector="in-cluster", kms_key_arn=KMS,
                          retention_days=30)
    t = cdk.assertions.Template.from_stack(stack)
    t.resource_count_is("AWS::APS::Scraper", 0)
    t.resource_count_is("AWS::APS::RuleGroupsNamespace", 1)
    t.has_resource_properties("AWS::APS::Workspace", {
        "KmsKeyArn": KMS, "WorkspaceConfiguration": {"RetentionPeriodInDays": 30}})


def test_an_existing_alert_topic_is_used_as_is():
    from aws_cdk import aws_sns as sns

    stack, subnets = _stack_and_subnets(2)
    topic = sns.Topic.from_topic_arn(stack, "Existing", "arn:aws:sns:us-east-2:123456789012:oncall")
    PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                          scrape_config=prometheus_config(), alias="t", collector="in-cluster", alert_topic=topic)
    t = cdk.assertions.Template.from_stack(stack)
    t.resource_count_is("AWS::SNS::Topic", 1)   # the watchdog's (dead-man's switch), with a key of its own
    t.resource_count_is("AWS::KMS::Key", 1)
    ws = next(iter(t.find_resources("AWS::APS::Workspace").values()))["Properties"]
    subs = ws["AlertManagerDefinition"]["Fn::Sub"][1]
    assert subs["TopicArn"] == "arn:aws:sns:us-east-2:123456789012:oncall" and "WatchdogTopicArn" in subs
    (alarm,) = t.find_resources("AWS::CloudWatch::Alarm").values()   # the watchdog fell silent: page the on-call
    assert alarm["Properties"]["AlarmActions"] == ["arn:aws:sns:us-east-2:123456789012:oncall"]
    assert alarm["Properties"]["TreatMissingData"] == "breaching"


# ---------------------------------------------------------------------------- the spec section
def _spec(**observability) -> dict:
    data = copy.deepcopy(yaml.safe_load((EXAMPLES / "default.yaml").read_text()))
    data["observability"] = observability
    return data


def test_observability_is_on_by_default():
    data = _spec()
    del data["observability"]
    o = parse_spec(data).observability
    assert o.enabled and o.collector == "managed-scraper" and o.kms_key_arn is None


def test_a_customer_managed_key_with_the_managed_scraper_is_a_clear_spec_error():
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(kms_key_arn=KMS), "bad.yaml")
    (line,) = [str(p) for p in e.value.problems]
    assert "observability" in line and "kms_key_arn" in line and "collector: in-cluster" in line
    assert parse_spec(_spec(kms_key_arn=KMS, collector="in-cluster")).observability.kms_key_arn == KMS


def test_an_unknown_threshold_is_named():
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(alerts={"job_hang_minute": 5}), "bad.yaml")
    assert any("observability.alerts.job_hang_minute" in str(p) for p in e.value.problems)


# ---------------------------------------------------------------------------- exporters
def test_every_exporter_chart_is_pinned_and_annotated_for_the_scrape_job(default):
    from observability.scrape import JOB_OTHER, scrape_configs
    from platform_constructs.exporters import CHARTS, NVIDIA_CHARTS, REPOSITORIES

    charts = {r["Properties"]["Chart"]: r["Properties"]
              for r in default.resources("Custom::AWSCDK-EKS-HelmChart").values()
              if r["Properties"].get("Repository") in REPOSITORIES.values()}
    assert sorted(charts) == sorted(CHARTS + NVIDIA_CHARTS)  # the default example has NVIDIA groups
    versions = default.stack.spec.eks.chart_versions
    for name, props in charts.items():
        assert props["Version"] == versions[name] and props["Version"][0].isdigit(), name  # an exact version
        values = json.loads(props["Values"]) if isinstance(props["Values"], str) else props["Values"]
        ann = values["podAnnotations"]
        assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"].isdigit(), name
    job = next(j for j in scrape_configs() if j["job_name"] == JOB_OTHER)
    assert any(r["action"] == "keep" and r["regex"] == "true" for r in job["relabel_configs"])
    ne = json.loads(charts["prometheus-node-exporter"]["Values"])
    assert ne["tolerations"] == [{"operator": "Exists"}]  # also on tainted accelerator nodes
    dcgm = json.loads(charts["dcgm-exporter"]["Values"])
    assert dcgm["nodeSelector"] == {"openpod.io/accelerator": "nvidia"}
    assert dcgm["serviceMonitor"] == {"enabled": False}  # its default needs Prometheus Operator CRDs


def test_managed_grafana_may_only_query_this_workspace_and_passes_cdk_nag(tmp_path):
    from infra.app import nag
    from platform_constructs.observability import QUERY_ACTIONS

    app = cdk.App(outdir=str(tmp_path))
    nag.add_checks(app)
    stack = cdk.Stack(app, "G", env=cdk.Environment(account="123456789012", region="us-east-2"))
    obs = PlatformObservability(stack, "O", cluster=None, subnets=[], rule_groups=rule_groups(),
                                scrape_config=prometheus_config(), alias="t", collector="in-cluster", grafana=True)
    app.synth()  # a cdk-nag finding would fail here
    t = cdk.assertions.Template.from_stack(stack)
    t.has_resource_properties("AWS::Grafana::Workspace", {
        "PermissionType": "CUSTOMER_MANAGED", "AccountAccessType": "CURRENT_ACCOUNT",
        "AuthenticationProviders": ["AWS_SSO"], "DataSources": ["PROMETHEUS"]})
    # a pinned version that has the AMP data source type the dashboards name (failed before: none pinned)
    from observability.dashboards import DATASOURCE_TYPE
    from openpod_core.facts.register import fact
    from platform_constructs.observability import GRAFANA_VERSION

    t.has_resource_properties("AWS::Grafana::Workspace", {"GrafanaVersion": GRAFANA_VERSION})
    assert int(GRAFANA_VERSION.split(".")[0]) >= 12 and DATASOURCE_TYPE in fact("grafana.amp-datasource-plugin").value
    assert f'"{GRAFANA_VERSION}" is the GrafanaVersion' in fact("grafana.amg-version-12.4").value
    (policy,) = t.find_resources("AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(statement["Action"]) == sorted(QUERY_ACTIONS)
    assert statement["Resource"] == {"Fn::GetAtt": [stack.get_logical_id(obs.workspace), "Arn"]}
    role = next(iter(t.find_resources("AWS::IAM::Role").values()))["Properties"]["AssumeRolePolicyDocument"]
    assert role["Statement"][0]["Principal"] == {"Service": "grafana.amazonaws.com"}
    assert role["Statement"][0]["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}


# ---------------------------------------------------------------------------- Neuron monitor (Trainium groups)
def _selects(affinity: dict, node_labels: dict) -> bool:
    """Whether a required node affinity admits a node with ``node_labels`` (In / Exists terms, ORed)."""
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def ok(e: dict) -> bool:
        if e["operator"] == "In":
            return node_labels.get(e["key"]) in e["values"]
        if e["operator"] == "Exists":
            return e["key"] in node_labels
        raise AssertionError(f"operator {e['operator']} not handled by this test")
    return any(all(ok(e) for e in t["matchExpressions"]) for t in terms)


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    return any(t.get("operator") == "Exists" and not t.get("key")
               or (t.get("key") == taint["Key"] and t.get("operator") == "Exists") for t in tolerations)


def test_the_neuron_monitor_runs_on_every_trainium_node_and_nowhere_else(default):
    from openpod_core.facts.register import value
    from openpod_core.instance_types import INSTANCE_TYPES, Accelerator
    from tests.cdk.test_platform import applied

    (ds,) = [o for _, o, _ in applied(default) if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "neuron-monitor"]
    pod = ds["spec"]["template"]
    groups = {g.name: g for g in default.stack.spec.instance_groups}
    trn = [n for n, g in groups.items() if g.type.accelerator is Accelerator.NEURON]
    assert trn, "the default example has a Trainium group"
    for name, g in groups.items():
        ng = default.nodegroup(name)["Properties"] if name in default.stack.instance_groups else None
        if ng is None:
            continue  # a group without a managed node group in this example
        on = _selects(pod["spec"]["affinity"], ng["Labels"])
        assert on == (INSTANCE_TYPES[g.instance_type].accelerator is Accelerator.NEURON), name
        if on:  # scheduled despite the startup health-check taint and any other taint of the group
            assert all(_tolerates(pod["spec"]["tolerations"], t) for t in ng.get("Taints", [])), name
    (c,) = pod["spec"]["containers"]
    assert c["image"] == value("neuron-monitor.image") == "public.ecr.aws/neuron/neuron-monitor:1.3.0"
    assert c["command"] == ["/opt/bin/entrypoint.sh"] and c["args"][:2] == ["--port", "8000"]
    ann = pod["metadata"]["annotations"]
    assert ann == {"prometheus.io/scrape": "true", "prometheus.io/port": "8000"}
    assert [p["containerPort"] for p in c["ports"]] == [8000]
    # the kubernetes-pods scrape job drops only the node agent's namespace and team pods
    from observability.scrape import OPENPOD_NAMESPACE
    assert ds["metadata"]["namespace"] != OPENPOD_NAMESPACE
    assert not any(k.startswith("openpod.io/team") for k in pod["metadata"]["labels"])



# ---------------------------------------------------------------------------- AWS-side signals (CloudWatch)
def test_fsx_free_capacity_pages_the_alert_topic_through_a_cloudwatch_alarm():
    """Failed before: no rule or alarm read the file system's capacity, so a full FSx showed only as failing
    checkpoint saves."""
    stack, subnets = _stack_and_subnets(2)
    obs = PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                                scrape_config=prometheus_config(), alias="t", collector="in-cluster")
    obs.alarm_on_lustre("fs-0123456789abcdef0", storage_capacity_gib=4800, free_percent=10)
    obs.alarm_on_usage(usage_percent=80, active_series_quota=50_000_000, ingestion_rate_quota=140_000)
    t = cdk.assertions.Template.from_stack(stack)
    alarms = {a["Properties"]["AlarmDescription"].split(":")[0]: a["Properties"]
              for a in t.find_resources("AWS::CloudWatch::Alarm").values()}
    from observability.failure_modes import CLOUDWATCH_ALARMS

    assert set(alarms) == {c.name for c in CLOUDWATCH_ALARMS}   # the table's CloudWatch alarms, by name
    fsx = alarms["OpenpodFSxNearlyFull"]
    assert (fsx["Namespace"], fsx["MetricName"], fsx["Statistic"]) == ("AWS/FSx", "FreeDataStorageCapacity", "Sum")
    assert fsx["Dimensions"] == [{"Name": "FileSystemId", "Value": "fs-0123456789abcdef0"}]
    assert fsx["Threshold"] == 4800 * 2**30 * 0.10 and fsx["ComparisonOperator"] == "LessThanThreshold"
    topic = next(iter(t.find_resources("AWS::SNS::Topic", {"Properties": {"DisplayName": "openpod t alerts"}})))
    assert fsx["AlarmActions"] == [{"Ref": topic}] and fsx["OKActions"] == [{"Ref": topic}]


@pytest.mark.parametrize("kwargs, match", [({"storage_capacity_gib": 1200, "free_percent": 0}, "free_percent"),
                                           ({"storage_capacity_gib": 0, "free_percent": 10}, "storage_capacity_gib")])
def test_a_bad_fsx_alarm_setting_is_named(kwargs, match):
    stack, subnets = _stack_and_subnets(2)
    obs = PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                                scrape_config=prometheus_config(), alias="t", collector="in-cluster")
    with pytest.raises(ValueError, match=match):
        obs.alarm_on_lustre("fs-1", **kwargs)


def test_a_workspace_near_its_quotas_pages_the_alert_topic():
    """Failed before: nothing watched AMP's usage, so a workspace at its active series or ingestion rate quota lost
    samples (and the alerts on them) while the watchdog kept firing."""
    stack, subnets = _stack_and_subnets(2)
    obs = PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                                scrape_config=prometheus_config(), alias="t", collector="in-cluster")
    obs.alarm_on_usage(usage_percent=75, active_series_quota=10_000_000, ingestion_rate_quota=170_000)
    t = cdk.assertions.Template.from_stack(stack)
    alarms = {a["Properties"]["AlarmDescription"].split(":")[0]: a["Properties"]
              for a in t.find_resources("AWS::CloudWatch::Alarm").values()}
    (workspace,) = t.find_resources("AWS::APS::Workspace")
    topic = next(iter(t.find_resources("AWS::SNS::Topic", {"Properties": {"DisplayName": "openpod t alerts"}})))
    for name, resource, threshold, statistic in (
            ("OpenpodAmpActiveSeriesNearQuota", "ActiveSeries", 7_500_000, "Maximum"),
            ("OpenpodAmpIngestionRateNearQuota", "IngestionRate", 127_500, "Average")):
        a = alarms[name]
        assert (a["Namespace"], a["MetricName"], a["Statistic"]) == ("AWS/Usage", "ResourceCount", statistic)
        assert {d["Name"]: d["Value"] for d in a["Dimensions"]} == {
            "Service": "Prometheus", "Type": "Resource", "Class": "None", "Resource": resource,
            "ResourceId": {"Fn::GetAtt": [workspace, "WorkspaceId"]}}
        assert a["Threshold"] == threshold and a["ComparisonOperator"] == "GreaterThanThreshold"
        assert a["AlarmActions"] == [{"Ref": topic}] and a["OKActions"] == [{"Ref": topic}]


@pytest.mark.parametrize("kwargs, match", [
    ({"usage_percent": 0, "active_series_quota": 1, "ingestion_rate_quota": 1}, "usage_percent"),
    ({"usage_percent": 80, "active_series_quota": 2_000_000_000, "ingestion_rate_quota": 1}, "active_series_quota"),
    ({"usage_percent": 80, "active_series_quota": 1, "ingestion_rate_quota": 0}, "ingestion_rate_quota")])
def test_a_bad_amp_usage_alarm_setting_is_named(kwargs, match):
    stack, subnets = _stack_and_subnets(2)
    obs = PlatformObservability(stack, "O", cluster=None, subnets=subnets, rule_groups=rule_groups(),
                                scrape_config=prometheus_config(), alias="t", collector="in-cluster")
    with pytest.raises(ValueError, match=match):
        obs.alarm_on_usage(**kwargs)


@pytest.mark.parametrize("field, value, allowed", [
    ("amp_usage_percent", 0, "greater than or equal to 1"), ("amp_usage_percent", 101, "less than or equal to 100"),
    ("amp_active_series_quota", 0, "greater than or equal to 1"),
    ("amp_active_series_quota", 2_000_000_000, "less than or equal to 1000000000"),
    ("amp_ingestion_rate_quota", -1, "greater than or equal to 1")])
def test_a_bad_amp_usage_threshold_is_refused_in_one_line(field, value, allowed):
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(alerts={field: value}), "bad.yaml")
    (line,) = [str(p) for p in e.value.problems]
    assert line == f"observability.alerts.{field}: Input should be {allowed} (got {value})"
    assert parse_spec(_spec(alerts={field: 50})).observability.alerts.model_dump()[field] == 50


def test_the_platform_alarms_on_its_own_workspaces_usage(default):
    (workspace,) = default.resources("AWS::APS::Workspace")
    alerts = default.stack.spec.observability.alerts
    usage = {k: r["Properties"] for k, r in default.resources("AWS::CloudWatch::Alarm").items()
             if k.startswith("ObservabilityAmp")}
    assert len(usage) == 2
    for a in usage.values():
        dims = {d["Name"]: d["Value"] for d in a["Dimensions"]}
        assert dims["ResourceId"] == {"Fn::GetAtt": [workspace, "WorkspaceId"]}
        quota = {"ActiveSeries": alerts.amp_active_series_quota,
                 "IngestionRate": alerts.amp_ingestion_rate_quota}[dims["Resource"]]
        assert a["Threshold"] == quota * alerts.amp_usage_percent / 100


def test_the_platform_alarms_on_its_own_file_system(default):
    (fs_id,) = default.resources("AWS::FSx::FileSystem")
    fsx = next(r["Properties"] for k, r in default.resources("AWS::CloudWatch::Alarm").items()
               if k.startswith("ObservabilityFSxNearlyFull"))
    assert fsx["Dimensions"] == [{"Name": "FileSystemId", "Value": {"Ref": fs_id}}]
    spec = default.stack.spec
    assert fsx["Threshold"] == spec.storage.fsx.storage_capacity_gib * 2**30 * spec.observability.alerts.fsx_free_percent / 100
