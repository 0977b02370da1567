"""``openpod preflight`` / ``openpod capacity`` on AWS responses.

IAM runs on a moto server. moto 5 implements neither capacity reservations, capacity block offerings,
EKS add-on versions nor EC2's Service Quotas, so those calls get responses in the API's own shape,
written here from the EC2/EKS/Service Quotas API references (not captured from an account); botocore's
Stubber checks every request and response against the service model, so a wrong field fails the test.
"""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
from botocore.stub import ANY, Stubber
from click.testing import CliRunner

from infra.cli.main import main
from infra.deploy.preflight import Clients, capacity_offerings, preflight, quota_family, render_offerings
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES

T0 = dt.datetime(2026, 12, 1, 11, 30, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def moto_iam(moto_endpoint):
    return moto_endpoint


def _client(service, region, endpoint=None):
    return boto3.client(service, region_name=region, endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def offerings(pairs):
    return {"InstanceTypeOfferings": [{"InstanceType": t, "LocationType": "availability-zone", "Location": az}
                                      for t, az in pairs]}


def quota(code, value):
    return {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": float(value), "Unit": "None"}}


def addon_versions(name, versions):
    return {"addons": [{"addonName": name, "type": "networking",
                        "addonVersions": [{"addonVersion": v} for v in versions]}]}


def reservation(rid, itype, az, count, state="active", kind="default"):
    return {"CapacityReservationId": rid, "InstanceType": itype, "AvailabilityZone": az,
            "TotalInstanceCount": count, "AvailableInstanceCount": count, "State": state,
            "InstancePlatform": "Linux/UNIX", "ReservationType": kind,
            "StartDate": T0, "EndDate": T0 + dt.timedelta(days=14)}


def stubbed(spec, *, offered, quotas, addons_missing=(), reservations=(), iam_endpoint, zone_ids=None):
    region = spec.region
    c = Clients(ec2=_client("ec2", region), eks=_client("eks", region), quotas=_client("service-quotas", region),
                iam=_client("iam", region, iam_endpoint))
    ec2, eks, sq = Stubber(c.ec2), Stubber(c.eks), Stubber(c.quotas)
    ec2.add_response("describe_instance_type_offerings", offerings(offered),
                     {"LocationType": "availability-zone", "Filters": ANY})
    for code, value in quotas:
        sq.add_response("get_service_quota", quota(code, value), {"ServiceCode": "ec2", "QuotaCode": code})
    for r in reservations:
        ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [r]},
                         {"CapacityReservationIds": [r["CapacityReservationId"]]})
    if region in ("us-east-1", "us-west-1", "ca-central-1"):      # regions with AZ IDs EKS refuses
        zone_ids = zone_ids or {}
        ec2.add_response("describe_availability_zones", {"AvailabilityZones": [
            {"ZoneName": z, "ZoneId": zone_ids.get(z, f"x-{z}"), "State": "available"}
            for z in spec.availability_zones]}, {"ZoneNames": list(spec.availability_zones)})
    for name, version in sorted(spec.eks.addon_versions.items()):
        got = [] if name in addons_missing else [version, "v9.9.9-eksbuild.1"]
        eks.add_response("describe_addon_versions", addon_versions(name, got),
                         {"addonName": name, "kubernetesVersion": spec.eks.version})
    for s in (ec2, eks, sq):
        s.activate()
    return c, (ec2, eks, sq)


def test_quota_families():
    assert [quota_family(t) for t in ("p5.48xlarge", "p6e-gb200.36xlarge", "trn2.48xlarge", "m7i.2xlarge",
                                       "g6e.xlarge")] == ["P", "P", "Trn", "Standard", "G"]


def test_a_ready_account_passes_every_check(moto_iam):
    spec = load_spec(EXAMPLES / "default.yaml")
    c, stubs = stubbed(spec, iam_endpoint=moto_iam,
                       offered=[("m7i.2xlarge", "us-east-2a"), ("m7i.2xlarge", "us-east-2b"),
                                ("p5.48xlarge", "us-east-2a"), ("trn2.48xlarge", "us-east-2a")],
                       quotas=[("L-417A185B", 768), ("L-1216C47A", 64), ("L-2C3B7624", 768)])
    findings = preflight(spec, c)
    assert all(f.ok for f in findings), "\n".join(f.line() for f in findings if not f.ok)
    assert {f.check for f in findings} == {"offering", "quota", "add-on"}   # no reservations/principals here
    for s in stubs:
        s.assert_no_pending_responses()


def test_each_problem_is_one_line_naming_the_spec_field(moto_iam):
    spec = load_spec(EXAMPLES / "large.yaml")
    _client("iam", spec.region, moto_iam).create_role(RoleName="platform-admins", AssumeRolePolicyDocument="{}")
    cpu = [(t, f"us-east-1{z}") for t in ("m7i.4xlarge", "c7i.4xlarge") for z in "abc"]
    c, _ = stubbed(spec, iam_endpoint=moto_iam,
                   offered=cpu + [("p5.48xlarge", "us-east-1a")],                 # no trn1 in us-east-1c
                   quotas=[("L-417A185B", 1536), ("L-1216C47A", 512), ("L-2C3B7624", 4096)],
                   reservations=[reservation("cr-0a1b2c3d4e5f60718", "p6e-gb200.36xlarge", "us-east-1-dfw-2a",
                                             72, state="scheduled", kind="capacity-block"),
                                 reservation("cr-0123456789abcdef0", "p5en.48xlarge", "us-east-1a", 32)],
                   addons_missing={"aws-fsx-csi-driver"})
    findings = preflight(spec, c)
    assert [f.message for f in findings if not f.ok] == [
        "instance_groups[4] (trn1).instance_type: trn1.32xlarge is not offered in us-east-1c (us-east-1); "
        "pick another AZ or a reservation",
        "instance_groups (p5en, p5-dev).max_size: 10752 vCPUs at max_size exceed quota L-417A185B (Running "
        "On-Demand P instances) of 1536 in us-east-1; request an increase or lower max_size",
        "instance_groups (trn1).max_size: 8192 vCPUs at max_size exceed quota L-2C3B7624 (Running On-Demand "
        "Trn instances) of 4096 in us-east-1; request an increase or lower max_size",
        "instance_groups[3] (p5en).capacity.reservation_id: cr-0123456789abcdef0 holds 32 instances, "
        "max_size is 48",
        "eks.addons.aws-fsx-csi-driver: v1.7.0-eksbuild.1 is not available for Kubernetes 1.34 "
        "(available: none)",
        "eks.access_entries[1].principal_arn: arn:aws:iam::111122223333:role/ml-engineers does not exist",
    ]
    assert ("instance_groups[2] (gb200): cr-0a1b2c3d4e5f60718 scheduled, 72 x p6e-gb200.36xlarge in "
            "us-east-1-dfw-2a, 2026-12-01 11:30 to 2026-12-15 11:30 UTC") in [f.message for f in findings if f.ok]


def test_a_block_for_the_wrong_type_or_az_is_named(moto_iam):
    spec = load_spec(EXAMPLES / "large.yaml")
    c, _ = stubbed(spec, iam_endpoint=moto_iam, offered=[], quotas=[("L-417A185B", 1e6), ("L-1216C47A", 1e6),
                                                                     ("L-2C3B7624", 1e6)],
                   reservations=[reservation("cr-0a1b2c3d4e5f60718", "p5.48xlarge", "us-east-1a", 72),
                                 reservation("cr-0123456789abcdef0", "p5en.48xlarge", "us-east-1a", 48,
                                             state="expired")])
    failed = [f.message for f in preflight(spec, c) if f.check == "reservation" and not f.ok]
    assert failed == [
        "instance_groups[2] (gb200).capacity.reservation_id: cr-0a1b2c3d4e5f60718 is for p5.48xlarge, the group "
        "runs p6e-gb200.36xlarge; is in us-east-1a, the group launches in us-east-1-dfw-2a; is an on-demand "
        "reservation, capacity.type is capacity-block",
        "instance_groups[3] (p5en).capacity.reservation_id: cr-0123456789abcdef0 is expired",
    ]


def test_the_cli_without_credentials_says_which_checks_could_not_run(monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    r = CliRunner().invoke(main, ["preflight", "--spec", str(EXAMPLES / "default.yaml")])
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    lines = r.stdout.strip().splitlines()  # the spec's warnings go to stderr
    assert all("could not run: NoCredentialsError" in line for line in lines[:-1]), r.output
    assert lines[-1].endswith("failed")


def test_capacity_lists_offerings_and_prints_the_spec_lines_to_use():
    spec = load_spec(EXAMPLES / "default.yaml")
    g = spec.group("gb200")
    ec2 = _client("ec2", spec.region)
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [
            {"CapacityBlockOfferingId": "cb-0123456789abcdef0", "InstanceType": g.instance_type,
             "AvailabilityZone": "us-east-2b", "InstanceCount": 18, "StartDate": T0,
             "EndDate": T0 + dt.timedelta(days=7), "CapacityBlockDurationHours": 168, "UpfrontFee": "123456.00",
             "CurrencyCode": "USD", "Tenancy": "default"}]},
            {"InstanceType": g.instance_type, "UltraserverType": "u-p6e-gb200x72", "UltraserverCount": 1,
             "CapacityDurationHours": 168, "StartDateRange": T0, "EndDateRange": T0 + dt.timedelta(days=21)})
        lines = render_offerings(spec, g, capacity_offerings(ec2, g, T0, 7))
    text = "\n".join(lines)
    assert "cb-0123456789abcdef0         us-east-2b     2026-12-01 11:30 2026-12-08 11:30    18  123456.00 USD" in text
    assert "--capacity-block-offering-id cb-0123456789abcdef0" in text
    assert "      type: capacity-block" in text and "    availability_zone: us-east-2b" in text


