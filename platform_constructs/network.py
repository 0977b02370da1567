"""Network: the VPC the platform runs in, its endpoints, flow logs and the EFA / Lustre security groups."""

from __future__ import annotations

import ipaddress
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


def subnet_layout(vpc_cidr: str, az_count: int, layout_azs: int | None = None) -> list[tuple[str, str]]:
    """(private, public) CIDR blocks of each AZ, in AZ order, that never move when AZs are appended.

    The first ``layout_azs`` AZs (default: all) get the layout every earlier version made for that many AZs:
    the private subnets side by side from the start of the VPC, each ``private_subnet_mask`` wide, then one
    /24 public subnet each. Each further AZ takes the first free block of the same sizes, so appending an AZ
    adds subnets without re-addressing a live one (EC2 refuses a subnet that overlaps another: fact
    ec2.subnet.cidr-conflict). Raises ValueError when the VPC has no room left.
    """
    layout_azs = az_count if layout_azs is None else layout_azs
    if not 1 <= layout_azs <= az_count:
        raise ValueError(f"layout_azs must be 1..{az_count} (the AZs the layout was made for), got {layout_azs}")
    net = ipaddress.IPv4Network(vpc_cidr)
    mask = private_subnet_mask(net.prefixlen, max(layout_azs, 2))
    public_mask = max(mask + 2, 24)
    privates = list(net.subnets(new_prefix=mask))[:layout_azs]
    start = privates[-1].broadcast_address + 1
    publics = [ipaddress.IPv4Network((int(start) + i * 2 ** (32 - public_mask), public_mask))
               for i in range(layout_azs)]
    used = privates + publics

    def first_free(prefix: int) -> ipaddress.IPv4Network:
        for block in net.subnets(new_prefix=prefix):
            if not any(block.overlaps(u) for u in used):
                used.append(block)
                return block
        raise ValueError(f"vpc_cidr {vpc_cidr} has no free /{prefix} for availability zone {len(privates) + 1}; "
                         "use a larger VPC or a layout made for more AZs")

    for _ in range(layout_azs, az_count):
        privates.append(first_free(mask))
        publics.append(first_free(public_mask))
    return [(str(a), str(b)) for a, b in zip(privates, publics)]


def local_zone_layout(vpc_cidr: str, layout: list[tuple[str, str]], count: int) -> list[str]:
    """CIDR blocks for ``count`` Local Zone subnets: a quarter of a private subnet each (at least a /24),
    taken from the top of the VPC so AZs appended later (which take free blocks from the bottom) never
    collide with them. Raises ValueError when the VPC has no room left."""
    net = ipaddress.IPv4Network(vpc_cidr)
    prefix = min(ipaddress.IPv4Network(layout[0][0]).prefixlen + 2, 24)
    used = [ipaddress.IPv4Network(b) for pair in layout for b in pair]
    out: list[str] = []
    for block in reversed(list(net.subnets(new_prefix=prefix))):
        if len(out) == count:
            break
        if not any(block.overlaps(u) for u in used):
            used.append(block)
            out.append(str(block))
    if len(out) < count:
        raise ValueError(f"vpc_cidr {vpc_cidr} has no free /{prefix} left for {count} Local Zone subnet(s)")
    return out


class Network(Construct):
    """A VPC with private subnets in exactly ``availability_zones``.

    Subnet ranges follow ``subnet_layout``: with ``layout_azs`` set to the AZ count the platform was first
    deployed with, appending AZs adds subnets and never re-addresses a live one; the EKS cluster keeps the
    subnets of those first AZs (``cluster_subnets``).

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
        layout_azs: int | None = None,
        local_zones: Sequence[str] = (),
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
        try:
            layout = subnet_layout(vpc_cidr, len(availability_zones), layout_azs)
        except ValueError as e:
            raise ValueError(f"Network: {e}") from None
        self.cluster_zones = list(availability_zones[:layout_azs or len(availability_zones)])

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
        # The stable layout, not CDK's re-split by AZ count (identical for the AZs the layout was made for).
        for kind, index in (("nodes", 0), ("public", 1)):
            chosen = self.vpc.select_subnets(subnet_group_name=kind).subnets
            for subnet in chosen:
                subnet.node.default_child.cidr_block = layout[list(availability_zones).index(
                    subnet.availability_zone)][index]

        # Local Zone subnets: private, for node groups only (EKS takes no Local Zone subnet for the control
        # plane), default route through the region's NAT gateway.
        self.local_zone_subnets: dict[str, ec2.ISubnet] = {}
        if local_zones:
            nat = next(n for n in (s.node.try_find_child("NATGateway") for s in self.vpc.public_subnets) if n)
            try:
                cidrs = local_zone_layout(vpc_cidr, layout, len(local_zones))
            except ValueError as e:
                raise ValueError(f"Network: {e}") from None
            for zone, cidr in zip(local_zones, cidrs):
                subnet = ec2.PrivateSubnet(self, f"LocalZone-{zone}", availability_zone=zone, vpc_id=self.vpc.vpc_id,
                                           cidr_block=cidr, map_public_ip_on_launch=False)
                subnet.add_default_nat_route(nat.ref)
                self.local_zone_subnets[zone] = subnet

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

    def cluster_subnets(self) -> list[ec2.ISubnet]:
        """The private subnets of the AZs the layout was made for: the EKS cluster's, fixed at its creation
        (EKS accepts later subnets only in the AZs it was created with: fact eks.cluster.subnet-update)."""
        return [s for s in self.private_subnets() if s.availability_zone in self.cluster_zones]

    def private_subnets(self, availability_zone: str | None = None) -> list[ec2.ISubnet]:
        """Private subnets of the AZs, all or the one in ``availability_zone`` (which may be a Local Zone)."""
        subnets = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets
        if availability_zone is None:
            return list(subnets)
        if availability_zone in self.local_zone_subnets:
            return [self.local_zone_subnets[availability_zone]]
        chosen = [s for s in subnets if s.availability_zone == availability_zone]
        if not chosen:
            raise ValueError(f"Network.private_subnets: availability_zone {availability_zone!r} is not one of "
                             f"{[s.availability_zone for s in subnets]}")
        return chosen


def _endpoint_id(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", ".").split("."))
