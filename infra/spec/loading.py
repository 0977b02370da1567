"""Reading a spec file safely, and leaving out what failed field validation so the cross-field rules still run.

``read_yaml(path)``: at most :data:`MAX_SPEC_BYTES` are read (so ``/dev/zero`` or a huge file cost the same as a
small one), binary and UTF-16 input are refused in one line, duplicate mapping keys are refused (YAML keeps the
last silently: a second ``teams:`` would drop the first), and anchors/aliases may not expand past
:data:`MAX_NODES` values.

``pruned(data, errors)``: ``data`` without the entries pydantic refused, for :func:`parse_spec`.

``load_spec(path)`` / ``parse_spec(data)``: a validated :class:`~infra.spec.cluster.ClusterSpec`, or
:class:`~infra.spec.base.SpecError` carrying one :class:`~infra.spec.base.Problem` per thing that is wrong: field
errors (:mod:`infra.spec.messages` words them) and the cross-field rules (:mod:`infra.spec.rules`) together.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from infra.spec.base import Problem, SpecError
from infra.spec.cluster import ClusterSpec
from infra.spec.messages import error_location, error_message
from infra.spec.rules import CHECKS

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
DEFAULT_SPEC = EXAMPLES_DIR / "default.yaml"

# A spec is a few KiB (examples/large.yaml is under 10 KiB); 1 MiB leaves room for hundreds of teams.
MAX_SPEC_BYTES = 1 << 20
# Values after alias expansion: YAML aliases can make a small file expand exponentially ("billion laughs").
MAX_NODES = 200_000

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's parser when PyYAML was built with it


class _UniqueKeyLoader(_Base):  # type: ignore[misc, valid-type]
    """SafeLoader that records every key that appears twice in one mapping."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_yaml_set(self, node):
        """A ``!!set`` would pass as a list in arbitrary order (pydantic turns a set into a list): refuse it."""
        self.duplicates.append(f"line {node.start_mark.line + 1}: a YAML set (!!set); the spec takes lists: write "
                               "one '- item' per entry")
        yield []

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except Exception:  # an unhashable key is reported by the constructor itself
                    continue
                line = key_node.start_mark.line + 1
                if key in seen:
                    self.duplicates.append(f"line {line}: key {key!r} appears twice in the same mapping (first at "
                                           f"line {seen[key]}); YAML would keep only the last one silently - "
                                           "merge or remove one")
                else:
                    seen[key] = line
        return super().construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:set", _UniqueKeyLoader.construct_yaml_set)


def _too_many_nodes(data: Any) -> bool:
    budget = MAX_NODES
    todo = [data]
    while todo:
        node = todo.pop()
        budget -= 1
        if budget < 0:
            return True
        if isinstance(node, dict):
            todo.extend(node.keys())
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return False


