"""The two EC2 Auto Scaling / EC2 calls remediation makes, on boto3."""

from __future__ import annotations

from typing import Protocol


class InstanceGone(Exception):
    """The node's instance cannot be acted on, now or later: it does not exist (any more), or no Auto Scaling
    group manages it (nobody would replace it). A terminal state for the remediation, not a retry."""

    def __init__(self, instance_id: str, why: str) -> None:
        super().__init__(f"{instance_id}: {why}")
        self.instance_id, self.why = instance_id, why


class Cloud(Protocol):
    def reboot(self, instance_id: str) -> None: ...
    def mark_unhealthy(self, instance_id: str) -> None: ...


# The Cloud calls that only read (AwsCloud.instance_topology, for node_agent/topology.py); the others act, and the
# controller makes them only while it leads (node_agent/leader.py LeaderOnly).
READS = frozenset({"instance_topology"})


# botocore's "standard" retry mode: exponential backoff with full jitter (base 2 s... capped at 20 s) on throttling
# and transient errors, max_attempts including the first call.
# Source: https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html (checked 2026-11-23).
RETRIES = {"mode": "standard", "max_attempts": 5}
GONE_STATES = ("shutting-down", "terminated")


class AwsCloud:
    """Reboot = EC2 RebootInstances; replace = Auto Scaling SetInstanceHealth(Unhealthy) so the group
    terminates the instance and launches a new one at once (ShouldRespectGracePeriod=False).

    Throttling and transient errors are retried by botocore (``RETRIES``); a call that still fails is
    checked against EC2 and Auto Scaling: a missing or terminated instance, or one no group manages,
    is :class:`InstanceGone` (terminal); anything else is raised for the controller's own backoff.
    """

    def __init__(self, *, region: str | None = None, endpoint_url: str | None = None, session=None) -> None:
        import boto3
        from botocore.config import Config

        session = session or boto3.session.Session(region_name=region)
        cfg = Config(retries=dict(RETRIES))
        self.ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint_url, config=cfg)
        self.autoscaling = session.client("autoscaling", region_name=region, endpoint_url=endpoint_url, config=cfg)

    def _gone(self, instance_id: str, *, need_group: bool) -> InstanceGone | None:
        from botocore.exceptions import ClientError

        try:
            res = self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        except ClientError as e:
            if e.response["Error"]["Code"] in ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"):
                return InstanceGone(instance_id, f"EC2 has no such instance ({e.response['Error']['Code']})")
            raise
        state = res[0]["Instances"][0]["State"]["Name"] if res else "absent"
        if not res or state in GONE_STATES:
            return InstanceGone(instance_id, f"EC2 instance is {state}")
        if need_group and not self.autoscaling.describe_auto_scaling_instances(
                InstanceIds=[instance_id])["AutoScalingInstances"]:
            return InstanceGone(instance_id, "no Auto Scaling group manages the instance")
        return None

    def reboot(self, instance_id: str) -> None:
        try:
            self.ec2.reboot_instances(InstanceIds=[instance_id])
        except Exception as e:
            gone = self._gone(instance_id, need_group=False)
            raise (gone or e) from e

    def mark_unhealthy(self, instance_id: str) -> None:
        try:
            self.autoscaling.set_instance_health(InstanceId=instance_id, HealthStatus="Unhealthy",
                                                 ShouldRespectGracePeriod=False)
        except Exception as e:
            gone = self._gone(instance_id, need_group=True)
            raise (gone or e) from e

    def instance_topology(self, instance_ids: list[str]) -> list[dict]:
        """EC2 DescribeInstanceTopology for at most 100 instances, all pages (MaxResults may not be combined
        with InstanceIds). Its ``CapacityBlockId`` needs botocore >= 1.40 (older models drop the field)."""
        out: list[dict] = []
        kw: dict = {"InstanceIds": list(instance_ids)}
        while True:
            page = self.ec2.describe_instance_topology(**kw)
            out += page.get("Instances", [])
            if not page.get("NextToken"):
                return out
            kw["NextToken"] = page["NextToken"]
