"""``teams:`` and ``priorities:``: task governance - each team's quotas per instance group, preemption rules,
users, and the priority classes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from infra.spec.base import DNS_LABEL, IAM_PRINCIPAL_ARN, IMAGE_SOURCE, SpecModel


class GroupQuota(SpecModel):
    """A team's share of one instance group, in whole nodes.

    Quotas are nodes so they read like the capacity a platform team bought;
    the Kueue builders turn them into accelerators, CPU, memory and EFA devices.
    """

    nodes: int = Field(ge=0, description="nominal quota: nodes the team is guaranteed")
    borrowing_limit: int | None = Field(
        None, ge=0, description="nodes it may borrow from idle quota of other teams; unset = no limit, 0 = never")
    lending_limit: int | None = Field(
        None, ge=0, description="nodes of its idle quota other teams may borrow; unset = all, 0 = never lend")


class PreemptionSpec(SpecModel):
    """Kueue ClusterQueue preemption rules of one team."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        "Any", description="take back lent quota from borrowers (Any: whatever their priority)")
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        "LowerPriority", description="a job preempts the team's own lower-priority jobs")
    borrow_within_cohort: Literal["Never", "LowerPriority"] = Field(
        "Never", description="while borrowing, preempt lower-priority jobs of other teams")


class TeamSpec(SpecModel):
    name: str = Field(pattern=DNS_LABEL, description="also the team's namespace")
    quotas: dict[str, GroupQuota] = Field({}, description="instance group name -> quota")
    fair_sharing_weight: float = Field(1.0, gt=0, le=1000)
    preemption: PreemptionSpec = PreemptionSpec()
    users: list[Annotated[str, Field(pattern=IAM_PRINCIPAL_ARN)]] = Field(
        [], description="IAM role or user ARNs allowed to submit: each gets an EKS access entry in the team's "
                        "Kubernetes group `openpod:team:<team>`")
    allowed_priorities: list[str] | None = Field(
        None, description="priority classes the team's jobs may use (enforced at admission); "
                          "default: every priority but `inference`")
    images: list[Annotated[str, Field(pattern=IMAGE_SOURCE)]] | None = Field(
        None, min_length=1,
        description="where the team's pods may run images from (every container kind and image volumes, enforced "
                    "at admission): `host/path/` (ending in `/`) is every repository below that prefix, `host/repo` "
                    "one repository (any tag or digest); images must be written with their registry host. Default: "
                    "the team's own ECR prefix `<account>.dkr.ecr.<region>.amazonaws.com/<team>/` and the platform's "
                    "training image repository (docs/security.md, 'Images per team')")


class PrioritySpec(SpecModel):
    name: str = Field(pattern=DNS_LABEL)
    value: int = Field(ge=0, le=1_000_000_000)
    description: str = Field("", max_length=2048)


DEFAULT_PRIORITIES: tuple[PrioritySpec, ...] = (
    PrioritySpec(name="inference", value=100, description="serving; never preempted by lower-priority jobs of "
                 "its team, nor by other teams while its team does not borrow"),
    PrioritySpec(name="experimentation", value=80, description="interactive experiments"),
    PrioritySpec(name="training", value=70, description="long training runs"),
    PrioritySpec(name="fine-tuning", value=50, description="fine-tuning and batch work"),
)

# Names a team may not take. A team's name is its namespace and its directory at the FSx root; these are
# Kubernetes' namespaces and every namespace the platform uses (node_agent/deploy.py, infra/governance/install.py,
# platform_constructs/exporters.py; tests/governance/test_spec_governance.py collects them from the code). The
# FSx data repository directory (`storage.fsx.data_repository_path`, `datasets` by default) is refused by rules.py.
RESERVED_NAMESPACES = frozenset({"default", "kueue-system", "jobset-system", "openpod", "openpod-system",
                                 "openpod-monitoring"})
RESERVED_PREFIXES = ("kube-", "openpod-")   # Kubernetes' (kube-system, kube-public, kube-node-lease) and ours


def reserved_name(name: str) -> bool:
    """Whether ``name`` is a namespace Kubernetes or the platform uses, or may use."""
    return name in RESERVED_NAMESPACES or name.startswith(RESERVED_PREFIXES)
