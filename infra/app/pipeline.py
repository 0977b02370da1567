"""How the platform deploys itself from git: a CDK Pipelines stack, or the AWS side of a GitHub workflow.

``PipelineStack`` (``pipeline.provider: codepipeline``): source from a CodeConnections connection
(repository, branch) -> synth with the README's command -> ``openpod plan`` against the deployed template
(stateful replacements or removals fail the run unless ``pipeline.allow_replace`` names them) -> a manual
approval, present only while the plan reports replacements or removals -> deploy. Self-mutating: the synth
step passes the plan to the app (``-c plan=plan.json``), so the approval appears in the pipeline exactly
when the change needs one, and disappears once it is deployed.

``GitHubDeployStack`` (``pipeline.provider: github-actions``): GitHub's OIDC provider, a plan role that
pull requests of the repository may assume (read the deployed template) and a deploy role (the CDK
bootstrap roles, as ``cdk deploy`` uses them: the way to the account's administrator) that only jobs of
the repository's GitHub environment ``pipeline.environment`` may assume. A job that names an environment
gets the subject ``repo:<owner/name>:environment:<name>`` (:data:`GITHUB_SUB_ENVIRONMENT`), and GitHub
runs it only after the environment's protection rules (required reviewers, deployment branches) pass;
any other workflow on the branch, one that names no environment, cannot deploy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines
from constructs import Construct

from infra.spec.cluster import ClusterSpec

GITHUB_OIDC_URL = "https://token.actions.githubusercontent.com"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
# The subject claim of a job that references an environment ("Filtering for a specific environment":
# https://docs.github.com/en/actions/reference/security/oidc, checked 2026-11-25); the branch form
# `repo:<r>:ref:refs/heads/<b>` is what any job on the branch without an environment presents.
GITHUB_SUB_ENVIRONMENT = "repo:{repository}:environment:{environment}"
# The CDK bootstrap's role name qualifier (cdk bootstrap's default, `hnb659fds`).
BOOTSTRAP_QUALIFIER = "hnb659fds"


def risky(plan: dict | None) -> int:
    """Replacements plus removals in an ``openpod plan --json`` result (0 when there is no plan)."""
    if not plan:
        return 0
    s = plan.get("summary", {})
    return int(s.get("replace", 0)) + int(s.get("remove", 0))


def read_plan(path: str | None) -> dict | None:
    """The ``plan`` context: a file written by ``openpod plan --json`` (the pipeline's synth step)."""
    if not path:
        return None
    return json.loads(Path(path).read_text() or "{}")


class PlatformStage(cdk.Stage):
    """The platform as a pipeline stage; the stack keeps the name (and so the resources) of a direct deploy."""

    def __init__(self, scope: Construct, id: str, *, platform: Callable[[Construct], cdk.Stack], **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        self.platform = platform(self)   # infra.app.stacks makes it: this module does not import stacks (no circle)


def _plan_commands(spec: ClusterSpec) -> list[str]:
    p = spec.pipeline
    allow = "".join(f" --allow-replace {lid}" for lid in p.allow_replace)
    deployed = f"deployed/{spec.name}.template.json"
    return [
        f"make synth SPEC={p.spec_path}",       # the README's command: setup + cdk synth into cdk.out/
        "mkdir -p deployed",
        f"aws cloudformation get-template --stack-name {spec.name} --region {spec.region} --query TemplateBody "
        f"--output json > {deployed} || rm -f {deployed}",
        # exit 3 (a stateful resource replaced or removed, not allowed) fails the run here
        f"if [ -s {deployed} ]; then .venv/bin/openpod plan --spec {p.spec_path} --base-template deployed "
        f"--template cdk.out --json{allow} > plan.json; else echo '{{}}' > plan.json; fi",
        "cat plan.json",
        # cdk.json runs .venv/bin/python app.py; the venv first on PATH too, as `make synth` does
        f"PATH=\"$PWD/.venv/bin:$PATH\" npx cdk synth --quiet -c spec={p.spec_path} -c plan=plan.json > /dev/null",
    ]


class PipelineStack(cdk.Stack):
    """A self-mutating CDK pipeline that deploys the platform of ``spec`` from ``spec.pipeline``'s branch."""

    def __init__(self, scope: Construct, id: str, *, spec: ClusterSpec, platform: Callable[[Construct], cdk.Stack],
                 plan: dict | None = None, **kwargs) -> None:
        super().__init__(scope, id, description=f"openpod deployment pipeline for {spec.name}", **kwargs)
        p = spec.pipeline
        if p is None or p.provider != "codepipeline":
            raise ValueError("PipelineStack: spec.pipeline.provider must be codepipeline")
        self.spec_name, self.spec_region = spec.name, spec.region
        self.spec_repository = p.repository.replace("/", "_")
        source = pipelines.CodePipelineSource.connection(p.repository, p.branch, connection_arn=p.connection_arn)
        platform_arn = self.format_arn(service="cloudformation", resource="stack", resource_name=f"{spec.name}/*",
                                       region=spec.region)
        synth = pipelines.CodeBuildStep(
            "Synth", input=source, commands=_plan_commands(spec),
            role_policy_statements=[iam.PolicyStatement(
                actions=["cloudformation:GetTemplate", "cloudformation:DescribeStacks"], resources=[platform_arn])],
        )
        self.pipeline = pipelines.CodePipeline(
            self, "Pipeline", pipeline_name=f"{spec.name}-platform", synth=synth, self_mutation=True,
            cross_account_keys=True, enable_key_rotation=True,
        )
        self.stage = PlatformStage(self, "Deploy", platform=platform, env=kwargs.get("env"))
        pre = []
        n = risky(plan)
        risky_ids = [c["logical_id"] for c in (plan or {}).get("changes", []) if c["action"] in ("replace", "remove")]
        if n:
            pre.append(pipelines.ManualApprovalStep(
                "ApproveReplacements",
                comment=f"openpod plan: {n} resource(s) replaced or removed ({', '.join(risky_ids)}). "
                        "Read the plan in the Synth step's log before approving."))
        self.pipeline.add_stage(self.stage, pre=pre)
        self.approval_required = bool(n)
        self.pipeline.build_pipeline()
        _acknowledge_pipeline(self)


def _account(stack: cdk.Stack) -> str:
    """The account as cdk-nag spells it in a finding: the literal when the spec names one."""
    return "<AWS::AccountId>" if cdk.Token.is_unresolved(stack.account) else stack.account


def _find(scope: Construct, path: str) -> Construct | None:
    node: Construct | None = scope
    for part in path.split("/"):
        node = node.node.try_find_child(part) if node is not None else None
    return node


def _acknowledge_pipeline(stack: PipelineStack) -> None:
    """The cdk-nag findings of aws-cdk-lib's CDK Pipelines roles, each with why it stands."""
    from infra.app import nag

    account, region = _account(stack), stack.spec_region
    pipeline = stack.pipeline
    nag._ack(_find(pipeline, "Pipeline/ArtifactsBucket"), "AwsSolutions-S1",
             "The pipeline's artifact bucket holds transient build outputs, encrypted with the pipeline's own "
             "rotating KMS key and reachable only by the pipeline's roles; every deploy it drives is recorded by "
             "CloudFormation and CloudTrail. Safe because the bucket's data is not kept (artifacts are rebuilt "
             "on every run) and access is already limited to the pipeline's roles.")
    artifacts_why = ("CDK Pipelines grants its roles object-level access to the pipeline's own artifact bucket "
                     "(and its KMS key) with wildcard actions and an object wildcard on that one bucket. Safe because "
                     "the statements name only the pipeline's own bucket and key.")
    codebuild_why = ("CodeBuild writes its logs and test reports to log groups / report groups named after the "
                     "project; the wildcard is the project's own streams. Safe because it covers only that project's "
                     "log streams and report groups.")
    bucket = stack.get_logical_id(_find(pipeline, "Pipeline/ArtifactsBucket").node.default_child)
    s3 = ("Action::s3:GetBucket*", "Action::s3:GetObject*", "Action::s3:List*", f"Resource::<{bucket}.Arn>/*")
    s3_write = ("Action::s3:Abort*", "Action::s3:DeleteObject*")
    kms = ("Action::kms:GenerateDataKey*", "Action::kms:ReEncrypt*")

    def project_findings(project_path: str | None) -> tuple[str, ...]:
        if project_path is None:   # the shared asset roles: any CodeBuild project of the account
            name = "*"
            return (f"Resource::arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/{name}",
                    f"Resource::arn:aws:codebuild:{region}:{account}:report-group/{name}")
        pid = stack.get_logical_id(_find(pipeline, project_path).node.default_child)
        return (f"Resource::arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/<{pid}>:*",
                f"Resource::arn:aws:codebuild:{region}:{account}:report-group/<{pid}>-*")

    roles = {   # role path under the CodePipeline construct -> (artifact findings, CodeBuild findings)
        "Pipeline/Role": (s3 + s3_write + kms, ()),
        f"Pipeline/Source/{stack.spec_repository}/CodePipelineActionRole": (s3 + s3_write + kms, ()),
        "Pipeline/Build/Synth/CdkBuildProject/Role": (s3 + s3_write + kms,
                                                      project_findings("Pipeline/Build/Synth/CdkBuildProject")),
        "UpdatePipeline/SelfMutation/Role": (s3 + kms, project_findings("UpdatePipeline/SelfMutation")),
        "Assets/FileRole": (s3, project_findings(None)),
        "Assets/DockerRole": (s3, project_findings(None)),
    }
    for path, (artifact_findings, codebuild_findings) in roles.items():
        role = _find(pipeline, path)
        if role is None:
            continue
        policy = role.node.find_child("DefaultPolicy").node.default_child
        for f in artifact_findings:
            nag._ack(policy, f"AwsSolutions-IAM5[{f}]", artifacts_why)
        for f in codebuild_findings:
            nag._ack(policy, f"AwsSolutions-IAM5[{f}]", codebuild_why)
    synth_policy = _find(pipeline, "Pipeline/Build/Synth/CdkBuildProject/Role/DefaultPolicy").node.default_child
    nag._ack(synth_policy, f"AwsSolutions-IAM5[Resource::arn:aws:cloudformation:{region}:{account}:stack/"
                           f"{stack.spec_name}/*]",
             "openpod plan reads the deployed template of the platform stack; the wildcard is the stack id "
             "CloudFormation appends to the stack name. Safe because it names one stack and only read actions.")
    mutation = _find(pipeline, "UpdatePipeline/SelfMutation/Role/DefaultPolicy").node.default_child
    nag._ack(mutation, f"AwsSolutions-IAM5[Resource::arn:*:iam::{account}:role/*]",
             "Self-mutation assumes the CDK bootstrap roles: CDK Pipelines limits the statement with a condition "
             "on the roles' aws-cdk:bootstrap-role tag. Safe because that condition limits it to the account's "
             "CDK bootstrap roles.")
    for path in ("UpdatePipeline/SelfMutation/Role", "Assets/FileRole", "Assets/DockerRole"):
        role = _find(pipeline, path)
        if role is not None:
            nag._ack(role.node.find_child("DefaultPolicy").node.default_child, "AwsSolutions-IAM5[Resource::*]",
                     "CDK Pipelines' asset and self-mutation roles call APIs without resource-level permissions "
                     "(cloudformation:DescribeStacks, s3:ListBucket before the bucket is known) and assume the "
                     "bootstrap roles by tag condition. Safe because the actions are describe/list calls and role "
                     "assumption limited by the bootstrap-role tag.")


class GitHubDeployStack(cdk.Stack):
    """GitHub Actions' way in: an OIDC provider and two roles scoped to ``spec.pipeline``'s repository."""

    def __init__(self, scope: Construct, id: str, *, spec: ClusterSpec, **kwargs) -> None:
        super().__init__(scope, id, description=f"openpod GitHub Actions roles for {spec.name}", **kwargs)
        p = spec.pipeline
        if p is None or p.provider != "github-actions":
            raise ValueError("GitHubDeployStack: spec.pipeline.provider must be github-actions")
        self.provider = iam.OidcProviderNative(self, "GitHubOidc", url=GITHUB_OIDC_URL,
                                               client_ids=["sts.amazonaws.com"])

        def principal(sub: str) -> iam.IPrincipal:
            return iam.WebIdentityPrincipal(self.provider.oidc_provider_arn, conditions={
                "StringEquals": {f"{GITHUB_OIDC_HOST}:aud": "sts.amazonaws.com",
                                 f"{GITHUB_OIDC_HOST}:sub": sub}})

        read_template = iam.PolicyStatement(
            actions=["cloudformation:GetTemplate", "cloudformation:DescribeStacks"],
            resources=[self.format_arn(service="cloudformation", resource="stack", resource_name=f"{spec.name}/*",
                                       region=spec.region)])
        # Pull requests: read the deployed template (for the plan), nothing else.
        self.plan_role = iam.Role(
            self, "PlanRole", assumed_by=principal(f"repo:{p.repository}:pull_request"),
            description=f"openpod plan for pull requests of {p.repository}", max_session_duration=cdk.Duration.hours(1))
        self.plan_role.add_to_policy(read_template)
        # The environment's jobs (reviewed): deploy through the CDK bootstrap roles, as `cdk deploy` does.
        self.deploy_role = iam.Role(
            self, "DeployRole",
            assumed_by=principal(GITHUB_SUB_ENVIRONMENT.format(repository=p.repository, environment=p.environment)),
            description=f"openpod deploy from {p.repository}, GitHub environment {p.environment}",
            max_session_duration=cdk.Duration.hours(2))
        bootstrap = [self.format_arn(
            service="iam", region="", resource="role",
            resource_name=f"cdk-{BOOTSTRAP_QUALIFIER}-{kind}-role-{self.account}-{spec.region}")
            for kind in ("deploy", "file-publishing", "image-publishing", "lookup")]
        self.deploy_role.add_to_policy(iam.PolicyStatement(actions=["sts:AssumeRole"], resources=bootstrap))
        self.deploy_role.add_to_policy(read_template)   # the plan gate before the deploy
        from infra.app import nag

        for role in (self.plan_role, self.deploy_role):
            nag._ack(role.node.find_child("DefaultPolicy").node.default_child,
                     f"AwsSolutions-IAM5[Resource::arn:aws:cloudformation:{spec.region}:{_account(self)}:stack/"
                     f"{spec.name}/*]",
                     "openpod plan reads the deployed template of the platform stack; the wildcard is the stack id "
                     "CloudFormation appends to the stack name. Safe because it names one stack and only read "
                     "actions.")
        cdk.CfnOutput(self, "PlanRoleArn", value=self.plan_role.role_arn)
        cdk.CfnOutput(self, "DeployRoleArn", value=self.deploy_role.role_arn)
