"""availability_zone_ids (issue 39): reservations and Capacity Blocks are bound to zone IDs, names map to IDs per
account. The spec records the mapping; validation checks its shape, preflight checks it against the account and
each reservation (botocore Stubber: requests checked against the EC2 model)."""

from __future__ import annotations

import copy
import datetime as dt

import boto3
from botocore.stub import Stubber

from infra.deploy.preflight import check_reservations, check_zone_ids
from infra.spec.loading import parse_spec
from tests.conftest import example_data, spec_problems as problems


def _large(ids: dict) -> dict:
    data = copy.deepcopy(example_data("large.yaml"))
    data["availability_zone_ids"] = ids
    return data


def test_zone_ids_are_validated():
    found = problems(_large({"us-east-1a": "usw2-az1", "us-east-1z": "use1-az1", "us-east-1b": "nonsense"}))
    assert any(p.startswith("availability_zone_ids.us-east-1a") and "not a zone ID of us-east-1" in p for p in found)
    assert any(p.startswith("availability_zone_ids.us-east-1z") and "none of the spec's zones" in p for p in found)
    assert any(p.startswith("availability_zone_ids.us-east-1b") and "not a zone ID" in p for p in found)
    assert any("given for two zone names" in p
               for p in problems(_large({"us-east-1a": "use1-az6", "us-east-1b": "use1-az6"})))


def test_preflight_compares_the_accounts_mapping_and_the_reservations_zone_id():
    data = _large({"us-east-1a": "use1-az6", "us-east-1-dfw-2a": "use1-dfw2-az1"})
    spec = parse_spec(data)
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", {"AvailabilityZones": [
            {"ZoneName": "us-east-1a", "ZoneId": "use1-az4"}, {"ZoneName": "us-east-1-dfw-2a", "ZoneId": "use1-dfw2-az1"}]},
            {"ZoneNames": ["us-east-1-dfw-2a", "us-east-1a"], "AllAvailabilityZones": True})
        findings = list(check_zone_ids(spec, ec2))
    assert [f.ok for f in findings] == [True, False]
    assert findings[1].message.startswith("availability_zone_ids.us-east-1a: use1-az6 in the spec, use1-az4")

    g = spec.group("gb200")
    now = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    reservation = {"CapacityReservationId": g.capacity.reservation_id, "InstanceType": g.instance_type,
                   "AvailabilityZone": "us-east-1-dfw-2a", "AvailabilityZoneId": "use1-dfw2-az2",
                   "TotalInstanceCount": g.max_size, "State": "scheduled", "ReservationType": "capacity-block",
                   "StartDate": now, "EndDate": now}
    with Stubber(ec2) as stub:
        for i, gg in enumerate(spec.instance_groups):
            if gg.capacity.reservation_id:
                r = reservation if gg.name == "gb200" else {**reservation, "CapacityReservationId":
                                                            gg.capacity.reservation_id}
                stub.add_response("describe_capacity_reservations", {"CapacityReservations": [r]},
                                  {"CapacityReservationIds": [gg.capacity.reservation_id]})
        lines = [f.message for f in check_reservations(spec, ec2) if not f.ok]
    assert any("(gb200)" in m and "zone ID use1-dfw2-az2, availability_zone_ids says us-east-1-dfw-2a is "
               "use1-dfw2-az1" in m for m in lines), lines
