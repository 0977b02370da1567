"""Render the spec reference (docs/spec.md) from the pydantic models, so it never drifts from them."""

from __future__ import annotations

import enum
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from infra.spec.cluster import ClusterSpec
from infra.spec.eks import COREDNS_ADDON, DEFAULT_ADDONS, DEFAULT_CHARTS, KUBE_PROXY_ADDON, AccessEntry, EksSpec
from infra.spec.groups import Capacity, InstanceGroupSpec, Taint, Volume
from infra.spec.network import NetworkSpec
from infra.spec.observability import ObservabilitySpec
from infra.spec.pipeline import PipelineSpec
from infra.spec.queueing import QueueingSpec, WaitForPodsReadySpec
from infra.spec.storage import BucketSpec, BucketsSpec, FsxSpec
from infra.spec.teams import GroupQuota, PreemptionSpec, PrioritySpec, TeamSpec
from observability.thresholds import AlertThresholds
from openpod_core.instance_types import INSTANCE_TYPES

_SECTIONS = [
    ("", ClusterSpec, "The cluster"),
    ("network", NetworkSpec, "Network"),
    ("instance_groups[]", InstanceGroupSpec, "Instance groups"),
    ("instance_groups[].capacity", Capacity, "Capacity (on-demand, reservation, capacity block)"),
    ("instance_groups[].taints[]", Taint, "Taints"),
    ("instance_groups[].volumes[]", Volume, "Extra EBS volumes"),
    ("storage.fsx", FsxSpec, "FSx for Lustre"),
    ("storage.buckets", BucketsSpec, "S3 buckets"),
    ("storage.buckets.<datasets|checkpoints|logs>", BucketSpec, "One bucket"),
    ("eks", EksSpec, "EKS"),
    ("eks.access_entries[]", AccessEntry, "Access entries"),
    ("teams[]", TeamSpec, "Teams (task governance)"),
    ("teams[].quotas.<group>", GroupQuota, "A team's quota on one group"),
    ("teams[].preemption", PreemptionSpec, "Preemption"),
    ("priorities[]", PrioritySpec, "Priorities"),
    ("pipeline", PipelineSpec, "Pipeline (GitOps, see gitops.md)"),
    ("queueing", QueueingSpec, "Queueing (Kueue scheduling, see governance.md)"),
    ("queueing.wait_for_pods_ready", WaitForPodsReadySpec, "Gang readiness (Kueue waitForPodsReady)"),
    ("observability", ObservabilitySpec, "Observability (metrics, rules, alerts; see observability.md)"),
    ("observability.alerts", AlertThresholds, "Alert thresholds"),
]


def _type_name(ann: Any) -> str:
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:  # a constrained item type, e.g. list[Annotated[str, Field(pattern=...)]]
        return _type_name(args[0])
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return f"mapping ({ann.__name__})"
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}"
    if origin in (typing.Union, getattr(__import__('types'), 'UnionType', None)):
        inner = [a for a in args if a is not type(None)]
        return " or ".join(_type_name(a) for a in inner) + (" (optional)" if len(inner) < len(args) else "")
    return getattr(ann, "__name__", str(ann))


def _constraints(field) -> str:
    out = []
    for m in field.metadata:
        for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "min length"),
                          ("max_length", "max length"), ("pattern", "pattern")):
            v = getattr(m, attr, None)
            if v is not None:
                out.append(f"{sym} `{v}`" if attr == "pattern" else f"{sym} {v}")
    return ", ".join(out)


def _default(field) -> str:
    if field.is_required():
        return "**required**"
    d = field.default if field.default is not PydanticUndefined else field.default_factory()
    if isinstance(d, BaseModel):
        return "see below"
    if isinstance(d, enum.Enum):
        d = d.value
    if isinstance(d, (list, tuple)) and d and isinstance(d[0], BaseModel):
        return "see below"
    return f"`{d!r}`" if d not in ("", None, [], {}) else ("unset" if d is None else f"`{d!r}`")


def spec_md() -> str:
    lines = [
        "# Cluster spec reference",
        "",
        "Generated from the models in `infra/spec/` by `python -m infra docs`; do not edit by hand.",
        "A spec is one YAML file; `openpod validate --spec FILE` checks it (also its warnings: sizes that break synthesis or a quota) and prints every problem, one line each.",
        "Unknown fields are refused (with the nearest valid name). See `examples/` for complete specs.",
        "",
    ]
    for prefix, model, title in _SECTIONS:
        lines += [f"## {title}" + (f" (`{prefix}`)" if prefix else ""), ""]
        doc = (model.__doc__ or "").strip().splitlines()
        if doc and model.__doc__ is not BaseModel.__doc__:
            lines += [doc[0], ""]
        lines += ["| field | type / allowed values | default | constraints | notes |", "|---|---|---|---|---|"]
        for name, f in model.model_fields.items():
            lines.append(f"| `{name}` | {_type_name(f.annotation)} | {_default(f)} | {_constraints(f)} "
                         f"| {f.description or ''} |")
        lines.append("")
    lines += [
        "## Cross-field rules",
        "",
        "Checked after the fields above, all reported at once:",
        "",
        "- every AZ belongs to `region`; no AZ twice; FSx AZs are among `availability_zones`, group AZs too or a "
        "Local Zone of `region` from `openpod_core/local_zones.py` that offers the group's type; "
        "`network.layout_azs` is 2..the number of AZs;",
        "- group names are unique; at least one CPU group has `min_size >= 1` (the system group);",
        "- `min_size <= desired_size <= max_size`; `hot_spares <= max_size`;",
        "- `capacity.type` `reservation` / `capacity-block` needs `capacity.reservation_id` and `availability_zone`, "
        "and forbids `placement_group: true` (placement groups are switched off automatically for them);",
        "- capacity blocks are for accelerated instance types; placement groups only for EFA types;",
        "- `capacity.spot_instance_types` only with `capacity.type: spot`, at most 20 types in all, each with "
        "`instance_type`'s accelerators, accelerator model and memory, EFA (and EFA interface layout) and CPU architecture (a spot group of "
        "one type is warned about: EKS recommends several);",
        "- UltraServer types (e.g. p6e-gb200) take sizes and hot spares in multiples of the UltraServer's "
        "instance count;",
        "- team quotas name existing groups and never add up to more than a group's `max_size - hot_spares`, nor "
        "(while `desired_size > 0`) more than `desired_size - hot_spares`, the nodes that run "
        "(`infra/spec/quota_backing.py`; at `desired_size: 0` it is a warning: [governance.md](governance.md), "
        "\"Quotas backed by running nodes\").",
        "",
        "## Pinned versions",
        "",
        "| add-on | default version |", "|---|---|",
        *[f"| `{k}` | `{v}` |" for k, v in DEFAULT_ADDONS.items()],
        "",
        "kube-proxy follows `eks.version`: " + ", ".join(
            f"{k}: `{v}`" for k, v in KUBE_PROXY_ADDON.items()) + ".",
        "",
        "coredns follows `eks.version`: " + ", ".join(
            f"{k}: `{v}`" for k, v in COREDNS_ADDON.items()) + ".",
        "",
        "| Helm chart | default version |", "|---|---|",
        *[f"| `{k}` | `{v}` |" for k, v in DEFAULT_CHARTS.items()],
        "",
        f"Instance types: {len(INSTANCE_TYPES)} known, see [instance-types.md](instance-types.md).",
        "",
    ]
    return "\n".join(lines)
