"""The cluster spec: the root model of one YAML file that declares a whole training platform.

Each section's models live in their own module (network, groups, storage, eks, teams, pipeline, queueing,
observability); :mod:`infra.spec.loading` reads and validates a file into a :class:`ClusterSpec`, and
:mod:`infra.spec.rules` holds the rules that relate several fields.

The spec package imports no CDK: the CLI, the node agent and the governance code use it without pulling aws-cdk-lib.
"""

from __future__ import annotations

from pydantic import Field

from infra.spec.base import DNS_LABEL, SpecModel
from infra.spec.eks import EksSpec
from infra.spec.groups import InstanceGroupSpec
from infra.spec.network import NetworkSpec
from infra.spec.observability import ObservabilitySpec
from infra.spec.pipeline import PipelineSpec
from infra.spec.queueing import QueueingSpec
from infra.spec.storage import StorageSpec
from infra.spec.teams import DEFAULT_PRIORITIES, PrioritySpec, TeamSpec


class ClusterSpec(SpecModel):
    name: str = Field(pattern=DNS_LABEL)
    region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
    account: str | None = Field(None, pattern=r"^\d{12}$")
    availability_zones: list[str] = Field(min_length=2, max_length=6)
    availability_zone_ids: dict[str, str] = Field(
        {}, description="zone name -> the zone ID it is in your account (e.g. us-east-1a: use1-az6). Names map to "
                        "IDs per account and reservations and Capacity Blocks are bound to the ID: `openpod "
                        "preflight` checks the account's mapping and each reservation's zone ID against these")
    network: NetworkSpec = NetworkSpec()
    instance_groups: list[InstanceGroupSpec] = Field(min_length=1)
    storage: StorageSpec = StorageSpec()
    eks: EksSpec = EksSpec()
    teams: list[TeamSpec] = []
    priorities: list[PrioritySpec] = Field(list(DEFAULT_PRIORITIES), min_length=1)
    pipeline: PipelineSpec | None = None
    queueing: QueueingSpec = QueueingSpec()
    observability: ObservabilitySpec = ObservabilitySpec()

    def group(self, name: str) -> InstanceGroupSpec:
        for g in self.instance_groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def team(self, name: str) -> TeamSpec:
        for t in self.teams:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def accelerated_groups(self) -> list[InstanceGroupSpec]:
        return [g for g in self.instance_groups if g.type.is_accelerated]

    def group_az(self, group: InstanceGroupSpec) -> str:
        """The AZ a group launches in (its own, else the spec's first); may be a Local Zone."""
        return group.availability_zone or self.availability_zones[0]

    @property
    def local_zones(self) -> list[str]:
        """The Local Zones instance groups launch in (node-group-only subnets), in first-use order."""
        out: list[str] = []
        for g in self.instance_groups:
            if g.availability_zone and g.availability_zone not in self.availability_zones \
                    and g.availability_zone not in out:
                out.append(g.availability_zone)
        return out
