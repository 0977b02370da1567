"""PlatformStack: composes the platform's constructs from one validated ClusterSpec.

``build_app(spec)`` is the single entry point used by ``app.py``, the tests and
the benchmarks: it makes the App, the stack and the cdk-nag policy validation.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.app import nag
from openpod_core import labels
from openpod_core.cloudwatch import LOG_RETENTION_DAYS
from infra.governance import queues
from openpod_core.instance_types import Accelerator
from infra.spec.cluster import ClusterSpec
from platform_constructs.buckets import PlatformBuckets
from platform_constructs.cluster import PlatformCluster
from platform_constructs.device_plugins import DevicePlugins
from infra.governance.install import system_node_selector
from infra.governance.system_group import group_taints, system_tolerations
from openpod_core.accelerator_stack import multi_node_nvlink
from platform_constructs.governance import TaskGovernance
from platform_constructs.images import ContainerImage
from platform_constructs.instance_group import InstanceGroup
from platform_constructs.lustre import LustreStorage
from platform_constructs.network import Network
from platform_constructs.node_agent import NodeHealthAgent
from platform_constructs.observability import PlatformObservability
from platform_constructs.training_access import TrainingAccess

REPO_ROOT = Path(__file__).resolve().parents[2]
TRAINING_DOCKERFILE = "training/Dockerfile"


def retention(days: int) -> logs.RetentionDays:
    """CloudWatch's retention member for exactly ``days`` (the spec refuses other values; never rounded)."""
    members = [m for m in logs.RetentionDays if m.name != "INFINITE"]
    if days not in LOG_RETENTION_DAYS or len(members) != len(LOG_RETENTION_DAYS):
        raise ValueError(f"retention: {days} days is not one of CloudWatch Logs' values {LOG_RETENTION_DAYS}")
    return members[LOG_RETENTION_DAYS.index(days)]


