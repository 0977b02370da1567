"""Issue 29: `openpod plan -o json|yaml|table` on hand-written templates (no synth): the data shape a GitOps
pipeline reads (docs/gitops.md, "The plan as data"), the same exit codes in every format, the table unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from infra.deploy import plan as planmod
from infra.cli.main import main
from openpod_core.facts.register import fact
from tests.conftest import EXAMPLES

SPEC = str(EXAMPLES / "default.yaml")   # region us-east-2: the schemas the plan reads
STACK = "openpod-dev"

BUCKET = {"Type": "AWS::S3::Bucket", "Properties": {}}
KEY = {"Type": "AWS::KMS::Key", "Properties": {"KeySpec": "SYMMETRIC_DEFAULT"}}
FILE_SYSTEM = {"Type": "AWS::FSx::FileSystem", "Properties": {"FileSystemType": "LUSTRE", "StorageCapacity": 1200,
                                                             "SubnetIds": ["subnet-a"]}}


def _write(d: Path, resources: dict) -> Path:
    d.mkdir()
    (d / f"{STACK}.template.json").write_text(json.dumps({"Resources": resources}))
    return d


@pytest.fixture
def sides(tmp_path) -> tuple[Path, Path]:
    """Base: a bucket, a KMS key, a file system. Head: a topic added, the file system in another subnet (a
    replacement of a stateful resource: exit 3), the key's KeySpec changed (CloudFormation refuses: exit 4)."""
    base = _write(tmp_path / "base", {"Data": BUCKET, "Key": KEY, "Fs": FILE_SYSTEM})
    moved = {**FILE_SYSTEM, "Properties": {**FILE_SYSTEM["Properties"], "SubnetIds": ["subnet-b"]}}
    head = _write(tmp_path / "head", {"Data": BUCKET, "Key": {**KEY, "Properties": {"KeySpec": "RSA_2048"}},
                                      "Fs": moved, "Alerts": {"Type": "AWS::SNS::Topic", "Properties": {}}})
    return base, head


def plan(sides, *args: str):
    base, head = sides
    return CliRunner().invoke(main, ["plan", "--spec", SPEC, "--base-template", str(base), "--template", str(head),
                                     *args])


def by_id(data: dict) -> dict[str, dict]:
    return {c["logical_id"]: c for c in data["changes"]}


CHANGE_KEYS = ["stack", "logical_id", "new_logical_id", "type", "path", "action", "verdict", "risks", "blocking",
               "allowed", "failure_allowed", "stateful", "properties", "causes", "fails", "reasons"]


def test_json_has_the_documented_keys_for_an_add_a_replacement_and_a_will_fail(sides):
    r = plan(sides, "-o", "json")
    assert r.exit_code == planmod.EXIT_WILL_FAIL, r.output
    data = json.loads(r.stdout)
    assert list(data) == ["format", "exit_code", "exit_meaning", "schema_source", "summary", "blocked", "will_fail",
                          "upgrade", "changes"]
    assert data["format"] == "openpod.plan/v1"
    assert data["exit_code"] == 4 and data["exit_meaning"].startswith("will fail:")
    assert data["summary"] == {"replace": 1, "remove": 0, "update": 1, "add": 1, "will_fail": 1, "data_loss": 1,
                               "blocking": 2}
    assert data["blocked"] == ["Fs", "Key"] and data["will_fail"] == ["Key"]
    changes = by_id(data)
    assert all(list(c) == CHANGE_KEYS for c in changes.values())

    add = changes["Alerts"]
    assert (add["action"], add["verdict"], add["type"], add["risks"], add["reasons"], add["blocking"]) == \
        ("add", "add", "AWS::SNS::Topic", [], [], False)

    fs = changes["Fs"]
    assert (fs["action"], fs["risks"], fs["blocking"]) == ("replace", ["data-loss", "replacement"], True)
    assert fs["reasons"] == [
        {"risk": "replacement", "text": "/properties/SubnetIds is create-only",
         "sources": [{"fact": None,
                      "source": f"createOnlyProperties of AWS::FSx::FileSystem, {data['schema_source']}"}]},
        {"risk": "data-loss", "text": "stateful type (cfn-lint StatefulResources)",
         "sources": [{"fact": None, "source": "cfnlint/data/AdditionalSpecs/StatefulResources.json (cfn-lint "
                                        f"{data['schema_source'].split()[1]})"}]}]

    key = changes["Key"]
    assert (key["action"], key["verdict"], key["risks"], key["blocking"]) == \
        ("update", "will fail", ["will-fail"], True)
    [why] = key["reasons"]
    assert why == {"risk": "will-fail", "text": "/properties/KeySpec cannot change",
                   "sources": [{"fact": "cfn.kms.key-spec", "source": fact("cfn.kms.key-spec").source}]}
    assert key["fails"] == [f"/properties/KeySpec cannot change [cfn.kms.key-spec: {fact('cfn.kms.key-spec').source}]"]


def test_every_reason_has_a_source(sides):
    data = json.loads(plan(sides, "-o", "json").stdout)
    reasons = [r for c in data["changes"] for r in c["reasons"]]
    assert reasons and all(r["sources"] and all(s["source"] for s in r["sources"]) for r in reasons)
    assert all("[" not in r["text"] for r in reasons)   # the citations moved into sources


