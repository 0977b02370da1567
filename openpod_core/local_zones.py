"""Local Zones a node group may launch in: each zone's parent region and why the platform knows it.

A Local Zone is an extension of a parent region: its subnets belong to the region's VPC, but EKS does
not accept them for a cluster's control plane, so only node groups use them (the cluster keeps the
regular-AZ subnets). Zones must be opted in to (``aws ec2 modify-availability-zone-group``) before use.
One row per zone the platform supports, with its source; add rows here, never a free-form zone name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocalZone:
    name: str                  # zone name, e.g. us-east-1-dfw-2a
    parent_region: str
    group: str                 # the zone group to opt in to
    offers: tuple[str, ...]    # instance types the platform places there, each with the source below
    source: str
    checked: str


LOCAL_ZONES: tuple[LocalZone, ...] = (
    LocalZone("us-east-1-dfw-2a", "us-east-1", "us-east-1-dfw-2", ("p6e-gb200.36xlarge",),
              "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html "
              "(P6e-GB200 UltraServer Capacity Blocks: Dallas Local Zone, opt-in; fact ec2.p6e-gb200.local-zone)",
              "2026-11-25"),
)

_BY_NAME = {z.name: z for z in LOCAL_ZONES}


def get(name: str) -> LocalZone | None:
    """The Local Zone ``name``, or None when it is not a Local Zone the platform knows."""
    return _BY_NAME.get(name)


def of_region(region: str) -> list[LocalZone]:
    return [z for z in LOCAL_ZONES if z.parent_region == region]
