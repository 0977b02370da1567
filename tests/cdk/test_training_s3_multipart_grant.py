"""The training role the platform gives teams is enough to clean up a killed writer's S3 multipart upload, and it
grants no s3:ListBucketMultipartUploads (listing a bucket's uploads shows every team's keys). The role's synthesized
policy is enforced by moto in server mode with IAM authorization on."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from platform_constructs.training_access import TEAM_TAG
from tests.conftest import free_port
from tests.training.conftest import PY, ROOT, cli_env
from tests.training.test_s3_multipart_records import KILLED_WRITER, _snapshot, _uploads

TEAM = "team-a"
BUCKET = "openpod-checkpoints"
BOOTSTRAP = 7  # unauthenticated requests: the bucket, then two users with a policy and an access key each


def _role_statements(synth) -> list[dict]:
    stack = synth.stack
    role_id = stack.get_logical_id(stack.training_access.role.node.default_child)
    return [st for p in synth.resources("AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]]


def _resolve(node, arns: dict):
    """CloudFormation intrinsics -> the ARNs of this test's account; the namespace session tag -> the team."""
    if isinstance(node, str):
        return node.replace(TEAM_TAG, TEAM)
    if isinstance(node, list):
        return [_resolve(n, arns) for n in node]
    if "Fn::GetAtt" in node:
        return arns.get(node["Fn::GetAtt"][0], f"arn:aws:s3:::other-{node['Fn::GetAtt'][0].lower()}")
    if "Fn::Join" in node:
        sep, parts = node["Fn::Join"]
        return sep.join(_resolve(p, arns) for p in parts)
    return {k: _resolve(v, arns) for k, v in node.items()}


def _actions(st: dict) -> list[str]:
    return st["Action"] if isinstance(st["Action"], list) else [st["Action"]]


@pytest.fixture
def team_policy(default) -> dict:
    stack = default.stack
    checkpoints = stack.get_logical_id(stack.buckets.checkpoints.node.default_child)
    statements = _resolve(_role_statements(default), {checkpoints: f"arn:aws:s3:::{BUCKET}"})
    for st in statements:
        # moto evaluates no s3:prefix condition (it would deny every listing); the condition itself is asserted
        # by tests/cdk/test_platform.py::test_training_role_reaches_only_the_calling_teams_prefix_...
        st.pop("Condition", None)
    return {"Version": "2012-10-17", "Statement": statements}


def test_the_training_role_grants_abort_by_id_on_the_team_prefix_and_no_upload_listing(team_policy):
    on_checkpoints = [st for st in team_policy["Statement"] if BUCKET in json.dumps(st["Resource"])]
    granted = {a for st in on_checkpoints for a in _actions(st)}
    assert "s3:AbortMultipartUpload" in granted
    assert not any(a in ("s3:ListBucketMultipartUploads", "s3:List*", "s3:*", "*") for a in granted), granted
    for st in on_checkpoints:
        if "s3:AbortMultipartUpload" in _actions(st):  # object ARNs under the team's prefix only
            resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
            assert f"arn:aws:s3:::{BUCKET}/{TEAM}/*" in resources, st
            assert all(r.endswith(f"/{TEAM}/*") for r in resources), st


@pytest.fixture
def moto_iam():
    """A moto server of its own: IAM authorization on after the bootstrap requests (the shared one has it off)."""
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(BOOTSTRAP)}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _user(iam, name: str, policy: dict) -> dict:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


def test_the_team_role_aborts_a_killed_writers_upload(tmp_path, moto_iam, team_policy, monkeypatch):
    """Failed on the old code: it found unfinished uploads by listing the bucket's (ListMultipartUploads), which
    this policy refuses, so the killed writer's upload stayed until the bucket's lifecycle rule."""
    import boto3

    for k, v in {"AWS_ACCESS_KEY_ID": "bootstrap", "AWS_SECRET_ACCESS_KEY": "bootstrap",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    boto3.client("s3", endpoint_url=moto_iam).create_bucket(Bucket=BUCKET)
    iam = boto3.client("iam", endpoint_url=moto_iam)
    team = _user(iam, "team-a-training", team_policy)
    admin = _user(iam, "admin", {"Version": "2012-10-17",
                                 "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
    s3_admin = boto3.client("s3", endpoint_url=moto_iam, aws_access_key_id=admin["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=admin["AWS_SECRET_ACCESS_KEY"])
    s3_team = boto3.client("s3", endpoint_url=moto_iam, aws_access_key_id=team["AWS_ACCESS_KEY_ID"],
                           aws_secret_access_key=team["AWS_SECRET_ACCESS_KEY"])
    with pytest.raises(s3_team.exceptions.ClientError, match="AccessDenied"):  # IAM is enforced
        s3_team.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{TEAM}/")
    with pytest.raises(s3_team.exceptions.ClientError, match="AccessDenied"):  # another team's prefix
        s3_team.put_object(Bucket=BUCKET, Key="team-b/x", Body=b"x")

    uri = f"s3://{BUCKET}/{TEAM}/job1"
    src = _snapshot(tmp_path, "killed")
    r = subprocess.run([PY, "-c", KILLED_WRITER, uri, moto_iam, str(src), "4", "0", "1"], cwd=ROOT,
                       env=cli_env(AWS_DEFAULT_REGION="us-east-1", **team), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == -9, r.stderr[-2000:]
    assert _uploads(s3_admin, BUCKET) == [f"{TEAM}/job1/step_000000004/rank_00000/__0_0.distcp"]

    from training.checkpoint.storage import Marker, S3Tier, describe_dir

    for k, v in team.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # it caches the credentials it first resolved
    small = _snapshot(tmp_path, "next", size=1024)
    tier = S3Tier(uri, endpoint_url=moto_iam)
    tier.put(small, Marker(step=5, rank=0, world_size=1, files=describe_dir(small)))
    assert _uploads(s3_admin, BUCKET) == []
    assert [m.step for m in tier.markers()] == [5]
