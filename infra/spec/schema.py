"""The cluster spec as JSON Schema (draft 2020-12), from the pydantic models: what `openpod schema` prints for
editors (YAML language servers complete and check a spec against it)."""

from __future__ import annotations

from typing import Any

from infra.spec.cluster import ClusterSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def spec_json_schema() -> dict[str, Any]:
    """The schema of the input a spec file may hold (pydantic's validation mode: defaults optional)."""
    body = ClusterSpec.model_json_schema(mode="validation")
    return {"$schema": DIALECT, "title": "openpod cluster spec",
            "description": "One YAML file that declares an openpod training platform (docs/spec.md). Field types "
                           "and ranges only: `openpod validate` also checks the rules across fields.",
            **{k: v for k, v in body.items() if k not in ("title", "description")}}
