"""WebhookGate: a deploy-time wait until an admission webhook really answers, by a retried server-side dry-run.

A Service with a ready endpoint is not enough: a webhook server can still refuse
TLS while its certificates bootstrap (Kueue: kubernetes-sigs/kueue#13036), and
the EKS kubectl handler retries a failed apply only on "i/o timeout"
(aws-cdk-lib 2.275.0, custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py:85).
This construct asks the API server the real question: it dry-run creates a probe
object (``?dryRun=All``, nothing is stored) until the answer is an acceptance,
from a Lambda function in the cluster's private subnets
(``handlers/kueue_webhook_gate/index.py``), under CDK's Provider framework.

The function authenticates with its own role through an EKS access entry whose
only Kubernetes group is bound to ``create`` on the probe's resource, nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

HANDLER_DIR = Path(__file__).parent / "handlers" / "kueue_webhook_gate"
RESOURCE_TYPE = "Custom::OpenpodWebhookGate"
# Lambda's own limit is 15 minutes; the Provider framework invokes the handler synchronously.
MAX_TIMEOUT = Duration.minutes(14)


class WebhookGate(Construct):
    """Waits at deploy time until a dry-run create of ``probe`` is accepted by the API server.

    :param cluster: the EKS cluster; the function reaches its endpoint from ``subnets`` through the cluster
        security group.
    :param probe: the object to dry-run create (apiVersion, kind, metadata.name).
    :param path: the API path to POST it to, ending in ``?dryRun=All``.
    :param plural: the probe's resource (plural) the function's Kubernetes group may create.
    :param group: the Kubernetes group name of the function's access entry.
    :param subnets: private subnets with a route to the cluster endpoint (default: the VPC's private subnets).
    :param timeout: how long to retry before the deploy fails with the last answer (at most 14 minutes).
    :param interval: the pause between attempts.
    :param trigger: extra values that re-run the gate when they change (e.g. the webhook owner's version).
    :param log_key: KMS key for the function's log group (its logs name the cluster endpoint and answers).
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.Cluster, probe: dict, path: str, plural: str,
                 group: str, subnets: Sequence[ec2.ISubnet] | None = None,
                 timeout: Duration = Duration.minutes(10), interval: Duration = Duration.seconds(5),
                 trigger: dict[str, str] | None = None, log_key: kms.IKey | None = None) -> None:
        super().__init__(scope, id)
        if "dryRun=All" not in path:
            raise ValueError(f"path: {path!r} must ask for a dry run (?dryRun=All); the gate never stores objects")
        if timeout.to_seconds() > MAX_TIMEOUT.to_seconds():
            raise ValueError(f"timeout: {timeout.to_minutes()} min exceeds the Lambda limit the gate runs under "
                             f"({MAX_TIMEOUT.to_minutes()} min)")
        if not 1 <= interval.to_seconds() < timeout.to_seconds():
            raise ValueError("interval: must be at least 1 s and shorter than timeout")
        api_group = probe["apiVersion"].rpartition("/")[0]

        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS, encryption_key=log_key)
        self.function = lambda_.Function(
            self, "Handler",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.on_event",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            timeout=Duration.seconds(timeout.to_seconds() + 60),
            memory_size=256,
            vpc=cluster.vpc,
            vpc_subnets=(ec2.SubnetSelection(subnets=list(subnets)) if subnets
                         else ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)),
            security_groups=[cluster.cluster_security_group],
            log_group=log_group,
            description=f"Waits until the API server accepts a dry-run {probe['kind']} (webhook readiness gate)",
        )
        self.access_entry = eks.CfnAccessEntry(
            self, "Access", cluster_name=cluster.cluster_name, principal_arn=self.function.role.role_arn,
            kubernetes_groups=[group], type="STANDARD",
        )
        name = f"openpod-{id.lower()}"
        meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "openpod"}}
        self.rbac = eks.KubernetesManifest(self, "Rbac", cluster=cluster, overwrite=True, manifest=[
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta,
             "rules": [{"apiGroups": [api_group], "resources": [plural], "verbs": ["create"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]},
        ])
        self.provider = cr.Provider(self, "Provider", on_event_handler=self.function)
        self.resource = CustomResource(
            self, "Resource", service_token=self.provider.service_token, resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": cluster.cluster_name, "Region": Stack.of(self).region,
                "Endpoint": cluster.cluster_endpoint,
                "CertificateAuthorityData": cluster.cluster_certificate_authority_data,
                "Path": path, "Probe": json.dumps(probe, sort_keys=True),
                "TimeoutSeconds": str(int(timeout.to_seconds())), "IntervalSeconds": str(int(interval.to_seconds())),
                **(trigger or {}),
            },
        )
        self.resource.node.add_dependency(self.access_entry)
        self.resource.node.add_dependency(self.rbac)
