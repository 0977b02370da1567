"""NodeHealthAgent: the detector DaemonSet, remediation controller, RBAC and IAM. (Owned by the node-agent work.)"""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from infra.spec import ClusterSpec


class NodeHealthAgent(Construct):
    """Deploys the node agent built from ``image_directory`` onto ``cluster``."""

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: ClusterSpec,
                 image_directory: str) -> None:
        super().__init__(scope, id)