class PlatformStack(cdk.Stack):
    """The whole training platform below the scheduler, from ``spec``."""

    def __init__(self, scope: Construct, id: str, *, spec: ClusterSpec, repo_root: Path = REPO_ROOT,
                 **kwargs) -> None:
        self.spec = spec
        super().__init__(scope, id, description=f"openpod training platform {spec.name}", **kwargs)
        cdk.Tags.of(self).add("openpod.io/cluster", spec.name)

        # -- keys: data at rest (S3, FSx), Kubernetes secrets, logs
        self.data_key = kms.Key(self, "DataKey", enable_key_rotation=True, alias=f"openpod/{spec.name}/data",
                                description="openpod datasets, checkpoints, logs buckets and FSx for Lustre")
        self.secrets_key = kms.Key(self, "SecretsKey", enable_key_rotation=True,
                                   alias=f"openpod/{spec.name}/eks-secrets",
                                   description="openpod EKS secrets envelope encryption")
        self.log_key = kms.Key(self, "LogKey", enable_key_rotation=True, alias=f"openpod/{spec.name}/logs",
                               description="openpod CloudWatch log groups")
        self.log_key.grant_encrypt_decrypt(iam.ServicePrincipal(f"logs.{spec.region}.amazonaws.com"))

        # -- network
        self.network = Network(
            self, "Network",
            availability_zones=spec.availability_zones,
            vpc_cidr=spec.network.vpc_cidr,
            layout_azs=spec.network.layout_azs,
            local_zones=spec.local_zones,
            nat_gateways=min(spec.network.nat_gateways, len(spec.availability_zones)),
            flow_logs_retention=retention(spec.network.flow_logs_retention_days),
            flow_logs_key=self.log_key,
        )

        # -- buckets
        self.buckets = PlatformBuckets(self, "Buckets", encryption_key=self.data_key, spec=spec.storage.buckets)

        # -- cluster + add-ons
        self.platform_cluster = PlatformCluster(
            self, "Eks",
            cluster_name=spec.name,
            vpc=self.network.vpc,
            subnets=self.network.cluster_subnets(),
            version=spec.eks.version,
            secrets_key=self.secrets_key,
            log_key=self.log_key,
            log_retention_days=spec.eks.log_retention_days,
            endpoint_public=spec.eks.endpoint_public,
            endpoint_public_cidrs=spec.eks.endpoint_public_cidrs,
            access_entries=spec.eks.access_entries,
            kubernetes_groups=queues.team_members(spec),  # team users -> openpod:team:<team>
            addon_versions=spec.eks.addon_versions,
        )
        cluster = self.platform_cluster.cluster
        self.cluster = cluster

        # -- instance groups
        self.node_role = iam.Role(
            self, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="openpod EKS nodes",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in (
                # What the kubelet needs, nothing more: the VPC CNI has its own Pod Identity role
                # (PlatformCluster.cni_role); node debugging goes through `kubectl debug node/...`.
                "AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")],
        )
        self.instance_groups: dict[str, InstanceGroup] = {}
        for g in spec.instance_groups:
            if g.awaits_capacity_block:
                cdk.Annotations.of(self).add_info(
                    f"instance group {g.name}: capacity-block with no capacity.reservation_id - declared, not "
                    f"created; buy a block (`openpod capacity --group {g.name}`), add its id and deploy again")
                continue
            t = g.type
            efa = t.efa_supported
            subnets = (self.network.private_subnets(spec.group_az(g)) if efa or g.availability_zone
                       else self.network.private_subnets())
            sgs = [cluster.cluster_security_group_id]
            if efa:
                sgs.append(self.network.efa_security_group.security_group_id)
            ig = InstanceGroup(
                self, f"Group-{g.name}",
                cluster=cluster, node_role=self.node_role, group_name=g.name, instance_type=t,
                subnets=subnets, security_groups=sgs,
                min_size=g.min_size, desired_size=g.desired_size, max_size=g.max_size,
                placement_group=g.wants_placement_group,
                capacity_type=g.capacity.type, capacity_reservation_id=g.capacity.reservation_id,
                labels=g.labels, taints=group_taints(spec, g), root_volume_gib=g.root_volume_gib, volumes=g.volumes,
                local_nvme_raid0=g.local_nvme_raid0, kubernetes_version=spec.eks.version,
                update_strategy=g.update_strategy.upper() if g.update_strategy else None,
                lustre_client=True,   # the teams' FSx volumes may be mounted on any group's nodes
                spot_instance_types=g.capacity.spot_instance_types,
            )
            for addon in self.platform_cluster.network_addons:
                ig.nodegroup.node.add_dependency(addon)
            self.instance_groups[g.name] = ig
        system_groups = [self.instance_groups[g.name] for g in spec.instance_groups
                         if not g.type.is_accelerated and g.min_size >= 1]
        for addon in self.platform_cluster.workload_addons:
            for ig in system_groups:
                addon.node.add_dependency(ig.nodegroup)
        # Upgrades roll the CPU system groups before the accelerator groups (infra/deploy/upgrade.py).
        for g in spec.accelerated_groups:
            for ig in system_groups:
                if g.name in self.instance_groups:
                    self.instance_groups[g.name].nodegroup.node.add_dependency(ig.nodegroup)

        # -- shared file system
        self.network.allow_lustre_from(cluster.cluster_security_group_id)
        fsx = spec.storage.fsx
        self.lustre = LustreStorage(
            self, "Lustre",
            subnet=self.network.private_subnets(fsx.availability_zone or spec.availability_zones[0])[0],
            security_group=self.network.lustre_security_group,
            bucket=self.buckets.datasets, encryption_key=self.data_key,
            storage_capacity_gib=fsx.storage_capacity_gib, throughput_per_tib=fsx.throughput_per_tib,
            compression=fsx.compression, metadata_iops=fsx.metadata_iops,
            data_repository_path=fsx.data_repository_path, mount_path=fsx.mount_path,
            automatic_backup_retention_days=fsx.automatic_backup_retention_days,
            export_deletions=fsx.export_deletions,
        )
        # One static PersistentVolume per team, reserved for the team's `fsx-lustre` claim; the claims
        # themselves are governance objects (`openpod manifests` writes them too).
        for team in spec.teams:
            pv = self.lustre.add_volume(cluster, name=queues.fsx_volume_name(team.name), namespace=team.name,
                                        claim=queues.FSX_CLAIM)
            for ig in system_groups:
                pv.node.add_dependency(ig.nodegroup)

        # -- device plugins
        accel = {g.type.accelerator for g in spec.instance_groups}
        self.device_plugins = DevicePlugins(
            self, "DevicePlugins", cluster=cluster, chart_versions=spec.eks.chart_versions,
            efa=any(g.type.efa_supported for g in spec.instance_groups),
            nvidia=Accelerator.NVIDIA in accel, neuron=Accelerator.NEURON in accel,
            compute_domains=any(multi_node_nvlink(g.type) for g in spec.instance_groups),
            controller_node_selector=system_node_selector(spec), controller_tolerations=system_tolerations(spec),
        )
        for chart in self.device_plugins.charts.values():
            for ig in system_groups:
                chart.node.add_dependency(ig.nodegroup)

        # -- what training pods may touch: a Pod Identity role on the buckets
        self.training_access = TrainingAccess(self, "TrainingAccess", cluster=cluster,
                                              datasets=self.buckets.datasets, checkpoints=self.buckets.checkpoints,
                                              logs=self.buckets.logs)

        # -- training image, one per CPU architecture of the accelerated groups
        archs = sorted({g.type.arch for g in spec.accelerated_groups}) or ["x86_64"]
        self.training_image = ContainerImage(self, "TrainingImage", directory=str(repo_root),
                                             file=TRAINING_DOCKERFILE, architectures=archs)

        # -- task governance and node health (their own constructs)
        self.governance = TaskGovernance(self, "Governance", cluster=cluster, spec=spec,
                                         subnets=self.network.private_subnets(), log_key=self.log_key)
        self.node_agent = NodeHealthAgent(self, "NodeAgent", cluster=cluster, spec=spec,
                                          image_directory=str(repo_root),
                                          nodegroups=[ig.nodegroup for ig in self.instance_groups.values()])
        for c in (self.governance, self.node_agent):
            for ig in system_groups:
                c.node.add_dependency(ig.nodegroup)

        # -- metrics, rules and alerts (observability/, docs/observability.md)
        self.observability: PlatformObservability | None = None
        if spec.observability.enabled:
            self.observability = _observability(self, spec, cluster)

        # Training pods of each team run as its `training` service account (a governance object, created
        # with the team's namespace); associate the training role with it once the namespace exists.
        for team in spec.teams:
            association = self.training_access.allow(team.name, labels.TRAINING_SERVICE_ACCOUNT)
            if self.governance.core_manifest is not None:
                association.node.add_dependency(self.governance.core_manifest)

        # -- outputs
        cdk.CfnOutput(self, "ClusterName", value=cluster.cluster_name)
        cdk.CfnOutput(self, "FsxFileSystemId", value=self.lustre.file_system_id)
        for name, bucket in (("Datasets", self.buckets.datasets), ("Checkpoints", self.buckets.checkpoints),
                             ("Logs", self.buckets.logs)):
            cdk.CfnOutput(self, f"{name}Bucket", value=bucket.bucket_name)
        cdk.CfnOutput(self, "TrainingRoleArn", value=self.training_access.role.role_arn)
        for arch in self.training_image.assets:
            cdk.CfnOutput(self, f"TrainingImage{arch.replace('_', '').upper()}",
                          value=self.training_image.image_uri(arch))

        nag.acknowledge(self)

    @property
    def availability_zones(self) -> list[str]:
        """The spec's AZs: never a context lookup, even when the spec names an account."""
        return list(self.spec.availability_zones)


