"""Where each team's pods may run images from (``teams[].images``), as the entries and the one regular
expression the admission policies match every image reference against (``admission.py``).

Default (no ``images`` in the spec): the team's own ECR repository prefix ``<registry>/<team>/`` and the
repository the platform's training image is published to - the CDK bootstrap's container-assets repository
``cdk-<qualifier>-container-assets-<account>-<region>`` (aws-cdk-lib DefaultStackSynthesizer's
``imageAssetsRepositoryName``; the qualifier is ``pipeline.BOOTSTRAP_QUALIFIER``'s default). ``<registry>`` is
``<account>.dkr.ecr.<region>.amazonaws.com``; a spec without ``account`` matches any 12-digit account there
(pulls from another account still need that account's repository policy). The node role may pull every
repository of the account (``AmazonEC2ContainerRegistryPullOnly``) and a node reuses images it has cached, so the
reference a pod names is what ties a team to its images.
"""

from __future__ import annotations

import re

from infra.spec.cluster import ClusterSpec
from infra.spec.teams import TeamSpec

BOOTSTRAP_QUALIFIER = "hnb659fds"
ACCOUNT_PATTERN = "[0-9]{12}"


def _escape(text: str) -> str:
    """A literal in a regular expression: image sources hold only [a-z0-9._:/-] (infra.spec.base.IMAGE_SOURCE),
    of which only '.' is special outside a character class (RE2 and Python alike)."""
    return text.replace(".", "\\.")


def _registry(spec: ClusterSpec) -> str:
    return f"{spec.account or '<account>'}.dkr.ecr.{spec.region}.amazonaws.com"


def default_sources(spec: ClusterSpec, team: TeamSpec) -> list[str]:
    """The default entries, written out (``<account>`` where the spec names none)."""
    account = spec.account or "<account>"
    return [f"{_registry(spec)}/{team.name}/",
            f"{_registry(spec)}/cdk-{BOOTSTRAP_QUALIFIER}-container-assets-{account}-{spec.region}"]


def sources(spec: ClusterSpec, team: TeamSpec) -> list[str]:
    """The team's ``images``, or the default entries."""
    return list(team.images) if team.images is not None else default_sources(spec, team)


def _entry_pattern(entry: str) -> str:
    """An entry as a regular expression: a prefix matches every reference below it, a repository matches itself
    with a tag (``:``), a digest (``@``) or neither. ``<account>`` stands for any 12-digit account."""
    body = _escape(entry).replace("<account>", ACCOUNT_PATTERN)
    return "^" + body + ("" if entry.endswith("/") else "([:@]|$)")


def pattern(spec: ClusterSpec, team: TeamSpec) -> str:
    """One regular expression (RE2 and Python alike) every image reference of the team must match."""
    return "|".join(f"({_entry_pattern(e)})" for e in sources(spec, team))
