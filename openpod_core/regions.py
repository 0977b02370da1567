"""The AWS Regions a spec may name and, where recorded, the availability-zone letters each has.

``REGIONS``: the Regions of the aws, aws-cn and aws-us-gov partitions in
boto/botocore@1.44.8:botocore/data/endpoints.json (``partitions[].regions``), checked 2026-11-28.
``AZ_LETTERS``: the zones moto records for EC2 DescribeAvailabilityZones Region by Region, in
getmoto/moto@5.2.5:moto/ec2/models/availability_zones_and_regions.py:83-187 (the table before line 188, where moto
gives every other Region a guessed a-c: those are not recorded here and their letters are not judged), checked
2026-11-28. Facts ``aws.regions`` and ``ec2.az-letters.moto``; tests/test_regions.py compares both with the installed
packages. Some Regions skip letters (ap-northeast-1 has no b, ca-central-1 no c); an account may see fewer zones,
never others: ``openpod preflight`` asks the account.
"""

from __future__ import annotations

REGIONS: frozenset[str] = frozenset((
    "af-south-1 ap-east-1 ap-east-2 ap-northeast-1 ap-northeast-2 ap-northeast-3 ap-south-1 ap-south-2 "
    "ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ap-southeast-5 ap-southeast-6 "
    "ap-southeast-7 ca-central-1 ca-west-1 cn-north-1 cn-northwest-1 eu-central-1 eu-central-2 eu-north-1 "
    "eu-south-1 eu-south-2 eu-west-1 eu-west-2 eu-west-3 il-central-1 me-central-1 me-south-1 "
    "mx-central-1 sa-east-1 us-east-1 us-east-2 us-gov-east-1 us-gov-west-1 us-west-1 us-west-2 "
).split())

AZ_LETTERS: dict[str, str] = {
    "ap-northeast-1": "acd",
    "ap-northeast-2": "abcd",
    "ap-south-1": "abc",
    "ap-southeast-2": "abc",
    "ca-central-1": "abd",
    "cn-north-1": "ab",
    "eu-west-1": "abc",
    "eu-west-2": "abc",
    "eu-west-3": "abc",
    "us-east-1": "abcdef",
    "us-west-1": "ab",
    "us-west-2": "abcd",
}

# The prefix of the zone IDs of each Region with recorded zones (same source as AZ_LETTERS: its ZoneIds).
ZONE_ID_PREFIX: dict[str, str] = {
    "ap-northeast-1": "apne1",
    "ap-northeast-2": "apne2",
    "ap-south-1": "aps1",
    "ap-southeast-2": "apse2",
    "ca-central-1": "cac1",
    "cn-north-1": "cnn1",
    "eu-west-1": "euw1",
    "eu-west-2": "euw2",
    "eu-west-3": "euw3",
    "us-east-1": "use1",
    "us-west-1": "usw1",
    "us-west-2": "usw2",
}
