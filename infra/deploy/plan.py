"""``openpod plan``: what CloudFormation will do to the platform if this change is deployed.

Both sides are synthesized offline (no AWS): the base from a git ref (a clean
``git archive`` of the repository at that ref, spec included) or an existing
cloud assembly / template directory, the head from the working tree. Templates
are diffed per resource: added, updated in place, replaced, removed.

Replacement is decided from the CloudFormation resource provider schemas that
cfn-lint ships (``createOnlyProperties``: changing one makes CloudFormation
create a new resource and delete the old), plus a changed logical id or type,
plus propagation: a property that references a replaced resource resolves to a
new physical id, so it changes too. Each replacement names the schema property
that caused it.

The schemas alone under-report: ``infra.deploy.plan_rules`` adds the documented
"Update requires" of properties the schemas leave out (FSx DeploymentType
replaces; a KMS KeySpec change fails), fixed physical names (a replacement
under the same name fails), and the services' own rules (EKS subnets and
versions, EC2 subnet ranges, node-group updates, FSx capacity). Each such
verdict cites its source.

Stateful resources - cfn-lint's own list of stateful types
(``cfnlint/data/AdditionalSpecs/StatefulResources.json``), the FSx data
repository associations, the EKS cluster, and anything with a ``Retain``
deletion or replace policy - must never be replaced or removed by accident: the
plan blocks (exit 3) unless each is named with ``--allow-replace``. A change
that will fail blocks too (exit 4) unless named with ``--allow-failure``.

Exit codes: 0 the change can be deployed; 1 no plan could be made; 2 bad
invocation or spec; 3 a stateful resource would be replaced or removed; 4 the
deploy will fail (4 wins when both hold). They are the same whatever ``-o``
prints: ``table`` for people, ``json``/``yaml`` the data shape of
:meth:`Plan.to_json` (docs/gitops.md, "The plan as data").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import click

from infra.deploy import plan_rules

EXIT_BLOCKED = 3
EXIT_WILL_FAIL = 4
# What each exit code of a made plan means; 1 (no plan) and 2 (bad input) print no plan.
EXIT_MEANINGS = {
    0: "deployable: nothing blocks",
    EXIT_BLOCKED: "blocked: a stateful resource would be replaced or removed (--allow-replace names it if intended)",
    EXIT_WILL_FAIL: "will fail: CloudFormation or the service will refuse a change (--allow-failure to deploy anyway)",
}
# The data shape of ``-o json|yaml`` (docs/gitops.md, "The plan as data"): keys are only ever added under one
# format; a key renamed or removed, or a meaning changed, is a new format.
PLAN_FORMAT = "openpod.plan/v1"

CFN_LINT_STATEFUL = "stateful type (cfn-lint StatefulResources)"
# Types the platform treats as stateful beyond cfn-lint's list: an FSx data repository association holds the
# link (and its import/export policy) between the file system and the datasets bucket; replacing the EKS cluster
# loses every Kubernetes object, node and job on it.
EXTRA_STATEFUL_TYPES = {
    "AWS::FSx::DataRepositoryAssociation": "links the file system to its S3 data repository",
    "AWS::EKS::Cluster": "a new cluster: every node, job and Kubernetes object is lost",
    "AWS::APS::Workspace": "a new Prometheus workspace: the platform's metric history is lost",
}

# What each action means for people, in table order.
ACTIONS = ("replace", "remove", "update", "add")


# ------------------------------------------------------------------------------------------ schemas


def schema_source() -> str:
    """Where the schemas come from (cfnlint/data/schemas/providers, bundled with cfn-lint), with its version."""
    from cfnlint.version import __version__

    return f"cfn-lint {__version__} provider schemas"


def resource_schema(region: str, type_: str) -> dict | None:
    """The CloudFormation resource provider schema of ``type_`` in ``region``, as cfn-lint ships it."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER
    from cfnlint.schema import ResourceNotFoundError

    try:
        return PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, type_).schema
    except ResourceNotFoundError:
        return None


