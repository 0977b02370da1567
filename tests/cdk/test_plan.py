"""``openpod plan`` on pairs of real synthesized platforms: what is replaced, why, and what blocks.

The base is the session's synthesized default example; each variant is one more synth (kept to two).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from infra.deploy import plan as planmod
from infra.cli.main import main
from tests.conftest import EXAMPLES, ROOT

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]

FSX = "LustreFileSystem4AFDAE78"
DRA = "LustreDataRepository95D81F00"


def _variant(tmp: Path, name: str, edit) -> tuple[Path, Path]:
    """Write an edited default spec and synthesize it (no cdk-nag: the base synth already ran it)."""
    from infra.spec.loading import load_spec
    from infra.app.stacks import build_app

    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    edit(data)
    spec_path = tmp / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    outdir = tmp / f"{name}.out"
    app, _ = build_app(load_spec(spec_path), outdir=str(outdir), checks=False)
    app.synth()
    return spec_path, outdir


def _throughput_and_rename(d: dict) -> None:
    d["storage"]["fsx"]["throughput_per_tib"] = 500
    for g in d["instance_groups"]:
        if g["name"] == "trn2":
            g["name"] = "trainium"
    for t in d["teams"]:
        t["quotas"]["trainium"] = t["quotas"].pop("trn2")


def _fsx_subnet(d: dict) -> None:
    d["storage"]["fsx"]["availability_zone"] = "us-east-2b"   # default: the first AZ, us-east-2a


@pytest.fixture(scope="session")
def older_cluster(tmp_path_factory):
    """The default platform one Kubernetes version back: the base of an upgrade."""
    return _variant(tmp_path_factory.mktemp("plan"), "eks-1.33", lambda d: d["eks"].update(version="1.33"))


@pytest.fixture(scope="session")
def in_place(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("plan"), "in-place", _throughput_and_rename)


@pytest.fixture(scope="session")
def fsx_moved(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("plan"), "fsx-moved", _fsx_subnet)


def run_plan(spec: Path, base: Path, head: Path, *args: str):
    return CliRunner().invoke(main, ["plan", "--spec", str(spec), "--base-template", str(base),
                                     "--template", str(head), *args])


def json_plan(result) -> dict:
    return json.loads(result.stdout)


def change(plan: dict, lid: str) -> dict:
    return next(c for c in plan["changes"] if c["logical_id"] == lid)


# ------------------------------------------------------------------------- schemas


def test_replacement_rules_come_from_cfn_lints_provider_schemas():
    # The FSx schema cfn-lint ships (cfnlint/data/schemas/providers/us-east-2.json -> resources/*.json)
    assert "/properties/SubnetIds" in planmod.create_only_properties("us-east-2", "AWS::FSx::FileSystem")
    assert "/properties/NodegroupName" in planmod.create_only_properties("us-east-2", "AWS::EKS::Nodegroup")
    assert planmod.create_only_properties("us-east-2", "Custom::Anything") == ["/properties/ServiceToken"]
    assert planmod.create_only_properties("us-east-2", "AWS::No::Such") is None
    types = planmod.stateful_types()
    for t in ("AWS::FSx::FileSystem", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup",
              "AWS::EKS::Cluster", "AWS::FSx::DataRepositoryAssociation"):
        assert t in types


# ------------------------------------------------------------------------- pairs of specs


def test_throughput_change_is_in_place_and_passes(default, in_place):
    spec, head = in_place
    r = run_plan(spec, default.outdir, head, "--json")
    assert r.exit_code == 0, r.output
    p = json_plan(r)
    fsx = change(p, FSX)
    assert fsx["action"] == "update" and fsx["properties"] == ["LustreConfiguration"] and fsx["causes"] == []
    assert DRA not in {c["logical_id"] for c in p["changes"]}
    assert p["blocked"] == []


def test_renamed_instance_group_replaces_its_node_group_and_is_allowed(default, in_place):
    spec, head = in_place
    p = json_plan(run_plan(spec, default.outdir, head, "--json"))
    old_id = next(k for k, v in default.resources("AWS::EKS::Nodegroup").items()
                  if v["Properties"]["Labels"]["openpod.io/instance-group"] == "trn2")
    ng = change(p, old_id)
    assert ng["action"] == "replace"
    assert ng["new_logical_id"].startswith("GrouptrainiumNodegroup")
    assert ng["causes"] == [f"new logical id {ng['new_logical_id']}"]   # no fixed name to collide on
    assert ng["stateful"] is None and not ng["blocking"]
    # nothing of the group is left behind or counted twice
    assert p["summary"]["remove"] == 0 and p["summary"]["add"] == 0


def test_fsx_subnet_change_replaces_the_file_system_and_blocks(default, fsx_moved):
    spec, head = fsx_moved
    r = run_plan(spec, default.outdir, head)
    assert r.exit_code == planmod.EXIT_BLOCKED, r.output
    blocked = [ln for ln in r.output.splitlines() if ln.startswith("blocked: ")]
    assert len(blocked) == 2       # one line each: the file system and its data repository association
    fs_line = next(ln for ln in blocked if ln.startswith(f"blocked: openpod-dev/{FSX} "))
    assert "/properties/SubnetIds is create-only" in fs_line and f"--allow-replace {FSX}" in fs_line
    dra_line = next(ln for ln in blocked if ln.startswith(f"blocked: openpod-dev/{DRA} "))
    assert f"/properties/FileSystemId is create-only (references replaced {FSX})" in dra_line


def test_allow_replace_lets_exactly_the_named_resources_through(default, fsx_moved):
    spec, head = fsx_moved
    only_fs = run_plan(spec, default.outdir, head, "--json", "--allow-replace", FSX)
    assert only_fs.exit_code == planmod.EXIT_BLOCKED
    assert json_plan(only_fs)["blocked"] == [DRA]
    both = run_plan(spec, default.outdir, head, "--json", "--allow-replace", FSX, "--allow-replace", DRA)
    assert both.exit_code == 0, both.output
    p = json_plan(both)
    assert p["blocked"] == [] and change(p, FSX)["allowed"] and change(p, FSX)["action"] == "replace"


def test_bucket_removal_blocks(default, tmp_path):
    # The base had one more bucket (as if an earlier version kept a scratch bucket); the head drops it.
    base = json.loads(json.dumps(default.template))
    bucket = json.loads(json.dumps(base["Resources"]["BucketsDatasets939DDD85"]))
    base["Resources"]["BucketsScratch0123ABCD"] = bucket
    (tmp_path / f"{default.stack.stack_name}.template.json").write_text(json.dumps(base))
    spec = EXAMPLES / "default.yaml"
    r = run_plan(spec, tmp_path, default.outdir)
    assert r.exit_code == planmod.EXIT_BLOCKED, r.output
    assert [ln for ln in r.output.splitlines() if ln.startswith("blocked: ")] == [
        f"blocked: {default.stack.stack_name}/BucketsScratch0123ABCD (AWS::S3::Bucket) would be removed - "
        "stateful type (cfn-lint StatefulResources); pass --allow-replace BucketsScratch0123ABCD if intended"]
    assert run_plan(spec, tmp_path, default.outdir, "--allow-replace", "BucketsScratch0123ABCD").exit_code == 0


def test_markdown_puts_the_verdict_and_replacements_first(default, fsx_moved):
    spec, head = fsx_moved
    r = run_plan(spec, default.outdir, head, "--markdown")
    md = r.stdout
    assert md.startswith("### openpod plan\n\n:no_entry: **2 stateful resource(s)")
    assert md.index("#### Replaced or removed") < md.index("<details>")
    assert f"| replace | openpod-dev | `{FSX}` | `AWS::FSx::FileSystem` |" in md


def test_plan_against_a_git_ref_synthesizes_both_sides_offline():
    """`--base HEAD` on the unchanged default spec: code in the working tree may differ, nothing is replaced."""
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                                      capture_output=True).returncode:
        pytest.skip("not a git checkout")
    r = CliRunner().invoke(main, ["plan", "--spec", str(EXAMPLES / "default.yaml"), "--base", "HEAD", "--json"])
    assert r.exit_code == 0, r.output
    p = json_plan(r)
    assert p["summary"]["replace"] == 0 and p["summary"]["remove"] == 0


def test_bad_invocations_exit_2_with_one_line():
    r = CliRunner().invoke(main, ["plan", "--spec", str(EXAMPLES / "default.yaml")])
    assert r.exit_code == 2 and "exactly one of --base GIT_REF or --base-template DIR" in r.output
    r = CliRunner().invoke(main, ["plan", "--spec", str(EXAMPLES / "default.yaml"), "--base", "no-such-ref-xyz"])
    assert r.exit_code == 1 and "--base no-such-ref-xyz:" in r.output


# ------------------------------------------------------------------------- upgrades


def test_eks_version_bump_plans_control_plane_then_add_ons_then_cpu_then_accelerator_groups(default,
                                                                                             older_cluster):
    _, base = older_cluster
    r = run_plan(EXAMPLES / "default.yaml", base, default.outdir, "--json")
    assert r.exit_code == 0, r.output
    p = json_plan(r)
    assert {c["action"] for c in p["changes"]} == {"update"}       # an upgrade replaces nothing
    steps = p["upgrade"]
    spec = EXAMPLES / "default.yaml"
    # First, drain the accelerator groups through the node agent's drain path (tests/node_agent/test_drain.py)
    assert steps[0] == ("before the deploy, drain the accelerator groups (the node agent's drain path) so each job "
                        f"checkpoints and stops once, not once per replaced node: openpod drain --spec {spec} "
                        f"--group p5; openpod drain --spec {spec} --group trn2")
    assert steps[1] == "control plane EksClusterB2BDED5B: Kubernetes 1.33 -> 1.34, in place"
    # kube-proxy and CoreDNS defaults follow eks.version (facts eks.addon.kube-proxy.*, eks.addon.coredns.*)
    assert steps[2].startswith("add-ons, after the control plane: ")
    assert "coredns v1.12.4-eksbuild.18 -> v1.13.2-eksbuild.11" in steps[2]
    assert "kube-proxy v1.33.10-eksbuild.13 -> v1.34.6-eksbuild.13" in steps[2]
    assert steps[3] == "CPU node groups, after the network add-ons: system (1 node(s) at a time)"
    assert steps[4].startswith("accelerator node groups, after the CPU groups, not force-updated")
    assert all(g in steps[4] for g in ("p5", "trn2")) and "gb200" not in steps[4]  # block not bought


def test_the_templates_enforce_the_upgrade_order(default):
    """The order the plan prints is CloudFormation's: node groups follow the cluster version, accelerator
    groups depend on the CPU groups, and only CPU groups may be force-updated."""
    res = default.template["Resources"]
    system_id = next(k for k, v in default.resources("AWS::EKS::Nodegroup").items()
                     if v["Properties"]["Labels"]["openpod.io/instance-group"] == "system")
    for name in ("system", "p5", "trn2"):  # gb200 awaits its capacity block: no node group
        ng = default.nodegroup(name)
        assert ng["Properties"]["Version"] == res["EksClusterB2BDED5B"]["Properties"]["Version"]
        assert ng["Properties"]["UpdateConfig"] == {"MaxUnavailable": 1}
        assert ng["Properties"]["ForceUpdateEnabled"] is (name == "system")
        if name != "system":
            assert system_id in ng["DependsOn"]


def _cluster_only(version: str) -> planmod.Assembly:
    return planmod.Assembly({"s": {"Resources": {"C": {"Type": "AWS::EKS::Cluster",
                                                       "Properties": {"Version": version}}}}})


@pytest.mark.parametrize("old,new,note", [
    ("1.32", "1.34", "EKS upgrades one minor version at a time: deploy 1.33 first"),
    ("1.34", "1.33", "EKS cannot downgrade a cluster"),
])
def test_upgrade_order_flags_skipped_versions_and_downgrades(old, new, note):
    from infra.deploy import upgrade

    [step] = upgrade.order(_cluster_only(old), _cluster_only(new))
    assert step.startswith(f"control plane C: Kubernetes {old} -> {new}, in place - ") and note in step


def test_the_upgrade_commands_plan_prints_paste_as_printed():
    """Failed on the old code: `openpod drain --group p5` without --spec, which stops where ./openpod.yaml is not
    the spec planned."""
    from infra.deploy import upgrade

    def assembly(version):
        a = _cluster_only(version)
        a.templates["s"]["Resources"]["N"] = {"Type": "AWS::EKS::Nodegroup", "Properties": {
            "Version": version, "Labels": {"openpod.io/instance-group": "p5", "openpod.io/accelerator": "nvidia"}}}
        return a

    steps = upgrade.order(assembly("1.33"), assembly("1.34"), "clusters/my prod.yaml")
    assert steps[0].endswith("not once per replaced node: openpod drain --spec 'clusters/my prod.yaml' --group p5")


# ------------------------------------------------------------------------- adding an AZ


def _third_az(layout: int | None):
    def edit(d: dict) -> None:
        d["availability_zones"].append("us-east-2c")
        if layout:
            d["network"]["layout_azs"] = layout
    return edit


@pytest.fixture(scope="session")
def third_az_stable(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("plan"), "az3-stable", _third_az(2))


@pytest.fixture(scope="session")
def third_az_resplit(tmp_path_factory):
    return _variant(tmp_path_factory.mktemp("plan"), "az3-resplit", _third_az(None))


def test_adding_an_az_with_the_layout_pinned_only_adds(default, third_az_stable):
    spec, head = third_az_stable
    r = run_plan(spec, default.outdir, head, "--json")
    assert r.exit_code == 0, r.output
    p = json_plan(r)
    subnets = [c for c in p["changes"] if c["type"] == "AWS::EC2::Subnet"]
    assert subnets and {c["action"] for c in subnets} == {"add"}          # no live range moves
    assert "EksClusterB2BDED5B" not in {c["logical_id"] for c in p["changes"]}   # the cluster keeps its subnets
    assert p["will_fail"] == []


def test_adding_an_az_that_re_splits_the_vpc_will_fail(default, third_az_resplit):
    spec, head = third_az_resplit
    r = run_plan(spec, default.outdir, head)
    assert r.exit_code == planmod.EXIT_WILL_FAIL, r.output
    fails = [ln for ln in r.output.splitlines() if ln.startswith("will fail: ")]
    assert any("AWS::EC2::Subnet" in ln and "ec2.subnet.cidr-conflict" in ln for ln in fails), fails
