"""How much of a template ``openpod plan`` can judge from a source: every property of every resource type present,
each with where its update verdict comes from.

- a row of :data:`infra.deploy.plan_rules.UPDATE_REQUIRES` (a fact: replace or fail), for the property or a nested
  field of it;
- the CloudFormation provider schema cfn-lint ships: ``createOnlyProperties`` (replace), or a property the schema
  defines and does not mark create-only or read-only (in place: the schema is the documented update behaviour);
- a service rule (:data:`infra.deploy.plan_rules.SERVICE_RULES`) on top of either, listed for the type;
- nothing: a type without a schema or a property the schema does not define.

``render(coverage(templates))`` is ``docs/plan-coverage.md`` (tests/cdk/test_plan_coverage.py keeps it current).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.deploy import plan, plan_rules


@dataclass(frozen=True)
class PropertyVerdict:
    type: str
    property: str
    source: str        # "rule <fact>" | "schema: create-only" | "schema: in place" | "none"


def _verdict(type_: str, prop: str, region: str) -> str:
    pointer = f"/properties/{prop}"
    rules = [r for r in plan_rules.UPDATE_REQUIRES if r.type == type_
             and (r.pointer == pointer or r.pointer.startswith(pointer + "/"))]
    schema = plan.resource_schema(region, type_)
    parts = [f"rule {r.pointer[len(pointer):] or ''} {r.verdict} [{r.fact}]".replace("rule  ", "rule ")
             for r in rules]
    if schema is None:
        return "; ".join(parts) or "none"
    create_only = schema.get("createOnlyProperties", [])
    read_only = schema.get("readOnlyProperties", [])
    if pointer in create_only:
        parts.insert(0, "schema: create-only")
    elif any(p.startswith(pointer + "/") for p in create_only):
        parts.insert(0, "schema: in place, some fields create-only")
    elif pointer in read_only:
        parts.insert(0, "schema: read-only")
    elif prop in schema.get("properties", {}):
        parts.insert(0, "schema: in place")
    return "; ".join(parts) or "none"


def coverage(templates: list[dict], region: str = "us-east-1") -> list[PropertyVerdict]:
    """One verdict per (resource type, top-level property) present in any of ``templates``."""
    seen: dict[tuple[str, str], None] = {}
    for t in templates:
        for r in t.get("Resources", {}).values():
            for prop in r.get("Properties", {}):
                seen[(r["Type"], prop)] = None
    return [PropertyVerdict(t, p, _verdict(t, p, region)) for t, p in sorted(seen)]


def render(rows: list[PropertyVerdict], schemas: str) -> str:
    judged = [r for r in rows if r.source != "none"]
    types = sorted({r.type for r in rows})
    lines = [
        "# `openpod plan` coverage",
        "",
        "Generated from both examples' synthesized templates by `infra/deploy/plan_coverage.py` "
        "(tests/cdk/test_plan_coverage.py keeps it current). Every property present, per resource type, with the "
        f"source of its update verdict ({schemas}; `rule`: a row of `infra/deploy/plan_rules.py` UPDATE_REQUIRES "
        "with its fact; service rules add will-fail checks for the types listed below).",
        "",
        f"**Coverage: {len(judged)} of {len(rows)} properties ({100 * len(judged) / max(1, len(rows)):.0f}%) over "
        f"{len(types)} resource types have a verdict source.**",
        "",
        "Service rules (will fail, each with its fact): "
        + ", ".join(f"`{t}`" for t in sorted(plan_rules.SERVICE_RULES)) + ".",
        "",
        "| type | property | verdict source |",
        "|---|---|---|",
    ]
    lines += [f"| {r.type} | {r.property} | {r.source} |" for r in rows]
    return "\n".join(lines) + "\n"