def _observability(stack: PlatformStack, spec: ClusterSpec, cluster) -> PlatformObservability:
    """The exporters, and the workspace, scraper, rules and alerting of ``spec.observability``."""
    from aws_cdk import aws_sns as sns

    from infra.governance.install import system_node_selector
    from observability.rules import rule_groups
    from observability.scrape import prometheus_config
    from platform_constructs.exporters import MetricsExporters

    o = spec.observability
    topic = sns.Topic.from_topic_arn(stack, "AlertTopic", o.alert_topic_arn) if o.alert_topic_arn else None
    stack.exporters = MetricsExporters(stack, "Exporters", cluster=cluster, chart_versions=spec.eks.chart_versions,
                                       system_node_selector=system_node_selector(spec),
                                       system_tolerations=system_tolerations(spec),
                                       nvidia=any(g.type.accelerator == Accelerator.NVIDIA for g in spec.instance_groups),
                                       neuron=any(g.type.accelerator == Accelerator.NEURON for g in spec.instance_groups))
    for g in spec.instance_groups:  # the charts' pods need the system nodes up (as the other charts)
        if not g.type.is_accelerated and g.min_size >= 1 and g.name in stack.instance_groups:
            for chart in stack.exporters.charts.values():
                chart.node.add_dependency(stack.instance_groups[g.name].nodegroup)
    obs = PlatformObservability(
        stack, "Observability", cluster=cluster, subnets=stack.network.private_subnets(),
        rule_groups=rule_groups(o.alerts), scrape_config=prometheus_config(f"{o.scrape_interval_seconds}s"),
        alias=f"openpod-{spec.name}", collector=o.collector, retention_days=o.retention_days,
        kms_key_arn=o.kms_key_arn, alert_topic=topic, grafana=o.grafana)
    obs.alarm_on_lustre(stack.lustre.file_system.ref, storage_capacity_gib=spec.storage.fsx.storage_capacity_gib,
                        free_percent=o.alerts.fsx_free_percent)
    obs.alarm_on_usage(usage_percent=o.alerts.amp_usage_percent, active_series_quota=o.alerts.amp_active_series_quota,
                       ingestion_rate_quota=o.alerts.amp_ingestion_rate_quota)
    cdk.CfnOutput(stack, "PrometheusWorkspaceArn", value=obs.workspace.attr_arn)
    cdk.CfnOutput(stack, "AlertTopicArn", value=obs.alert_topic.topic_arn)
    if obs.grafana is not None:
        cdk.CfnOutput(stack, "GrafanaUrl", value=obs.grafana.attr_endpoint)
    return obs