def create_only_properties(region: str, type_: str) -> list[str] | None:
    """The schema's ``createOnlyProperties`` (JSON pointers, e.g. ``/properties/SubnetIds``); None: no schema."""
    schema = resource_schema(region, type_)
    return None if schema is None else list(schema.get("createOnlyProperties", []))


def stateful_types() -> dict[str, str]:
    """Stateful resource types -> why: cfn-lint's list plus the platform's own additions."""
    from importlib import resources

    import cfnlint.data.AdditionalSpecs as specs

    data = json.loads(resources.files(specs).joinpath("StatefulResources.json").read_text())
    out = {t: CFN_LINT_STATEFUL for t in data["ResourceTypes"]}
    out.update(EXTRA_STATEFUL_TYPES)
    return out


def stateful_reason(resource: dict, types: dict[str, str]) -> str | None:
    """Why a resource holds data that a replacement or removal would orphan, or None."""
    if resource.get("Type") in types:
        return types[resource["Type"]]
    for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
        if resource.get(policy) == "Retain":
            return f"{policy}: Retain"
    return None


# ------------------------------------------------------------------------------------------ templates


@dataclass
class Assembly:
    """The CloudFormation templates of a cloud assembly (or a directory of templates), by stack name."""

    templates: dict[str, dict]
    region: str | None = None
    paths: dict[str, dict[str, str]] = field(default_factory=dict)   # stack -> logical id -> construct path

    def path(self, stack: str, logical_id: str) -> str | None:
        r = self.templates.get(stack, {}).get("Resources", {}).get(logical_id, {})
        return self.paths.get(stack, {}).get(logical_id) or r.get("Metadata", {}).get("aws:cdk:path")


def load_assembly(directory: str | Path) -> Assembly:
    """:func:`_load_assembly`, with any file that is not what it should be said as a PlanError (one line)."""
    try:
        a = _load_assembly(directory)
    except PlanError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        detail = (str(e).strip().splitlines() or [""])[0][:200]
        raise PlanError(f"{directory}: not a cdk.out or a directory of CloudFormation templates "
                        f"({type(e).__name__}: {detail})") from None
    bad = sorted(n for n, t in a.templates.items()
                 if not isinstance(t, dict) or not isinstance(t.get("Resources", {}), dict))
    if bad:
        raise PlanError(f"{directory}: {', '.join(map(str, bad))}: not a CloudFormation template (a JSON object "
                        "with a Resources object)")
    return a


def _load_assembly(directory: str | Path) -> Assembly:
    """Templates from a ``cdk.out`` (its manifest, nested stage assemblies included) or ``*.template.json`` files.

    A directory of templates fetched with ``aws cloudformation get-template`` (one ``STACK.template.json`` each)
    is a valid base too: that is the deployed state, exactly.
    """
    directory = Path(directory)
    templates: dict[str, dict] = {}
    paths: dict[str, dict[str, str]] = {}
    region = None
    manifest = directory / "manifest.json"
    if manifest.exists():
        def walk(d: Path, data: dict) -> None:
            nonlocal region
            for art in data.get("artifacts", {}).values():
                props = art.get("properties", {})
                if art.get("type") == "aws:cloudformation:stack":
                    name = props.get("stackName") or art.get("displayName")
                    templates[name] = json.loads((d / props["templateFile"]).read_text())
                    meta = dict(art.get("metadata", {}))
                    if art.get("additionalMetadataFile"):
                        meta.update(json.loads((d / art["additionalMetadataFile"]).read_text()))
                    paths[name] = {e["data"]: p.lstrip("/") for p, entries in meta.items() for e in entries
                                   if e.get("type") == "aws:cdk:logicalId"}
                    env = art.get("environment", "")
                    if env.startswith("aws://") and not env.endswith("/unknown-region"):
                        region = region or env.rsplit("/", 1)[1]
                elif art.get("type") == "cdk:cloud-assembly":
                    sub = d / props["directoryName"]
                    walk(sub, json.loads((sub / "manifest.json").read_text()))

        walk(directory, json.loads(manifest.read_text()))
    else:
        for f in sorted(directory.glob("*.template.json")):
            templates[f.name[: -len(".template.json")]] = json.loads(f.read_text())
    if not templates:
        raise PlanError(f"{directory}: no CloudFormation templates (expected a cdk.out or *.template.json files)")
    return Assembly(templates, region, paths)


