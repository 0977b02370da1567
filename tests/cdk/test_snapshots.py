"""Whole-template snapshots per example: a template only changes when the platform really changes.

Asset hashes (Lambda bundles, the training image built from the source tree)
change with any code edit, so they are replaced by ``<hash>`` before comparing.
Update after an intended change with ``pytest tests/cdk --snapshot-update``.
"""

from __future__ import annotations

import json
import re

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]

_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def normalize(template: dict) -> dict:
    """Replace volatile asset hashes; everything else is compared as synthesized."""
    return json.loads(_HASH.sub("<hash>", json.dumps(template, sort_keys=True)))


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def test_normalize_only_touches_hashes():
    t = {"a": "x" * 64, "b": "0123456789abcdef" * 4, "c": "cdk-hnb659fds-assets-" + "f" * 64 + ".zip"}
    assert normalize(t) == {"a": "x" * 64, "b": "<hash>", "c": "cdk-hnb659fds-assets-<hash>.zip"}


@pytest.mark.parametrize("example", ["default", "large"])
def test_template_snapshot(synthesized, snapshot_json, example):
    assert normalize(synthesized[example].template) == snapshot_json