def test_a_collision_cites_every_fact_it_rests_on():
    text = ("S3 bucket named 'x' exists [cfn.custom-name-replacement: a] "
            f"[cfn.replacement-creates-first: {fact('cfn.replacement-creates-first').source}]")
    rest, sources = planmod.cited(text)
    assert rest == "S3 bucket named 'x' exists [cfn.custom-name-replacement: a]"   # not the fact's source: kept
    assert sources == [{"fact": "cfn.replacement-creates-first",
                        "source": fact("cfn.replacement-creates-first").source}]


def test_yaml_is_the_same_data(sides):
    r = plan(sides, "-o", "yaml")
    assert r.exit_code == planmod.EXIT_WILL_FAIL
    assert yaml.safe_load(r.stdout) == json.loads(plan(sides, "-o", "json").stdout)


def test_json_flag_is_o_json(sides):
    assert plan(sides, "--json").stdout == plan(sides, "-o", "json").stdout
    assert plan(sides, "--json", "-o", "json").stdout == plan(sides, "-o", "json").stdout


@pytest.mark.parametrize("allow, code", [
    ((), planmod.EXIT_WILL_FAIL),
    (("--allow-failure", "Key"), planmod.EXIT_BLOCKED),
    (("--allow-failure", "Key", "--allow-replace", "Fs"), 0),
])
def test_exit_codes_are_the_same_in_every_format(sides, allow, code):
    runs = {fmt: plan(sides, *allow, *(["-o", fmt] if fmt else [])) for fmt in (None, "table", "json", "yaml")}
    runs["--json"], runs["--markdown"] = plan(sides, *allow, "--json"), plan(sides, *allow, "--markdown")
    assert {fmt: r.exit_code for fmt, r in runs.items()} == dict.fromkeys(runs, code)
    data = json.loads(runs["json"].stdout)
    assert data["exit_code"] == code and data["exit_meaning"] == planmod.EXIT_MEANINGS[code]


def test_table_is_the_default_and_unchanged(sides):
    base, head = sides
    expected = planmod.render_table(planmod.diff(planmod.load_assembly(base), planmod.load_assembly(head),
                                                 region="us-east-2"))
    assert plan(sides).stdout == plan(sides, "-o", "table").stdout == expected
    assert expected.splitlines()[0].split() == ["ACTION", "STACK", "LOGICAL", "ID", "TYPE", "STATEFUL", "WHY"]
    assert "will fail: openpod-dev/Key (AWS::KMS::Key)" in expected   # the blocking lines stay in the table


def test_data_on_stdout_progress_and_blocking_lines_on_stderr(sides):
    r = plan(sides, "-o", "json")
    json.loads(r.stdout)
    err = r.stderr.splitlines()
    assert "plan: comparing templates ..." in err
    assert any(ln.startswith("will fail: openpod-dev/Key ") for ln in err)
    assert any(ln.startswith("blocked: openpod-dev/Fs ") for ln in err)


@pytest.mark.parametrize("args, line", [
    (("-o", "xml"), "error: -o/--output 'xml': choose one of table, json, yaml"),
    (("--json", "-o", "yaml"), "error: --json and -o yaml are exclusive (--json is -o json)"),
    (("--markdown", "-o", "json"), "error: --markdown and -o json are exclusive"),
])
def test_a_bad_output_is_one_line_exit_2(sides, args, line):
    r = plan(sides, *args)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [line], r.stderr


def test_no_changes_as_data(tmp_path):
    base = _write(tmp_path / "base", {"Data": BUCKET})
    r = CliRunner().invoke(main, ["plan", "--spec", SPEC, "--base-template", str(base), "--template", str(base),
                                  "-o", "json"])
    data = json.loads(r.stdout)
    assert r.exit_code == 0 and data["changes"] == [] and data["exit_meaning"] == planmod.EXIT_MEANINGS[0]


def test_a_rename_and_a_retained_removal_name_their_sources():
    def topic(path: str, **extra) -> dict:
        return {"Type": "AWS::SNS::Topic", "Properties": {}, "Metadata": {"aws:cdk:path": path}, **extra}

    audit = topic(f"{STACK}/Audit/Resource", DeletionPolicy="Retain")
    base = planmod.Assembly({STACK: {"Resources": {"AlertsOld": topic(f"{STACK}/Old/Resource"), "Audit": audit}}})
    head = planmod.Assembly({STACK: {"Resources": {"AlertsNew": topic(f"{STACK}/New/Resource")}}})
    changes = by_id(planmod.diff(base, head, region="us-east-2").to_json())
    renamed, removed = changes["AlertsOld"], changes["Audit"]
    assert (renamed["action"], renamed["new_logical_id"], renamed["risks"]) == ("replace", "AlertsNew", ["replacement"])
    assert renamed["reasons"] == [{"risk": "replacement", "text": "new logical id AlertsNew", "sources": [
        {"fact": None, "source": "infra/deploy/plan.py: a new logical id or type is a new resource"}]}]
    assert (removed["action"], removed["risks"], removed["blocking"]) == ("remove", ["data-loss", "removal"], True)
    assert removed["reasons"] == [{"risk": "data-loss", "text": "DeletionPolicy: Retain",
                                   "sources": [{"fact": None, "source": "the template's DeletionPolicy"}]}]
