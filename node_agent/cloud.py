"""The two EC2 Auto Scaling / EC2 calls remediation makes, on boto3."""

from __future__ import annotations

from typing import Protocol


class Cloud(Protocol):
    def reboot(self, instance_id: str) -> None: ...
    def mark_unhealthy(self, instance_id: str) -> None: ...


class AwsCloud:
    """Reboot = EC2 RebootInstances; replace = Auto Scaling SetInstanceHealth(Unhealthy) so the group
    terminates the instance and launches a new one at once (ShouldRespectGracePeriod=False)."""

    def __init__(self, *, region: str | None = None, endpoint_url: str | None = None, session=None) -> None:
        import boto3

        session = session or boto3.session.Session(region_name=region)
        self.ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint_url)
        self.autoscaling = session.client("autoscaling", region_name=region, endpoint_url=endpoint_url)

    def reboot(self, instance_id: str) -> None:
        self.ec2.reboot_instances(InstanceIds=[instance_id])

    def mark_unhealthy(self, instance_id: str) -> None:
        self.autoscaling.set_instance_health(InstanceId=instance_id, HealthStatus="Unhealthy",
                                             ShouldRespectGracePeriod=False)