def test_capacity_names_the_groups_when_the_group_is_unknown():
    r = CliRunner().invoke(main, ["capacity", "--spec", str(EXAMPLES / "default.yaml"), "--group", "nope"])
    assert r.exit_code == 2 and "--group: no instance group 'nope'; groups: system, p5, trn2, gb200" in r.output


def test_a_cluster_az_that_is_an_id_eks_refuses_is_named(moto_iam):
    """use1-az3 takes no EKS control plane (fact eks.cluster.refused-zone-ids); names map to IDs per account."""
    spec = load_spec(EXAMPLES / "large.yaml")
    c, _ = stubbed(spec, iam_endpoint=moto_iam, offered=[], quotas=[("L-417A185B", 1e6), ("L-1216C47A", 1e6),
                                                                     ("L-2C3B7624", 1e6)],
                   reservations=[reservation("cr-0a1b2c3d4e5f60718", "p6e-gb200.36xlarge", "us-east-1-dfw-2a", 72,
                                             kind="capacity-block"),
                                 reservation("cr-0123456789abcdef0", "p5en.48xlarge", "us-east-1a", 48)],
                   zone_ids={"us-east-1a": "use1-az6", "us-east-1b": "use1-az3", "us-east-1c": "use1-az1"})
    zones = [f for f in preflight(spec, c) if f.check == "eks-zone"]
    assert [f.message for f in zones if not f.ok] == [
        "availability_zones[1]: us-east-1b is use1-az3 in this account, where EKS places no cluster; pick another AZ"]
    assert sum(f.ok for f in zones) == 2