def environment(spec: ClusterSpec) -> cdk.Environment:
    return cdk.Environment(region=spec.region, account=spec.account)


def project_context() -> dict:
    """The feature flags of ``cdk.json`` (and ``cdk.context.json``), so synth outside the CLI matches it."""
    ctx: dict = {}
    for name in ("cdk.json", "cdk.context.json"):
        path = REPO_ROOT / name
        if path.exists():
            data = json.loads(path.read_text())
            ctx.update(data.get("context", {}) if name == "cdk.json" else data)
    return ctx


def new_app(*, outdir: str | None = None, context: dict | None = None) -> cdk.App:
    """An App with the project's feature flags (``cdk.json``) plus ``context``."""
    return cdk.App(outdir=outdir, context={**project_context(), **(context or {})}, analytics_reporting=False)


def build_app(spec: ClusterSpec, *, app: cdk.App | None = None, outdir: str | None = None,
              checks: bool = True, repo_root: Path = REPO_ROOT) -> tuple[cdk.App, PlatformStack]:
    """The CDK app for ``spec``: one PlatformStack named after the cluster, cdk-nag AwsSolutions enforced."""
    app = app or new_app(outdir=outdir)
    if spec.pipeline is not None and spec.pipeline.provider == "codepipeline":
        from infra.app import pipeline  # the platform becomes the pipeline's stage, under the same stack name

        def platform(stage: Construct) -> PlatformStack:
            return PlatformStack(stage, "Platform", spec=spec, repo_root=repo_root, stack_name=spec.name,
                                 env=environment(spec))

        stack = pipeline.PipelineStack(app, f"{spec.name}-pipeline", spec=spec, platform=platform,
                                       env=environment(spec),
                                       plan=pipeline.read_plan(app.node.try_get_context("plan"))).stage.platform
    else:
        stack = PlatformStack(app, spec.name, spec=spec, repo_root=repo_root, env=environment(spec))
        if spec.pipeline is not None:
            from infra.app import pipeline

            pipeline.GitHubDeployStack(app, f"{spec.name}-github", spec=spec, env=environment(spec))
    if checks:
        nag.add_checks(app)
    return app, stack
