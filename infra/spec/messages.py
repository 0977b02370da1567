"""Pydantic's validation errors in the spec's words: where (``instance_groups[1] (p5).instance_type``) and
what is allowed (patterns explained, "did you mean" on unknown fields)."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel

from infra.spec.base import DNS_LABEL, IAM_PRINCIPAL_ARN, IMAGE_SOURCE, RESERVATION_ID
from infra.spec.cluster import ClusterSpec


def error_location(loc: tuple[Any, ...], data: Any) -> str:
    """Render a pydantic error location as ``instance_groups[1] (p5).instance_type``."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            name = node[part].get("name") if isinstance(node, list) and part < len(node) and isinstance(
                node[part], dict) else None
            out += f"[{part}]" + (f" ({name})" if name else "")
        else:
            out += f".{part}" if out else str(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return out


PATTERN_HELP = {
    DNS_LABEL: "lowercase letters, digits and '-', starting with a letter, at most 32 characters",
    RESERVATION_ID: "a capacity reservation id such as cr-0123456789abcdef0",
    IAM_PRINCIPAL_ARN: "an IAM role or user ARN such as arn:aws:iam::111122223333:role/ml-researchers "
                       "(not a Kubernetes group or an assumed-role session)",
    IMAGE_SOURCE: "a registry host and repository without tag or digest, such as nvcr.io/nvidia/pytorch (one "
                  "repository) or 111122223333.dkr.ecr.us-east-1.amazonaws.com/research/ (every repository below it)",
}


def all_fields(model: type[BaseModel] = None, seen: set | None = None) -> set[str]:
    """Every field name of the spec models (for 'did you mean' on unknown fields)."""
    model = model or ClusterSpec
    seen = set() if seen is None else seen
    for name, f in model.model_fields.items():
        seen.add(name)
        for t in getattr(f.annotation, "__args__", ()) + (f.annotation,):
            if isinstance(t, type) and issubclass(t, BaseModel) and t is not model:
                all_fields(t, seen)
    return seen


def error_message(err: dict[str, Any]) -> str:
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    kind = err["type"]
    if kind == "extra_forbidden":
        field = str(err["loc"][-1])
        near = difflib.get_close_matches(field, sorted(all_fields()), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        return f"unknown field{hint} (fields are listed in docs/spec.md)"
    if kind == "string_pattern_mismatch":
        pattern = (err.get("ctx") or {}).get("pattern", "")
        return f"{err['input']!r} not allowed; use {PATTERN_HELP.get(pattern, 'a value matching ' + pattern)}"
    if kind == "missing":
        return "required field missing"
    if kind in ("enum", "literal_error"):
        return f"{err.get('input')!r} not allowed; {msg[0].lower()}{msg[1:]}"
    if "input" in err and kind not in ("value_error",) and not isinstance(err["input"], (dict, list)):
        return f"{msg} (got {err['input']!r})"
    return msg
