"""``network:``: the VPC the platform creates."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator

from infra.spec.base import SpecModel


class NetworkSpec(SpecModel):
    vpc_cidr: str = "10.0.0.0/16"
    nat_gateways: int = Field(1, ge=1, le=6, description="1 for cost, one per AZ for resilience")
    flow_logs_retention_days: int = Field(90, ge=1)
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
        return v
