"""Network: the VPC the platform runs in, its endpoints, flow logs and the EFA / Lustre security groups."""

from __future__ import annotations

import math
from typing import Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

# Interface endpoints a node needs to join the cluster, pull images, reach
# the FSx/EKS/STS APIs and be managed through SSM without leaving the VPC.
DEFAULT_INTERFACE_ENDPOINTS: tuple[str, ...] = (
    "ecr.api", "ecr.dkr", "sts", "ec2", "logs", "monitoring", "ssm", "ssmmessages", "ec2messages",
    "eks", "eks-auth", "kms",
)

# Lustre client <-> server ports (LNet): 988, plus 1018-1023 for clients.
LUSTRE_PORTS: tuple[ec2.Port, ...] = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))


def private_subnet_mask(vpc_prefix: int, az_count: int) -> int:
    """Largest private subnet size leaving room for the public /24s: half the VPC spread over the AZs."""
    return vpc_prefix + math.ceil(math.log2(az_count)) + 1


class Network(Construct):
    """A VPC with private subnets in exactly ``availability_zones``.

    Public subnets only hold the NAT gateways. Nodes, FSx and endpoints live in
    the private subnets. ``efa_security_group`` lets EFA traffic flow between
    the members of the group (EFA needs self-referencing ingress and egress for
    all protocols); ``lustre_security_group`` is attached to the file system
    and admits Lustre traffic from itself and from ``allow_lustre_from`` peers.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        availability_zones: Sequence[str],
        vpc_cidr: str = "10.0.0.0/16",
        nat_gateways: int = 1,
        flow_logs_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        flow_logs_key: kms.IKey | None = None,
        interface_endpoints: Sequence[str] = DEFAULT_INTERFACE_ENDPOINTS,
    ) -> None:
        super().__init__(scope, id)
        if len(availability_zones) < 2:
            raise ValueError(f"Network: availability_zones needs at least 2 AZs (got {list(availability_zones)})")
        if not 1 <= nat_gateways <= len(availability_zones):
            raise ValueError(f"Network: nat_gateways must be 1..{len(availability_zones)} "
                             f"(one per AZ at most), got {nat_gateways}")
        prefix = int(vpc_cidr.split("/")[1])
        mask = private_subnet_mask(prefix, len(availability_zones))
        if mask > 24:
            raise ValueError(f"Network: vpc_cidr {vpc_cidr} is too small for {len(availability_zones)} AZs")

        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(vpc_cidr),
            availability_zones=list(availability_zones),
            nat_gateways=nat_gateways,
            restrict_default_security_group=True,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="nodes", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                        cidr_mask=mask),
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=max(mask + 2, 24),
                                        map_public_ip_on_launch=False),
            ],
        )

        flow_log_group = logs.LogGroup(
            self, "FlowLogs", retention=flow_logs_retention, encryption_key=flow_logs_key,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
                              traffic_type=ec2.FlowLogTrafficType.ALL)

        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        self.endpoint_security_group = ec2.SecurityGroup(
            self, "EndpointSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
            description="Interface endpoints: HTTPS from inside the VPC",
        )
        self.endpoint_security_group.add_ingress_rule(ec2.Peer.ipv4(vpc_cidr), ec2.Port.tcp(443),
                                                      "HTTPS from the VPC")
        # Interface endpoints serve only this account's principals: credentials of another account (say,
        # stolen and replayed from a pod) cannot use the VPC's private path to AWS. The S3 gateway endpoint
        # keeps its default policy: image layers come from a bucket ECR owns, not this account's (an
        # account condition there would break image pulls; facts register: ecr.image-layers-s3-gateway).
        self.interface_endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        for name in interface_endpoints:
            endpoint = self.vpc.add_interface_endpoint(
                _endpoint_id(name), service=ec2.InterfaceVpcEndpointAwsService(name),
                private_dns_enabled=True, security_groups=[self.endpoint_security_group], open=False,
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            )
            endpoint.add_to_policy(iam.PolicyStatement(
                principals=[iam.AnyPrincipal()], actions=["*"], resources=["*"],
                conditions={"StringEquals": {"aws:PrincipalAccount": Stack.of(self).account}}))
            self.interface_endpoints[name] = endpoint

        self.efa_security_group = ec2.SecurityGroup(
            self, "EfaSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
            description="EFA: all protocols between members of this group",
        )
        self.efa_security_group.add_ingress_rule(self.efa_security_group, ec2.Port.all_traffic(),
                                                 "EFA from group members")
        self.efa_security_group.add_egress_rule(self.efa_security_group, ec2.Port.all_traffic(),
                                                "EFA to group members")

        self.lustre_security_group = ec2.SecurityGroup(
            self, "LustreSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
            description="FSx for Lustre: LNet ports from clients and between file servers",
        )
        for port in LUSTRE_PORTS:
            self.lustre_security_group.add_ingress_rule(self.lustre_security_group, port, "Lustre between servers")
            self.lustre_security_group.add_egress_rule(self.lustre_security_group, port, "Lustre between servers")

    def allow_lustre_from(self, peer_security_group_id: str, description: str = "Lustre clients") -> None:
        """Admit Lustre client traffic from the security group ``peer_security_group_id``."""
        for port in LUSTRE_PORTS:
            self.lustre_security_group.add_ingress_rule(ec2.Peer.security_group_id(peer_security_group_id),
                                                        port, description)

    def private_subnets(self, availability_zone: str | None = None) -> list[ec2.ISubnet]:
        """Private subnets, all or the one in ``availability_zone``."""
        subnets = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        if availability_zone is None:
            return list(subnets)
        chosen = [s for s in subnets if s.availability_zone == availability_zone]
        if not chosen:
            raise ValueError(f"Network.private_subnets: availability_zone {availability_zone!r} is not one of "
                             f"{[s.availability_zone for s in subnets]}")
        return chosen


def _endpoint_id(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", ".").split("."))
