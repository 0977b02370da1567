"""``network:``: the VPC the platform creates."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator

from infra.spec.base import SpecModel, log_retention

# Ranges a VPC must not use: special-purpose addresses (fact net.special-purpose-ipv4, RFC 6890) and the
# container runtime's default bridge (172.17.0.0/16: fact docker.default-bridge).
SPECIAL_RANGES: dict[ipaddress.IPv4Network, str] = {
    ipaddress.IPv4Network("0.0.0.0/8"): "'this network', RFC 1122",
    ipaddress.IPv4Network("127.0.0.0/8"): "loopback",
    ipaddress.IPv4Network("169.254.0.0/16"): "link-local: EC2's instance metadata, DNS and time addresses live there",
    ipaddress.IPv4Network("224.0.0.0/4"): "multicast",
    ipaddress.IPv4Network("240.0.0.0/4"): "reserved for future use",
    ipaddress.IPv4Network("172.17.0.0/16"): "Docker's default bridge: pods and nodes could not reach VPC addresses "
                                            "there from a host that runs Docker",
}


class NetworkSpec(SpecModel):
    vpc_cidr: str = "10.0.0.0/16"
    nat_gateways: int = Field(1, ge=1, le=6, description="1 for cost, one per AZ for resilience")
    flow_logs_retention_days: int = Field(90, description="one of CloudWatch Logs' retention values")
    layout_azs: int | None = Field(
        None, ge=1, description="the number of availability_zones the subnet layout was made for: the count when "
                                "the platform was first deployed (unset: all of them). Set it to the old count "
                                "before adding an AZ, so no live subnet is re-addressed and the EKS cluster keeps "
                                "the subnets it was created with")

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 CIDR block such as 10.0.0.0/16") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(f"prefix /{net.prefixlen} not allowed; use /16 to /20 (EKS pods take one IP each)")
        for reserved, why in SPECIAL_RANGES.items():
            if net.overlaps(reserved):
                raise ValueError(f"{v} overlaps {reserved} ({why}); allowed: RFC 1918 space (10.0.0.0/8, "
                                 "172.16.0.0/12 outside 172.17.0.0/16, 192.168.0.0/16) or other routable space")
        return v

    @field_validator("flow_logs_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return log_retention(v)