class PlanError(Exception):
    """A plan could not be made (bad ref, failed synth, missing files); the message says which."""


def _copy_tree(repo: Path, ref: str | None, dest: Path) -> None:
    """The repository at ``ref`` (``git archive``) or the working tree's tracked and unignored files (ref None)."""
    if ref is not None:
        archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref],
                                 capture_output=True)
        if archive.returncode:
            raise PlanError(f"--base {ref}: {archive.stderr.decode().strip() or 'git archive failed'}")
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        return
    files = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = repo / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def synthesize(tree: Path, spec: Path, outdir: Path) -> Assembly:
    """Run the tree's own ``app.py`` (as ``cdk synth -c spec=...`` does) into ``outdir``; offline."""
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps({"spec": str(spec)}),
           "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "app.py"], cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode:
        tail = "\n  ".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise PlanError(f"synth of {spec} in {tree} failed (exit {proc.returncode}):\n  {tail}")
    return load_assembly(outdir)


def synthesize_side(repo: Path, spec: Path, ref: str | None, workdir: Path) -> Assembly:
    """Synthesize ``spec`` at git ``ref`` (None: the working tree), from a clean copy of that side's files.

    Clean copies on both sides keep untracked files (virtualenvs, build output) out of the asset hashes, so an
    image or handler shows as changed only when its sources did. A spec inside the repository is read at the
    ref on the base side; a spec outside it is the same file on both sides (a code-only change).
    """
    spec, repo = spec.resolve(), repo.resolve()
    try:
        rel = spec.relative_to(repo)
    except ValueError:
        rel = None
    name = "head" if ref is None else "base"
    tree = workdir / f"{name}-tree"
    tree.mkdir(parents=True)
    _copy_tree(repo, ref, tree)
    side_spec = tree / rel if rel is not None else spec
    if not side_spec.exists():
        raise PlanError(f"--spec {spec}: not in {'the working tree' if ref is None else ref}")
    return synthesize(tree, side_spec, workdir / f"{name}.out")


# ------------------------------------------------------------------------------------------ diff


@dataclass
class Change:
    """What CloudFormation will do to one resource."""

    stack: str
    logical_id: str
    type: str
    action: str                      # add | update | replace | remove
    causes: list[str] = field(default_factory=list)   # why a replacement: schema property, logical id, type
    properties: list[str] = field(default_factory=list)  # changed top-level properties (update/replace)
    new_logical_id: str | None = None
    path: str | None = None          # the construct path (aws:cdk:path), for people
    stateful: str | None = None      # why it holds data, if it does
    allowed: bool = False            # named with --allow-replace
    fails: list[str] = field(default_factory=list)   # why the deploy will fail here, each with its source
    failure_allowed: bool = False    # named with --allow-failure

    @property
    def loses_data(self) -> bool:
        return self.action in ("replace", "remove") and self.stateful is not None and not self.allowed

    @property
    def will_fail(self) -> bool:
        return bool(self.fails) and not self.failure_allowed

    @property
    def blocking(self) -> bool:
        return self.loses_data or self.will_fail

    @property
    def verdict(self) -> str:
        return "will fail" if self.fails else self.action

    @property
    def risks(self) -> list[str]:
        """will-fail, data-loss (a stateful resource replaced or removed, allowed or not), replacement, removal."""
        return [r for r, held in (("will-fail", bool(self.fails)),
                                  ("data-loss", self.action in ("replace", "remove") and self.stateful is not None),
                                  ("replacement", self.action == "replace"), ("removal", self.action == "remove"))
                if held]


