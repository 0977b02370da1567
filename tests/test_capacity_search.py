"""``openpod capacity`` asks EC2 the way DescribeCapacityBlockOfferings is documented (issue 39): UltraServer types
by UltraServer, instance blocks at most 64 instances, Local Zones listed for a group placed in one, and a
Local Zone opt-in hint when nothing is found. Requests are checked against botocore's EC2 model at the pinned
version (Stubber validates every parameter against it)."""

from __future__ import annotations

import datetime as dt

import boto3
import botocore
import pytest
from botocore.stub import Stubber

from infra.deploy.preflight import capacity_offerings, render_offerings
from infra.spec.groups import CapacityType
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)


def _ec2(region):
    return boto3.client("ec2", region_name=region, aws_access_key_id="x", aws_secret_access_key="x")


def _block_groups():
    for name in ("default", "large"):
        spec = load_spec(EXAMPLES / f"{name}.yaml")
        for g in spec.instance_groups:
            if g.capacity.type is CapacityType.CAPACITY_BLOCK:
                yield pytest.param(spec, g, id=f"{name}-{g.name}")


def _request(spec, g) -> dict:
    """The parameters capacity_offerings sends (the Stubber checks them against the model first)."""
    ec2 = _ec2(spec.region)
    sent: dict = {}
    ec2.meta.events.register("provide-client-params.ec2.DescribeCapacityBlockOfferings",
                             lambda params, **kw: sent.update(params))
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []})
        capacity_offerings(ec2, g, T0, 7)
    return sent


@pytest.mark.parametrize("spec,g", list(_block_groups()))
def test_every_capacity_block_request_is_what_the_model_documents(spec, g):
    assert botocore.__version__ == "1.44.8"
    members = botocore.loaders.create_loader().load_service_model("ec2", "service-2")["shapes"][
        "DescribeCapacityBlockOfferingsRequest"]["members"]
    sent = _request(spec, g)
    assert set(sent) <= set(members)
    if g.type.ultraserver:
        assert sent["UltraserverType"] == g.type.ultraserver.name
        assert sent["UltraserverCount"] * g.type.ultraserver.instances == g.max_size
        assert "InstanceCount" not in sent
    else:
        assert sent["InstanceCount"] <= 64


def test_gb200_in_the_dallas_local_zone_is_asked_for_by_ultraserver_in_every_zone():
    spec = load_spec(EXAMPLES / "large.yaml")
    g = spec.group("gb200")
    ec2 = _ec2(spec.region)
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": []}, {
            "InstanceType": "p6e-gb200.36xlarge", "UltraserverType": "u-p6e-gb200x72", "UltraserverCount": 4,
            "AllAvailabilityZones": True, "CapacityDurationHours": 168, "StartDateRange": T0,
            "EndDateRange": T0 + dt.timedelta(days=21)})
        offers = capacity_offerings(ec2, g, T0, 7)
    lines = render_offerings(spec, g, offers)
    assert lines[0].startswith("no Capacity Block offerings for 4 x u-p6e-gb200x72")
    assert any("modify-availability-zone-group" in line and "us-east-1-dfw-2" in line for line in lines[1:])
