"""Trust boundaries in the synthesized platform template (issue 28's lower findings that the platform closes)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]


def _statements(synth, role) -> list[dict]:
    role_id = synth.stack.get_logical_id(role.node.default_child)
    return [st for p in synth.resources("AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]]


def test_the_training_role_uses_the_data_key_only_through_s3(default):
    """Every KMS permission of the training role carries ``kms:ViaService`` = S3 of the region, as docs/security.md
    says: ``bucket.grant_read`` on the datasets bucket added a bare ``kms:Decrypt`` on the data key, which also
    encrypts the checkpoints and logs buckets and FSx."""
    statements = _statements(default, default.stack.training_access.role)
    kms = [st for st in statements
           if any(a.startswith("kms:") for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]))]
    assert kms
    for st in kms:
        assert st.get("Condition") == {"StringEquals": {"kms:ViaService": "s3.us-east-2.amazonaws.com"}}, st
