"""openpod teardown on a template shaped like the platform's (the synthesized ones: tests/cdk/test_teardown_order.py),
its AWS calls checked against botocore's service models (Stubber validates every request)."""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
from botocore.stub import Stubber

from infra.deploy import teardown as td

TEMPLATE = {"Resources": {
    "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
    "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "Vpc"}}},
    "LustreSg": {"Type": "AWS::EC2::SecurityGroup", "Properties": {"VpcId": {"Ref": "Vpc"}}},
    "Key": {"Type": "AWS::KMS::Key", "DeletionPolicy": "Retain", "Properties": {}},
    "Bucket": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain",
               "Properties": {"BucketEncryption": {"Fn::GetAtt": ["Key", "Arn"]}}},
    "Fs": {"Type": "AWS::FSx::FileSystem", "DeletionPolicy": "Retain",
           "Properties": {"SubnetIds": [{"Ref": "Subnet"}], "SecurityGroupIds": [{"Fn::GetAtt": ["LustreSg", "GroupId"]}],
                          "KmsKeyId": {"Ref": "Key"}}},
    "Dra": {"Type": "AWS::FSx::DataRepositoryAssociation",
            "Properties": {"FileSystemId": {"Ref": "Fs"}, "DataRepositoryPath": {"Fn::Sub": "s3://${Bucket}/"}}},
}}


def test_deletion_order_puts_every_resource_after_its_dependents():
    order = td.deletion_order(TEMPLATE)
    deps = td.dependencies(TEMPLATE)
    for lid, on in deps.items():
        for d in on:
            assert order.index(lid) < order.index(d), (lid, d)
    assert order.index("Dra") < order.index("Fs") < order.index("LustreSg") < order.index("Vpc")


def test_a_retained_file_system_blocks_its_security_group_subnet_and_vpc_until_teardown_deletes_it():
    assert td.network_bound_retained(TEMPLATE) == {"Fs": ["LustreSg", "Subnet", "Vpc"]}
    assert td.blocked_deletions(TEMPLATE) == {"LustreSg": ["Fs"], "Subnet": ["Fs"], "Vpc": ["Fs"]}
    steps = td.plan(TEMPLATE, {"Fs": "fs-0123456789abcdef0"}, "openpod-dev")
    assert [s.action for s in steps] == ["delete-file-system", "delete-stack"]
    assert td.blocked_deletions(TEMPLATE, gone_first=[s.logical_id for s in steps[:-1]]) == {}


def test_a_retained_network_bound_type_teardown_cannot_delete_is_refused():
    t = {"Resources": {**TEMPLATE["Resources"],
                       "Db": {"Type": "AWS::RDS::DBInstance", "DeletionPolicy": "Retain",
                              "Properties": {"VPCSecurityGroups": [{"Ref": "LustreSg"}]}}}}
    with pytest.raises(ValueError, match="Db: a retained AWS::RDS::DBInstance"):
        td.plan(t, {"Fs": "fs-1", "Db": "db-1"}, "s")


def test_run_backs_up_deletes_the_file_system_waits_then_deletes_the_stack():
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-2")
    cfn, fsx = session.client("cloudformation"), session.client("fsx")
    calls: list[str] = []
    with Stubber(cfn) as cs, Stubber(fsx) as fs:
        fs.add_response("delete_file_system", {"FileSystemId": "fs-0123456789abcdef0", "Lifecycle": "DELETING"},
                        {"FileSystemId": "fs-0123456789abcdef0",
                         "LustreConfiguration": {"SkipFinalBackup": False,
                                                 "FinalBackupTags": [{"Key": "openpod.io/teardown", "Value": "Fs"}]}})
        fs.add_response("describe_file_systems", {"FileSystems": [{"FileSystemId": "fs-0123456789abcdef0",
                                                                   "Lifecycle": "DELETING"}]},
                        {"FileSystemIds": ["fs-0123456789abcdef0"]})
        fs.add_client_error("describe_file_systems", "FileSystemNotFound", http_status_code=400,
                            expected_params={"FileSystemIds": ["fs-0123456789abcdef0"]})
        cs.add_response("delete_stack", {}, {"StackName": "openpod-dev"})
        cs.add_client_error("describe_stacks", "ValidationError", "Stack with id openpod-dev does not exist",
                            expected_params={"StackName": "openpod-dev"})
        steps = td.plan(TEMPLATE, {"Fs": "fs-0123456789abcdef0"}, "openpod-dev")
        td.run(steps, cfn=cfn, fsx=fsx, poll_s=1, sleep=lambda s: calls.append(f"sleep {s}"), say=calls.append)
        cs.assert_no_pending_responses()
        fs.assert_no_pending_responses()
    assert calls[0].startswith("delete FSx file system fs-0123456789abcdef0") and "final backup" in calls[0]
    assert calls[-1].startswith("delete stack openpod-dev")