@dataclass
class Plan:
    changes: list[Change]
    schema_source: str
    upgrade: list[str] = field(default_factory=list)   # ordered steps when eks.version changes

    @property
    def blocked(self) -> list[Change]:
        return [c for c in self.changes if c.blocking]

    @property
    def exit_code(self) -> int:
        if any(c.will_fail for c in self.changes):
            return EXIT_WILL_FAIL
        return EXIT_BLOCKED if self.blocked else 0

    def counts(self) -> dict[str, int]:
        return {a: sum(c.action == a for c in self.changes) for a in ACTIONS}

    def to_json(self) -> dict:
        """The plan as data (format :data:`PLAN_FORMAT`, documented in docs/gitops.md "The plan as data")."""
        return {
            "format": PLAN_FORMAT,
            "exit_code": self.exit_code,
            "exit_meaning": EXIT_MEANINGS[self.exit_code],
            "schema_source": self.schema_source,
            "summary": {**self.counts(), "will_fail": sum(bool(c.fails) for c in self.changes),
                        "data_loss": sum("data-loss" in c.risks for c in self.changes),
                        "blocking": len(self.blocked)},
            "blocked": [c.logical_id for c in self.blocked],
            "will_fail": [c.logical_id for c in self.changes if c.fails],
            "upgrade": self.upgrade,
            "changes": [change_data(c, self.schema_source) for c in self.changes],
        }


def change_data(c: Change, schemas: str) -> dict:
    """One change as data: what, the action, its risks, and each reason with its sources."""
    return {
        "stack": c.stack, "logical_id": c.logical_id, "new_logical_id": c.new_logical_id, "type": c.type,
        "path": c.path, "action": c.action, "verdict": c.verdict, "risks": c.risks, "blocking": c.blocking,
        "allowed": c.allowed, "failure_allowed": c.failure_allowed, "stateful": c.stateful,
        "properties": c.properties, "causes": c.causes, "fails": c.fails, "reasons": reasons(c, schemas),
    }


_CITATION = re.compile(r"\[([A-Za-z0-9_.-]+): ")


def cited(text: str) -> tuple[str, list[dict]]:
    """``text`` without its ``[fact key: source]`` citations (:func:`infra.deploy.plan_rules.cite`), and those
    citations as ``{"fact", "source"}``."""
    from openpod_core.facts.register import fact

    sources = []
    for key in dict.fromkeys(_CITATION.findall(text)):
        try:
            source = fact(key).source
        except KeyError:
            continue
        citation = f"[{key}: {source}]"
        if citation in text:
            text = text.replace(f" {citation}", "").replace(citation, "")
            sources.append({"fact": key, "source": source})
    return text.strip(), sources


def _cause_sources(c: Change, cause: str, schemas: str) -> tuple[str, list[dict]]:
    text, sources = cited(cause)
    if sources:
        return text, sources
    if " is create-only" in cause:
        return text, [{"fact": None, "source": f"createOnlyProperties of {c.type}, {schemas}"}]
    return text, [{"fact": None, "source": "infra/deploy/plan.py: a new logical id or type is a new resource"}]


def _stateful_source(c: Change) -> str:
    if c.stateful == CFN_LINT_STATEFUL:
        from cfnlint.version import __version__

        return f"cfnlint/data/AdditionalSpecs/StatefulResources.json (cfn-lint {__version__})"
    if c.stateful and c.stateful.endswith(": Retain"):
        return f"the template's {c.stateful.split(':')[0]}"
    return "infra/deploy/plan.py EXTRA_STATEFUL_TYPES"


