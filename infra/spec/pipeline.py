"""The spec's ``pipeline:`` section: how the platform deploys itself from git.

``provider: codepipeline`` adds a CDK Pipelines stack (source from a CodeConnections connection,
synth, ``openpod plan`` as the gate, deploy; self-mutating). ``provider: github-actions`` adds a stack
with GitHub's OIDC provider and two roles for ``examples/gitops/github-workflow.yaml``: a plan role
for pull requests of the repository and a deploy role for jobs of its ``environment`` only (a GitHub
environment with required reviewers and the branch as its only deployment branch).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CONNECTION_ARN = r"^arn:aws[a-z-]*:code(star-)?connections:[a-z0-9-]+:\d{12}:connection/[0-9a-f-]{36}$"


class PipelineSpec(BaseModel):
    """How the platform deploys itself from git: a CDK pipeline or GitHub Actions roles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["codepipeline", "github-actions"]
    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
                            description="owner/name of the git repository holding the spec")
    branch: str = Field("main", pattern=r"^[A-Za-z0-9._/-]+$", description="the branch that deploys")
    environment: str = Field("production", pattern=r"^[A-Za-z0-9_.-]{1,255}$",
                             description="github-actions: the GitHub environment whose jobs may deploy; give it "
                                         "required reviewers and the branch as its only deployment branch")
    spec_path: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._/-]*\.ya?ml$",
                           description="the spec's path inside the repository")
    connection_arn: str | None = Field(None, pattern=CONNECTION_ARN,
                                       description="codepipeline: the CodeConnections connection to the repository")
    allow_replace: list[str] = Field([], description="logical ids `openpod plan` may replace or remove "
                                                     "(reviewed in the pull request that adds them)")

    @field_validator("branch", "spec_path")
    @classmethod
    def _no_dotdot(cls, v: str) -> str:
        if ".." in v:
            raise ValueError(f"{v!r} not allowed: '..' is not part of a git branch or a path in the repository")
        return v

    @model_validator(mode="after")
    def _connection(self) -> "PipelineSpec":
        if self.provider == "codepipeline" and not self.connection_arn:
            raise ValueError("provider codepipeline needs connection_arn (a CodeConnections connection to "
                             f"{self.repository})")
        if self.provider == "github-actions" and self.connection_arn:
            raise ValueError("connection_arn is for provider codepipeline; GitHub Actions authenticates with OIDC")
        return self