def read_yaml(path: Path) -> tuple[Any, str | None]:
    """The parsed YAML of ``path``, or None and the one problem (a line) that stops it."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SPEC_BYTES + 1)
    except OSError as e:
        return None, (f"cannot read spec file: {e.strerror or e}")
    if len(raw) > MAX_SPEC_BYTES:
        return None, (f"larger than {MAX_SPEC_BYTES // 1024} KiB: not a spec file (a spec is a few KiB "
                                 "of YAML text)")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(raw) > 1 and (raw[0] == 0 or raw[1] == 0)):
        return None, ("UTF-16 text; save the spec as UTF-8")
    if b"\x00" in raw:
        return None, (f"binary data (a NUL byte at offset {raw.index(0)}), not YAML text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return None, (f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); save the spec "
                                 "as UTF-8")
    loader = _UniqueKeyLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        return None, (f"{where}not valid YAML ({getattr(e, 'problem', None) or e})")
    except RecursionError:
        return None, ("nested too deeply to be a spec")
    finally:
        loader.dispose()
    if loader.duplicates:
        # one problem per duplicate would need a list; they are joined so the caller's one-line contract holds
        return None, ("; ".join(loader.duplicates))
    if _too_many_nodes(data):
        return None, (f"expands to more than {MAX_NODES} values (YAML aliases?): not a spec")
    return data, None


# ------------------------------------------------------------------------ leaving out what failed


_DROP = object()


def _apply(rest: Any, loc: tuple, drop_container: bool, dropped: set[str]) -> bool:
    """Remove the value at ``loc`` (or, for a missing required field, the entry holding it). False: cannot."""
    loc = tuple(loc)
    if drop_container:
        loc = loc[:-1]
        # a missing field of a dict-valued entry (quotas.p5.nodes): drop that entry; of a list element: the element
    if not loc:
        return False
    parent = rest
    for part in loc[:-1]:
        parent = parent[part]
        if parent is _DROP:
            return True   # inside an entry dropped already
    last = loc[-1]
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        if isinstance(parent[last], dict) and isinstance(parent[last].get("name"), str):
            dropped.add(parent[last]["name"])
        parent[last] = _DROP
        return True
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    return False


def _sweep(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _sweep(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_sweep(v) for v in node if v is not _DROP]
    return node


def pruned(data: dict, errors: list[dict], model, rounds: int = 6) -> tuple[Any, set[str]]:
    """``model`` (a pydantic model class) validated from ``data`` with the refused values removed (a field falls
    back to its default; an entry whose required field is refused is dropped); None if it cannot be made to.
    Also the names of the dropped entries."""

    rest = copy.deepcopy(data)
    dropped: set[str] = set()
    for _ in range(rounds):
        try:
            for err in errors:
                if not _apply(rest, err["loc"], err["type"] == "missing", dropped):
                    return None, dropped
        except (KeyError, IndexError, TypeError):
            return None, dropped
        rest = _sweep(rest)
        try:
            return model.model_validate(rest), dropped
        except ValidationError as e:
            errors = e.errors()
    return None, dropped


def parse_spec(data: Any, source: str = "spec") -> ClusterSpec:
    """Validate already-parsed YAML; raise SpecError with every problem.

    Field errors do not hide the cross-field rules: the entries with field errors are left out (a bad field
    with a default falls back to it, a bad list entry is dropped) and the rules run on the rest; their problems
    that only come from leaving something out (a name that was dropped) are not reported.
    """
    if not isinstance(data, dict):
        raise SpecError([Problem("", "a spec is a YAML mapping with name, region, availability_zones, "
                                     "instance_groups, ...")], source)
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as e:
        problems = [Problem(error_location(err["loc"], data), error_message(err)) for err in e.errors()]
        partial, dropped = pruned(data, e.errors(), ClusterSpec)
        if partial is not None:
            seen = {str(p) for p in problems}
            problems += [p for check in CHECKS for p in check(partial)
                         if str(p) not in seen and not _from_dropped(p, dropped)]
        raise SpecError(problems, source) from None
    problems = [p for check in CHECKS for p in check(spec)]
    if problems:
        raise SpecError(problems, source)
    return spec


def _from_dropped(p: Problem, dropped: set[str]) -> bool:
    """A cross-field problem that only exists because an entry with field errors was left out."""
    if dropped and p.message.startswith("needs a CPU system group"):
        return True
    return any(f"'{n}'" in p.message or f"({n})" in p.path or p.path.endswith(f".quotas.{n}")
               or f".quotas.{n}." in p.path or f"group {n}" in p.message for n in dropped)


def load_spec(path: str | Path | None = None) -> ClusterSpec:
    """Read and validate a spec file (the embedded example when ``path`` is None: a library default; the CLIs
    never pass None). Text only (UTF-8), at most :data:`MAX_SPEC_BYTES`, no duplicate keys."""
    path = Path(path) if path else DEFAULT_SPEC
    source = str(path)
    data, problem = read_yaml(path)
    if problem is not None:
        raise SpecError([Problem("", problem)], source)
    return parse_spec(data, source)
