"""The Regions that offer each accelerated instance type: a spec's groups must run in one of them.

EC2's DescribeInstanceTypeOfferings (LocationType region) as moto 5.2.5 records it for 30 Regions
(fact ec2.instance-type-offerings.moto). ``infra/spec/rules.py`` refuses a group whose type the table knows in a
recorded Region that does not offer it; a Region outside ``RECORDED_REGIONS`` or a type outside ``OFFERED_IN``
is not judged here (``openpod preflight`` asks the account, per AZ). UltraServer types (p6e-gb200, trn2u) are
left out: they are sold as Capacity Blocks, p6e-gb200 in the Dallas Local Zone of us-east-1 (fact
ec2.p6e-gb200.local-zone, openpod_core/local_zones.py), and one account's offerings do not show where blocks
are sold. CPU types are left out too: every recorded Region offers the ones the register holds.
"""

from __future__ import annotations

SOURCE = ("getmoto/moto@5.2.5:moto/ec2/resources/instance_type_offerings/region/<region>.json "
          "(checked 2026-11-25)")

RECORDED_REGIONS = frozenset(
    "af-south-1 ap-east-1 ap-northeast-1 ap-northeast-2 ap-northeast-3 ap-south-1 ap-south-2 ap-southeast-1 "
    "ap-southeast-2 ap-southeast-3 ap-southeast-4 ap-southeast-5 ca-central-1 ca-west-1 eu-central-1 eu-central-2 "
    "eu-north-1 eu-south-1 eu-south-2 eu-west-1 eu-west-2 eu-west-3 il-central-1 me-central-1 me-south-1 "
    "sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split())

_G6E = ("ap-northeast-1 ap-northeast-2 ap-northeast-3 ap-south-1 ap-south-2 eu-central-1 eu-north-1 eu-south-2 "
        "me-central-1 us-east-1 us-east-2 us-west-2")
_G5 = ("ap-east-1 ap-northeast-1 ap-northeast-2 ap-south-1 ap-southeast-2 ap-southeast-3 ca-central-1 "
       "eu-central-1 eu-north-1 eu-south-2 eu-west-1 eu-west-2 eu-west-3 il-central-1 me-central-1 sa-east-1 "
       "us-east-1 us-east-2 us-west-2")

OFFERED_IN: dict[str, frozenset[str]] = {name: frozenset(regions.split()) for name, regions in {
    "p4d.24xlarge": ("ap-northeast-1 ap-northeast-2 ap-south-1 ap-southeast-2 ca-central-1 "
        "eu-central-1 eu-north-1 eu-west-1 eu-west-2 sa-east-1 us-east-1 us-east-2 "
        "us-west-2"),
    "p4de.24xlarge": "ap-northeast-1 ap-southeast-1 eu-central-1 il-central-1 us-east-1 us-west-2",
    "p5.4xlarge": ("ap-northeast-1 ap-south-1 ap-southeast-2 ap-southeast-3 eu-north-1 eu-west-2 "
        "sa-east-1 us-east-1 us-east-2 us-west-2"),
    "p5.48xlarge": ("ap-northeast-1 ap-northeast-2 ap-south-1 ap-southeast-2 ap-southeast-3 "
        "ca-central-1 eu-north-1 eu-west-2 sa-east-1 us-east-1 us-east-2 us-west-1 "
        "us-west-2"),
    "p5e.48xlarge": "ap-southeast-2 ap-southeast-3 eu-north-1 eu-west-2 sa-east-1 us-east-2 us-west-2",
    "p5en.48xlarge": ("ap-northeast-1 ap-northeast-2 ap-south-1 ap-southeast-3 eu-north-1 eu-south-2 "
        "me-central-1 us-east-1 us-east-2 us-west-1 us-west-2"),
    "p6-b200.48xlarge": "ap-south-1 ap-south-2 eu-north-1 eu-west-3 us-east-1 us-east-2 us-west-2",
    "g6e.xlarge": _G6E,
    "g6e.2xlarge": _G6E,
    "g6e.4xlarge": _G6E,
    "g6e.8xlarge": _G6E,
    "g6e.12xlarge": _G6E,
    "g6e.16xlarge": _G6E,
    "g6e.24xlarge": _G6E,
    "g6e.48xlarge": _G6E,
    "g5.xlarge": _G5,
    "g5.2xlarge": _G5,
    "g5.4xlarge": _G5,
    "g5.8xlarge": _G5,
    "g5.12xlarge": _G5,
    "g5.16xlarge": _G5,
    "g5.24xlarge": _G5,
    "g5.48xlarge": _G5,
    "trn1.2xlarge": "us-east-1 us-east-2 us-west-2",
    "trn1.32xlarge": "ap-south-1 ap-southeast-2 ap-southeast-4 us-east-1 us-east-2 us-west-2",
    "trn1n.32xlarge": "us-east-1 us-east-2 us-west-2",
    "trn2.48xlarge": "ap-south-2 us-east-2",
}.items()}


def offered_in(instance_type: str, region: str) -> bool | None:
    """Whether ``region`` offers the type: None where the table does not know (type or Region not recorded)."""
    if instance_type not in OFFERED_IN or region not in RECORDED_REGIONS:
        return None
    return region in OFFERED_IN[instance_type]