def reasons(c: Change, schemas: str) -> list[dict]:
    """Why a change is risky: ``{"risk", "text", "sources"}`` per failure, per replacement cause, and for data
    a replacement or removal would orphan. A plain add or update has none (its ``properties`` say what)."""
    def reason(risk: str, text: str, sources: list[dict]) -> dict:
        return {"risk": risk, "text": text, "sources": sources}

    out = [reason("will-fail", *cited(f)) for f in c.fails]
    if c.action == "replace":
        out += [reason("replacement", *_cause_sources(c, cause, schemas)) for cause in c.causes]
    if "data-loss" in c.risks:
        out.append(reason("data-loss", c.stateful, [{"fact": None, "source": _stateful_source(c)}]))
    return out


_MISSING = object()


def _at(value, pointer: str):
    """The value at a JSON pointer into a resource (``/properties/A/B``); ``*`` compares the whole list."""
    parts = pointer.strip("/").split("/")
    if parts and parts[0] == "properties":
        parts = parts[1:]
    for p in parts:
        if p == "*":
            return value
        if not isinstance(value, dict) or p not in value:
            return _MISSING
        value = value[p]
    return value


def _refs(value) -> set[str]:
    """Logical ids a template value references (Ref, Fn::GetAtt, Fn::Sub)."""
    out: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            out.add(value["Ref"])
        att = value.get("Fn::GetAtt")
        if isinstance(att, list) and att:
            out.add(att[0])
        elif isinstance(att, str):
            out.add(att.split(".")[0])
        for v in value.values():
            out |= _refs(v)
    elif isinstance(value, list):
        for v in value:
            out |= _refs(v)
    return out


def _mark(value, renamed: dict[str, str], replaced: set[str]):
    """``value`` with references to replaced resources made distinct (they resolve to new physical ids) and
    references to renamed ids spelled with the base's id (so a rename alone compares equal)."""
    if isinstance(value, dict):
        if set(value) == {"Ref"} and isinstance(value["Ref"], str):
            rid = renamed.get(value["Ref"], value["Ref"])
            return {"Ref": f"<new {rid}>" if rid in replaced else rid}
        if set(value) == {"Fn::GetAtt"} and isinstance(value["Fn::GetAtt"], list) and value["Fn::GetAtt"]:
            rid = renamed.get(value["Fn::GetAtt"][0], value["Fn::GetAtt"][0])
            return {"Fn::GetAtt": [f"<new {rid}>" if rid in replaced else rid, *value["Fn::GetAtt"][1:]]}
        return {k: _mark(v, renamed, replaced) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark(v, renamed, replaced) for v in value]
    return value


