"""TaskGovernance: Kueue and JobSet at pinned versions, then the spec's queues, priorities and RBAC.

The objects applied are exactly ``infra.governance.all_objects(spec)``, the list
``openpod manifests`` writes for GitOps: one source of truth.

First-deploy ordering (Kueue's webhook is not ready right after install, and
the API server rejects Kueue objects while it cannot call it):

1. JobSet chart (``wait``): its CRDs and controller exist before Kueue starts,
   so Kueue's JobSet integration is set up at start. Then the controller's
   configuration with the ``RestartJob`` feature gate (a key added to the
   chart's ConfigMap) and the patch of its Deployment that reads it
   (``infra/governance/install.py``); the controller rolls while Kueue
   installs, before any team can submit.
2. Kueue chart (``wait``): Helm returns once the controller Deployment is
   Ready; Kueue reports Ready only after its webhook certificates are in place.
3. A readiness gate (``WebhookGate``): a Lambda function dry-run creates a probe
   ResourceFlavor through the API server, retried until accepted. An Endpoints
   address is not enough: Kueue's webhook answers 502 for tens of seconds while
   its certificates bootstrap (kubernetes-sigs/kueue#13036), and the kubectl
   handler would not retry that. The Kueue version is one of its properties: an
   upgrade re-runs it.
4. Core objects (namespaces, RBAC, FSx claims, training service accounts) apply
   in parallel with 1-3: they need no webhook. Kueue objects depend on both 3
   and 4 (LocalQueues live in the team namespaces). ``core_manifest`` is public:
   the stack's Pod Identity associations wait for it.
5. Cluster-scoped objects that ``kubectl apply --prune`` would never delete
   (ClusterQueues, flavors, priorities, the Cohort, cluster RBAC, admission
   policies) each get a manifest resource of their own, so a team, flavor or
   priority removed from the spec is deleted with its resource
   (``infra/governance/lifecycle.py``); Kueue ones wait for the gate too.
"""

from __future__ import annotations

from typing import Sequence

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.governance import install
from infra.governance import lifecycle
from infra.governance.objects import CORE_KINDS, all_objects, stage
from infra.spec.cluster import ClusterSpec
from platform_constructs.webhook_gate import WebhookGate

CHART_TIMEOUT = Duration.minutes(15)
WEBHOOK_TIMEOUT = Duration.minutes(10)
WEBHOOK_GATE_GROUP = "openpod:kueue-webhook-gate"


class TaskGovernance(Construct):
    """Kueue and JobSet at pinned versions, then the spec's teams, quotas and priorities.

    :param cluster: the EKS cluster (with a kubectl provider) to install into.
    :param spec: the cluster spec; its ``eks.chart_versions`` pin ``kueue`` and ``jobset``.
    :param subnets: private subnets the webhook gate's function runs in (default: the VPC's private subnets).
    :param log_key: KMS key for the gate function's log group.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.Cluster, spec: ClusterSpec,
                 subnets: Sequence[ec2.ISubnet] | None = None, log_key: kms.IKey | None = None) -> None:
        super().__init__(scope, id)
        versions = spec.eks.chart_versions
        for chart in ("kueue", "jobset"):
            if not versions.get(chart):
                raise ValueError(f"spec.eks.charts.{chart}: a pinned version is required")

        self.jobset_chart = eks.HelmChart(
            self, "JobSet", cluster=cluster, chart="jobset", repository=install.JOBSET_CHART,
            version=versions["jobset"].lstrip("v"), release=install.JOBSET_RELEASE,
            namespace=install.JOBSET_NAMESPACE, create_namespace=True, values=install.jobset_values(spec),
            wait=True, timeout=CHART_TIMEOUT,
        )
        self.kueue_chart = eks.HelmChart(
            self, "Kueue", cluster=cluster, chart="kueue", repository=install.KUEUE_CHART,
            version=versions["kueue"].lstrip("v"), release=install.KUEUE_RELEASE,
            namespace=install.KUEUE_NAMESPACE, create_namespace=True, values=install.kueue_values(spec),
            wait=True, timeout=CHART_TIMEOUT,
        )
        self.kueue_chart.node.add_dependency(self.jobset_chart)

        # The JobSet chart has no value for feature gates: its controller reads our file (infra/governance/install.py).
        self.jobset_config = eks.KubernetesPatch(
            self, "JobSetConfig", cluster=cluster, resource_name=f"configmap/{install.JOBSET_CONFIG_MAP}",
            resource_namespace=install.JOBSET_NAMESPACE, patch_type=eks.PatchType.MERGE,
            apply_patch=install.jobset_config_patch(versions["jobset"]),
            restore_patch={"metadata": {"annotations": {install.CHART_VERSION_ANNOTATION: ""}}},
        )
        self.jobset_config.node.add_dependency(self.jobset_chart)
        self.jobset_feature_gates = eks.KubernetesPatch(
            self, "JobSetFeatureGates", cluster=cluster, resource_name=f"deployment/{install.JOBSET_CONTROLLER}",
            resource_namespace=install.JOBSET_NAMESPACE, patch_type=eks.PatchType.STRATEGIC,
            apply_patch=install.jobset_controller_patch(versions["jobset"]),
            restore_patch=install.jobset_controller_restore_patch(),
        )
        self.jobset_feature_gates.node.add_dependency(self.jobset_config)
        self.kueue_chart.node.add_dependency(self.jobset_feature_gates)

        self.webhook_gate = WebhookGate(
            self, "KueueWebhookGate", cluster=cluster, probe=install.KUEUE_WEBHOOK_PROBE,
            path=install.KUEUE_WEBHOOK_PROBE_PATH, plural=install.KUEUE_WEBHOOK_PROBE_PLURAL, group=WEBHOOK_GATE_GROUP,
            subnets=subnets, timeout=WEBHOOK_TIMEOUT, log_key=log_key, trigger={"KueueVersion": versions["kueue"]},
        )
        self.webhook_gate.node.add_dependency(self.kueue_chart)
        self.webhook_ready = self.webhook_gate.resource

        self.objects = objects = all_objects(spec)
        shared = [o for o in objects if not lifecycle.standalone(o)]
        core, kueue = stage(shared, core=True), stage(shared, core=False)
        self.core_manifest = eks.KubernetesManifest(self, "Core", cluster=cluster, manifest=core) if core else None
        self.queue_manifest = None
        if kueue:
            self.queue_manifest = eks.KubernetesManifest(self, "Queues", cluster=cluster, manifest=kueue)
            self.queue_manifest.node.add_dependency(self.webhook_ready)
            if self.core_manifest:
                self.queue_manifest.node.add_dependency(self.core_manifest)
        # One resource per cluster-scoped object kubectl's default prune allowlist misses, so removing
        # it from the spec deletes it (infra/governance/lifecycle.py). overwrite: apply, not create, so
        # objects an earlier version applied through the shared manifests are adopted, not refused.
        self.object_manifests: dict[tuple[str, str], eks.KubernetesManifest] = {}
        scope = Construct(self, "Objects")
        for obj in objects:
            if not lifecycle.standalone(obj):
                continue
            m = eks.KubernetesManifest(scope, lifecycle.resource_id(obj), cluster=cluster, manifest=[obj],
                                       overwrite=True)
            if obj["kind"] not in CORE_KINDS:
                m.node.add_dependency(self.webhook_ready)
            self.object_manifests[(obj["kind"], obj["metadata"]["name"])] = m