def test_preflight_as_data_keeps_its_exit_code(monkeypatch):
    import json

    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in (("AWS_EC2_METADATA_DISABLED", "true"), ("AWS_CONFIG_FILE", "/nonexistent"),
                 ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")):
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(main, ["preflight", "--spec", str(EXAMPLES / "default.yaml"), "-o", "json"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.stdout)
    assert data["ok"] is False and data["region"] == "us-east-2"
    assert data["summary"] == {"ok": 0, "failed": len(data["findings"])}
    assert all(set(f) == {"check", "ok", "message"} and "NoCredentialsError" in f["message"] for f in data["findings"])


def test_capacity_as_data(monkeypatch):
    import json

    import yaml

    from infra.deploy import preflight as pf

    spec = load_spec(EXAMPLES / "default.yaml")
    g = spec.group("gb200")
    ec2 = _client("ec2", spec.region)
    offer = {"CapacityBlockOfferingId": "cb-0123456789abcdef0", "InstanceType": g.instance_type,
             "AvailabilityZone": "us-east-2b", "InstanceCount": 18, "StartDate": T0,
             "EndDate": T0 + dt.timedelta(days=7), "CapacityBlockDurationHours": 168, "UpfrontFee": "123456.00",
             "CurrencyCode": "USD", "Tenancy": "default"}
    monkeypatch.setattr(pf.Clients, "for_region", classmethod(lambda cls, region: Clients(ec2, None, None, None)))
    outputs = {}
    with Stubber(ec2) as stub:
        for fmt in ("json", "yaml", "table"):
            stub.add_response("describe_capacity_block_offerings", {"CapacityBlockOfferings": [offer]})
            r = CliRunner().invoke(main, ["capacity", "--spec", str(EXAMPLES / "default.yaml"), "--group", "gb200",
                                          "--start", "2026-12-01", "-o", fmt])
            assert r.exit_code == 0, r.output
            outputs[fmt] = r.stdout
    data = json.loads(outputs["json"])
    assert yaml.safe_load(outputs["yaml"]) == data
    assert data == {"group": "gb200", "instance_type": g.instance_type, "instance_count": g.max_size,
                    "region": "us-east-2", "ultraserver_type": "u-p6e-gb200x72", "ultraserver_count": 1,
                    "days": 7, "offerings": [
                        {"id": "cb-0123456789abcdef0", "availability_zone": "us-east-2b",
                         "start": "2026-12-01T11:30:00+00:00", "end": "2026-12-08T11:30:00+00:00",
                         "instance_count": 18, "ultraserver_type": None, "ultraserver_count": None,
                         "upfront_fee": "123456.00", "currency": "USD"}]}
    assert outputs["table"] == "\n".join(render_offerings(spec, g, [offer])) + "\n"