def _pair_renames(removed: dict[str, tuple[str, str]], added: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Pair removed and added resources (logical id -> (type, construct path)) that are the same thing under a
    new logical id: same type, and the construct path the same but for one segment (a renamed construct id,
    e.g. an instance group). Returns new id -> old id."""
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for new_id, (new_type, new_path) in sorted(added.items()):
        b = new_path.split("/")
        for old_id, (old_type, old_path) in sorted(removed.items()):
            a = old_path.split("/")
            if (old_id not in taken and old_type == new_type and len(a) == len(b) > 1
                    and sum(x != y for x, y in zip(a, b)) == 1):
                pairs[new_id] = old_id
                taken.add(old_id)
                break
    return pairs


def diff_stack(stack: str, base: dict, head: dict, region: str, *, allow: set[str] = frozenset(),
               types: dict[str, str] | None = None, base_paths: dict[str, str] | None = None,
               head_paths: dict[str, str] | None = None, allow_failure: set[str] = frozenset()) -> list[Change]:
    """Per-resource changes from ``base`` to ``head`` (two CloudFormation templates of one stack).

    ``base_paths``/``head_paths`` (logical id -> construct path) pair a renamed construct's old and new
    logical ids; without them the templates' ``aws:cdk:path`` metadata is used, if any.
    """
    types = stateful_types() if types is None else types
    b_res, h_res = base.get("Resources", {}), head.get("Resources", {})
    removed = {k: v for k, v in b_res.items() if k not in h_res}
    added = {k: v for k, v in h_res.items() if k not in b_res}
    def with_path(res: dict[str, dict], paths: dict[str, str] | None) -> dict[str, tuple[str, str]]:
        return {k: (v["Type"], (paths or {}).get(k) or v.get("Metadata", {}).get("aws:cdk:path") or "")
                for k, v in res.items()}

    renamed = _pair_renames(with_path(removed, base_paths), with_path(added, head_paths))   # new id -> old id
    common = [(k, k) for k in b_res if k in h_res] + [(old, new) for new, old in renamed.items()]

    replaced: set[str] = set(renamed.values())
    decisions: dict[str, tuple[list[str], list[str]]] = {}
    while True:   # to a fixed point: a replacement can force replacements of what references it
        decisions.clear()
        grew = False
        for old_id, new_id in common:
            b, h = b_res[old_id], h_res[new_id]
            bp = _mark(b.get("Properties", {}), {}, set())
            hp = _mark(h.get("Properties", {}), renamed, replaced)
            changed = sorted(k for k in set(bp) | set(hp) if bp.get(k, _MISSING) != hp.get(k, _MISSING))
            causes: list[str] = []
            if old_id != new_id:
                causes.append(f"new logical id {new_id}")
            if b["Type"] != h["Type"]:
                causes.append(f"type {b['Type']} -> {h['Type']}")
            if changed:
                create_only = create_only_properties(region, h["Type"]) or []
                for pointer in create_only:
                    if _at(bp, pointer) != _at(hp, pointer):
                        via = sorted(r for r in _refs(_at(h.get("Properties", {}), pointer))
                                     if renamed.get(r, r) in replaced)
                        note = f" (references replaced {', '.join(via)})" if via else ""
                        causes.append(f"{pointer} is create-only{note}")
                for rule in plan_rules.property_rules(h["Type"]):
                    if rule.verdict == "replace" and _at(bp, rule.pointer) != _at(hp, rule.pointer):
                        causes.append(f"{rule.pointer}: update requires replacement {plan_rules.cite(rule.fact)}")
            decisions[old_id] = (causes, changed)
            if causes and old_id not in replaced:
                replaced.add(old_id)
                grew = True
        if not grew:
            break

    # A node group follows its launch template's LatestVersionNumber: a changed template rolls its nodes.
    old_of = {new: old for old, new in common}
    for old_id, new_id in common:
        lt = h_res[new_id].get("Properties", {}).get("LaunchTemplate", {}).get("Id") \
            if h_res[new_id]["Type"] == "AWS::EKS::Nodegroup" else None
        lt_id = old_of.get(lt.get("Ref", "")) if isinstance(lt, dict) else None
        if lt_id and decisions.get(lt_id, ([], []))[1] and "LaunchTemplate" not in decisions[old_id][1]:
            decisions[old_id] = (decisions[old_id][0], sorted([*decisions[old_id][1], "LaunchTemplate"]))

    ctx = plan_rules.Context(b_res, h_res, old_of, replaced, {k: v[1] for k, v in decisions.items()})
    live = {key: lid for lid, r in b_res.items()
            if (key := plan_rules.identity(r["Type"], r.get("Properties", {}))) is not None}

    def collides(r: dict) -> list[str]:
        why = plan_rules.collision(r["Type"], _mark(r.get("Properties", {}), renamed, replaced), live)
        return [why] if why else []

    changes: list[Change] = []
    new_of = {old: new for new, old in renamed.items()}
    for old_id, new_id in common:
        causes, changed = decisions[old_id]
        h = h_res[new_id]
        if not causes and not changed:
            continue
        bp, hp = b_res[old_id].get("Properties", {}), h.get("Properties", {})
        fails = [f"{rule.pointer} cannot change {plan_rules.cite(rule.fact)}"
                 for rule in plan_rules.property_rules(h["Type"])
                 if rule.verdict == "fail" and _at(bp, rule.pointer) != _at(hp, rule.pointer)]
        if causes:
            fails += collides(h)
        fails += plan_rules.service_failures(ctx, new_id)
        changes.append(Change(
            stack, old_id, h["Type"], "replace" if causes else "update", causes, changed,
            new_logical_id=new_of.get(old_id), path=(head_paths or {}).get(new_id),
            stateful=stateful_reason(b_res[old_id], types) or stateful_reason(h, types), fails=fails,
        ))
    for lid, r in removed.items():
        if lid not in new_of:
            changes.append(Change(stack, lid, r["Type"], "remove", path=(base_paths or {}).get(lid),
                                  stateful=stateful_reason(r, types)))
    for lid, r in added.items():
        if lid not in renamed:
            changes.append(Change(stack, lid, r["Type"], "add", path=(head_paths or {}).get(lid), fails=collides(r)))
    for c in changes:
        c.allowed = c.logical_id in allow or (c.new_logical_id or "") in allow
        c.failure_allowed = c.logical_id in allow_failure or (c.new_logical_id or "") in allow_failure
    changes.sort(key=lambda c: (ACTIONS.index(c.action), c.logical_id))
    return changes


def diff(base: Assembly, head: Assembly, *, region: str, allow: set[str] = frozenset(),
         allow_failure: set[str] = frozenset(), spec_path: str | None = None) -> Plan:
    """The plan from ``base`` to ``head``: every stack of either side, stacks new or gone included (``spec_path``:
    the spec the commands of the upgrade steps name)."""
    types = stateful_types()
    changes: list[Change] = []
    for stack in sorted(set(base.templates) | set(head.templates)):
        changes += diff_stack(stack, base.templates.get(stack, {}), head.templates.get(stack, {}), region,
                              allow=allow, types=types, allow_failure=allow_failure,
                              base_paths={k: base.path(stack, k) or "" for k in
                                          base.templates.get(stack, {}).get("Resources", {})},
                              head_paths={k: head.path(stack, k) or "" for k in
                                          head.templates.get(stack, {}).get("Resources", {})})
    from infra.deploy import upgrade

    return Plan(changes, schema_source(), upgrade.order(base, head, spec_path))


# ------------------------------------------------------------------------------------------ output


def _cause_text(c: Change) -> str:
    text = ""
    if c.action == "replace":
        text = "; ".join(c.causes)
    elif c.action == "update":
        text = "in place: " + ", ".join(c.properties)
    if c.fails:
        text = f"WILL FAIL ({c.action}): " + "; ".join(c.fails) + (f" - {text}" if text else "")
    return text


def blocked_lines(plan: Plan) -> list[str]:
    lines = [f"will fail: {c.stack}/{c.logical_id} ({c.type}) - " + "; ".join(c.fails)
             + f"; pass --allow-failure {c.logical_id} to deploy anyway" for c in plan.changes if c.will_fail]
    return lines + [f"blocked: {c.stack}/{c.logical_id} ({c.type}) would be "
                    f"{'replaced' if c.action == 'replace' else 'removed'}"
                    f"{' - ' + '; '.join(c.causes) if c.causes else ''} - {c.stateful}; "
                    f"pass --allow-replace {c.logical_id} if intended" for c in plan.changes if c.loses_data]


def render_table(plan: Plan) -> str:
    if not plan.changes:
        return "no changes\n"
    rows = [("ACTION", "STACK", "LOGICAL ID", "TYPE", "STATEFUL", "WHY")]
    for c in plan.changes:
        lid = c.logical_id + (f" -> {c.new_logical_id}" if c.new_logical_id else "")
        flag = "-" if not c.stateful else ("allowed" if c.allowed else "yes")
        rows.append((c.verdict, c.stack, lid, c.type, flag, _cause_text(c)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]
    n = plan.counts()
    lines.append("")
    lines.append(", ".join(f"{n[a]} to {a}" for a in ACTIONS)
                 + f"  (replacement rules: createOnlyProperties, {plan.schema_source}; infra/deploy/plan_rules.py)")
    failing = sum(bool(c.fails) for c in plan.changes)
    if failing:
        lines.append(f"{failing} change(s) will fail")
    if plan.upgrade:
        lines.append("")
        lines.append("upgrade order:")
        lines += [f"  {i}. {s}" for i, s in enumerate(plan.upgrade, 1)]
    lines += blocked_lines(plan)
    return "\n".join(lines) + "\n"


def render_markdown(plan: Plan) -> str:
    """A pull-request comment: verdict first, then replacements/removals, then the rest folded."""
    n = plan.counts()
    lost = [c for c in plan.changes if c.loses_data]
    failing = [c for c in plan.changes if c.will_fail]
    verdict = (f":no_entry: **{len(lost)} stateful resource(s) would be replaced or removed**"
               if lost else ":white_check_mark: no stateful resource is replaced or removed")
    if failing:
        verdict = f":x: **{len(failing)} change(s) will fail**\n\n" + verdict
    out = ["### openpod plan", "", verdict, "",
           " | ".join(f"{n[a]} to {a}" for a in ACTIONS), ""]
    if not plan.changes:
        return "\n".join(out + ["No changes."]) + "\n"

    def table(changes: list[Change]) -> list[str]:
        rows = ["| action | stack | logical id | type | stateful | why |", "|---|---|---|---|---|---|"]
        for c in changes:
            lid = f"`{c.logical_id}`" + (f" → `{c.new_logical_id}`" if c.new_logical_id else "")
            flag = "" if not c.stateful else ("allowed" if c.allowed else f"**yes** ({c.stateful})")
            why = _cause_text(c).replace("|", "\\|")
            rows.append(f"| {c.verdict} | {c.stack} | {lid} | `{c.type}` | {flag} | {why} |")
        return rows

    risky = [c for c in plan.changes if c.action in ("replace", "remove") or c.fails]
    rest = [c for c in plan.changes if c not in risky]
    if risky:
        out += ["#### Replaced or removed", ""] + table(risky) + [""]
    if rest:
        out += ["<details><summary>Updated in place or added " f"({len(rest)})</summary>", ""] + table(rest)
        out += ["", "</details>", ""]
    if plan.upgrade:
        out += ["#### Upgrade order", ""] + [f"{i}. {s}" for i, s in enumerate(plan.upgrade, 1)] + [""]
    if plan.blocked:
        out += ["```"] + blocked_lines(plan) + ["```", ""]
    out.append(f"<sub>Replacement rules: createOnlyProperties from the {plan.schema_source}, plus the documented "
               "update behaviours and service rules of infra/deploy/plan_rules.py.</sub>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------ making one


def make_plan(*, spec_path: Path, base_ref: str | None, base_template: Path | None, head_template: Path | None,
              allow: set[str], region: str, repo: Path, allow_failure: set[str] = frozenset()) -> Plan:
    """Load or synthesize both sides and diff them."""
    with tempfile.TemporaryDirectory(prefix="openpod-plan-") as tmp:
        work = Path(tmp)
        if base_template is None:   # each synth takes tens of seconds: say what is happening, on stderr
            click.echo(f"plan: synthesizing {spec_path} at {base_ref} ...", err=True)
        base = (load_assembly(base_template) if base_template is not None
                else synthesize_side(repo, spec_path, base_ref, work))
        if head_template is None:
            click.echo(f"plan: synthesizing {spec_path} in the working tree ...", err=True)
        head = (load_assembly(head_template) if head_template is not None
                else synthesize_side(repo, spec_path, None, work))
        click.echo("plan: comparing templates ...", err=True)
        return diff(base, head, region=region, allow=allow, allow_failure=allow_failure, spec_path=str(spec_path))
