"""``openpod teardown``: delete a platform stack in the order AWS can follow, keeping the data.

A retained resource that lives in the stack's network keeps network interfaces there: the FSx for Lustre file
system holds ENIs in its subnet and security group until it is deleted (fact fsx.eni-in-subnet), so CloudFormation,
which skips it (``DeletionPolicy: Retain``), then fails to delete the security group, the subnet and the VPC.
:func:`network_bound_retained` finds such resources in a synthesized template (a retained resource whose
references reach a VPC, subnet or security group of the same template); :func:`teardown` deletes each of them
first - an FSx file system with a final backup - and only then the stack. What is retained and outside the network
(buckets, keys, log groups) stays, as before.

:func:`deletion_order` is the order CloudFormation deletes a template's resources in: a resource goes only after
every resource that depends on it (``DependsOn``, ``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` references) is gone.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

NETWORK_TYPES = frozenset({"AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::SecurityGroup"})
RETAINED = frozenset({"Retain", "RetainExceptOnCreate", "Snapshot"})
FSX_FILE_SYSTEM = "AWS::FSx::FileSystem"
# What teardown can delete before the stack, per type (a type outside this table stops it: see network_bound_retained)
DELETABLE_FIRST = frozenset({FSX_FILE_SYSTEM})
_SUB_REF = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


def references(value: Any) -> set[str]:
    """Logical ids (and parameters/pseudo parameters) ``value`` refers to through Ref, GetAtt and Sub."""
    out: set[str] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "Ref" and isinstance(x, str):
                    out.add(x)
                elif k == "Fn::GetAtt":
                    out.add(x[0] if isinstance(x, list) else str(x).split(".")[0])
                elif k == "Fn::Sub":
                    text = x[0] if isinstance(x, list) else x
                    out.update(_SUB_REF.findall(text) if isinstance(text, str) else ())
                    todo.append(x)
                else:
                    todo.append(x)
        elif isinstance(v, list):
            todo.extend(v)
    return out


def dependencies(template: dict) -> dict[str, set[str]]:
    """Logical id -> the resources of ``template`` it depends on (explicitly or through references)."""
    resources = template.get("Resources", {})
    deps: dict[str, set[str]] = {}
    for lid, r in resources.items():
        on = r.get("DependsOn", [])
        on = {on} if isinstance(on, str) else set(on)
        refs = references({k: v for k, v in r.items() if k in ("Properties", "Metadata", "Condition")})
        deps[lid] = {d for d in on | refs if d in resources and d != lid}
    return deps


def deletion_order(template: dict) -> list[str]:
    """The resources in an order CloudFormation may delete them: each after all that depend on it."""
    deps = dependencies(template)
    dependents: dict[str, set[str]] = {lid: set() for lid in deps}
    for lid, on in deps.items():
        for d in on:
            dependents[d].add(lid)
    order: list[str] = []
    ready = sorted(lid for lid, ds in dependents.items() if not ds)
    left = {lid: set(ds) for lid, ds in dependents.items()}
    while ready:
        lid = ready.pop(0)
        order.append(lid)
        for d in sorted(deps[lid]):
            left[d].discard(lid)
            if not left[d] and d not in order and d not in ready:
                ready.append(d)
    if len(order) != len(deps):
        raise ValueError("the template's dependencies have a cycle")
    return order


def retained(template: dict) -> list[str]:
    return [lid for lid, r in template.get("Resources", {}).items() if r.get("DeletionPolicy") in RETAINED]


def _network_closure(template: dict, deps: dict[str, set[str]], start: Iterable[str]) -> set[str]:
    """``start`` and the network resources they stand in (a security group or subnet in its VPC), transitively."""
    resources = template["Resources"]
    seen: set[str] = set()
    todo = list(start)
    while todo:
        lid = todo.pop()
        if lid not in seen:
            seen.add(lid)
            todo.extend(d for d in deps[lid] if resources[d]["Type"] in NETWORK_TYPES)
    return seen


def attachments(template: dict, lid: str) -> set[str]:
    """The VPC, subnets and security groups ``lid``'s properties place it in (where it has network interfaces).
    ``DependsOn`` orders a deployment and attaches nothing, so only property references count."""
    resources = template["Resources"]
    refs = references(resources[lid].get("Properties", {}))
    return {d for d in refs if d in resources and resources[d]["Type"] in NETWORK_TYPES}


def network_bound_retained(template: dict) -> dict[str, list[str]]:
    """Retained resource -> the VPC, subnets and security groups it keeps from being deleted while it stands."""
    deps = dependencies(template)
    out: dict[str, list[str]] = {}
    for lid in retained(template):
        attached = attachments(template, lid)
        if attached:
            out[lid] = sorted(_network_closure(template, deps, attached))
    return out


def blocked_deletions(template: dict, gone_first: Iterable[str] = ()) -> dict[str, list[str]]:
    """Network resource -> the retained resources still standing in it, so its deletion fails, when the resources
    ``gone_first`` were deleted before the stack. Empty when the stack can be deleted."""
    gone = set(gone_first)
    blocked: dict[str, list[str]] = {}
    for lid, net in network_bound_retained(template).items():
        if lid not in gone:
            for d in net:
                blocked.setdefault(d, []).append(lid)
    return {k: sorted(v) for k, v in sorted(blocked.items())}


@dataclass(frozen=True)
class Step:
    """One teardown step: what is done to which resource, in order."""

    action: str         # "delete-file-system" | "delete-stack"
    logical_id: str
    physical_id: str
    line: str


def plan(template: dict, physical: dict[str, str], stack_name: str, *, backup: bool = True) -> list[Step]:
    """The steps for ``stack_name`` (``physical``: logical id -> physical id, from DescribeStackResources)."""
    steps: list[Step] = []
    for lid in sorted(network_bound_retained(template)):
        rtype = template["Resources"][lid]["Type"]
        if rtype not in DELETABLE_FIRST:
            raise ValueError(f"{lid}: a retained {rtype} in the stack's network; teardown knows how to delete "
                             f"only {', '.join(sorted(DELETABLE_FIRST))} first")
        pid = physical.get(lid)
        if not pid:
            continue   # never created, or deleted already
        steps.append(Step("delete-file-system", lid, pid,
                          f"delete FSx file system {pid} ({lid})" + (" after a final backup" if backup else
                                                                     " WITHOUT a backup")))
    steps.append(Step("delete-stack", stack_name, stack_name,
                      f"delete stack {stack_name} (buckets, keys and log groups are retained)"))
    return steps


def stack_template(cfn, stack_name: str) -> tuple[dict, dict[str, str]]:
    """The deployed template (processed) and logical id -> physical id of its resources."""
    import json

    body = cfn.get_template(StackName=stack_name, TemplateStage="Processed")["TemplateBody"]
    template = body if isinstance(body, dict) else json.loads(body)
    physical: dict[str, str] = {}
    kwargs = {"StackName": stack_name}
    while True:
        page = cfn.list_stack_resources(**kwargs)
        for r in page.get("StackResourceSummaries", []):
            if r.get("PhysicalResourceId") and r.get("ResourceStatus") != "DELETE_COMPLETE":
                physical[r["LogicalResourceId"]] = r["PhysicalResourceId"]
        if not page.get("NextToken"):
            return template, physical
        kwargs["NextToken"] = page["NextToken"]


def _wait_gone(fsx, file_system_id: str, *, poll_s: float, timeout_s: float, sleep: Callable[[float], None]) -> None:
    waited = 0.0
    while True:
        try:
            found = fsx.describe_file_systems(FileSystemIds=[file_system_id]).get("FileSystems", [])
        except fsx.exceptions.FileSystemNotFound:
            return
        if not found:
            return
        if found[0].get("Lifecycle") == "FAILED":
            raise RuntimeError(f"FSx file system {file_system_id}: deletion failed "
                               f"({found[0].get('FailureDetails', {}).get('Message', 'no details')})")
        if waited >= timeout_s:
            raise TimeoutError(f"FSx file system {file_system_id} still {found[0].get('Lifecycle')} after "
                               f"{timeout_s:.0f} s")
        sleep(poll_s)
        waited += poll_s


def run(steps: list[Step], *, cfn, fsx, backup: bool = True, poll_s: float = 30.0, timeout_s: float = 3600.0,
        sleep: Callable[[float], None] = time.sleep, say: Callable[[str], None] = print) -> None:
    """Carry out ``steps`` in order, waiting for each to finish (the stack's deletion too)."""
    for step in steps:
        say(step.line)
        if step.action == "delete-file-system":
            fsx.delete_file_system(
                FileSystemId=step.physical_id,
                LustreConfiguration={"SkipFinalBackup": not backup,
                                     **({"FinalBackupTags": [{"Key": "openpod.io/teardown",
                                                              "Value": step.logical_id}]} if backup else {})})
            _wait_gone(fsx, step.physical_id, poll_s=poll_s, timeout_s=timeout_s, sleep=sleep)
        elif step.action == "delete-stack":
            cfn.delete_stack(StackName=step.physical_id)
            cfn.get_waiter("stack_delete_complete").wait(
                StackName=step.physical_id, WaiterConfig={"Delay": int(poll_s) or 1,
                                                          "MaxAttempts": max(1, int(timeout_s // max(poll_s, 1)))})
        else:
            raise ValueError(f"unknown step {step.action}")