def test_stack_template_reads_physical_ids_across_pages():
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-2")
    cfn = session.client("cloudformation")
    now = dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc)
    with Stubber(cfn) as cs:
        cs.add_response("get_template", {"TemplateBody": '{"Resources": {}}'},
                        {"StackName": "s", "TemplateStage": "Processed"})
        cs.add_response("list_stack_resources", {"StackResourceSummaries": [
            {"LogicalResourceId": "Fs", "PhysicalResourceId": "fs-1", "ResourceType": "AWS::FSx::FileSystem",
             "LastUpdatedTimestamp": now, "ResourceStatus": "CREATE_COMPLETE"}], "NextToken": "t"},
            {"StackName": "s"})
        cs.add_response("list_stack_resources", {"StackResourceSummaries": [
            {"LogicalResourceId": "Vpc", "PhysicalResourceId": "vpc-1", "ResourceType": "AWS::EC2::VPC",
             "LastUpdatedTimestamp": now, "ResourceStatus": "CREATE_COMPLETE"}]}, {"StackName": "s", "NextToken": "t"})
        template, physical = td.stack_template(cfn, "s")
    assert physical == {"Fs": "fs-1", "Vpc": "vpc-1"}


def test_the_command_prints_the_steps_without_yes_and_fails_in_one_line(monkeypatch):
    import json

    from click.testing import CliRunner

    from infra.cli.main import main
    from tests.conftest import EXAMPLES

    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-2")
    cfn, fsx = session.client("cloudformation"), session.client("fsx")
    monkeypatch.setattr(boto3.session, "Session", lambda: type("S", (), {
        "client": staticmethod(lambda name, region_name=None: {"cloudformation": cfn, "fsx": fsx}[name])})())
    now = dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc)
    with Stubber(cfn) as cs:
        cs.add_response("get_template", {"TemplateBody": json.dumps(TEMPLATE)},
                        {"StackName": "openpod-dev", "TemplateStage": "Processed"})
        cs.add_response("list_stack_resources", {"StackResourceSummaries": [
            {"LogicalResourceId": "Fs", "PhysicalResourceId": "fs-0123456789abcdef0",
             "ResourceType": "AWS::FSx::FileSystem", "LastUpdatedTimestamp": now,
             "ResourceStatus": "CREATE_COMPLETE"}]}, {"StackName": "openpod-dev"})
        r = CliRunner().invoke(main, ["teardown", "--spec", str(EXAMPLES / "default.yaml")])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[:3] == [
        "1. delete FSx file system fs-0123456789abcdef0 (Fs) after a final backup",
        "2. delete stack openpod-dev (buckets, keys and log groups are retained)",
        "nothing done; run again with --yes to do it"]
    with Stubber(cfn) as cs:
        cs.add_client_error("get_template", "ValidationError", "Stack with id openpod-dev does not exist")
        r = CliRunner().invoke(main, ["teardown", "--spec", str(EXAMPLES / "default.yaml"), "--yes"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.output.strip().splitlines()[-1].startswith("Error: teardown openpod-dev: ClientError: An error occurred")
