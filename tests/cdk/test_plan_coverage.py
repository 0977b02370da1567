"""docs/plan-coverage.md: the verdict source of every property of both examples' templates, and the figure."""

from __future__ import annotations

import os

import pytest

from infra.deploy import plan, plan_coverage
from tests.conftest import ROOT

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]
DOC = ROOT / "docs" / "plan-coverage.md"


def test_plan_coverage_doc_is_current(synthesized):
    rows = plan_coverage.coverage([s.template for s in synthesized.values()])
    text = plan_coverage.render(rows, plan.schema_source())
    if os.environ.get("OPENPOD_UPDATE_DOCS"):
        DOC.write_text(text)
    assert DOC.read_text() == text, "docs/plan-coverage.md is stale: OPENPOD_UPDATE_DOCS=1 pytest this test"
    fsx = {r.property: r.source for r in rows if r.type == "AWS::FSx::FileSystem"}
    assert "fsx.lustre.efa-create-only" in fsx["LustreConfiguration"]
    assert fsx["SubnetIds"] == "schema: create-only"
