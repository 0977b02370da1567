"""TaskGovernance: installs Kueue + JobSet and applies the spec's queues. (Owned by the task-governance work.)"""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from infra.spec import ClusterSpec


class TaskGovernance(Construct):
    """Kueue and JobSet at pinned versions, then the spec's teams, quotas and priorities."""

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, spec: ClusterSpec) -> None:
        super().__init__(scope, id)
