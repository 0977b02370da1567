"""The changes table of docs/gitops.md, row by row: what `openpod plan` says and why.

Each row edits the synthesized default platform the way the change renders in CloudFormation (the
properties CDK writes for it) and diffs base and head with the plan. The verdict's source is the schema
cfn-lint ships or a fact of the facts register; the docs table must list exactly these rows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import pytest

from infra.deploy import plan as planmod
from openpod_core.facts.register import fact
from tests.conftest import ROOT

pytestmark = [pytest.mark.xdist_group("cdk-synth"), pytest.mark.slow]

SCHEMA = "schema"   # the CloudFormation provider schema cfn-lint ships (createOnlyProperties)

CLUSTER, FSX, SECRETS = "EksClusterB2BDED5B", "LustreFileSystem4AFDAE78", "SecretsKey317DCF94"
DRA = "LustreDataRepository95D81F00"
SUBNETS = ("NetworkVpcnodesSubnet1SubnetE013D65E", "NetworkVpcnodesSubnet2SubnetA2D1A651",
           "NetworkVpcpublicSubnet1Subnet00617657", "NetworkVpcpublicSubnet2SubnetDCAA7C9A")


def _group(res: dict, name: str) -> dict:
    return next(v["Properties"] for v in res.values() if v["Type"] == "AWS::EKS::Nodegroup"
                and v["Properties"]["Labels"]["openpod.io/instance-group"] == name)


def _group_id(res: dict, name: str) -> str:
    return next(k for k, v in res.items() if v["Type"] == "AWS::EKS::Nodegroup"
                and v["Properties"]["Labels"]["openpod.io/instance-group"] == name)


def _lt(res: dict, name: str) -> dict:
    return res[_group(res, name)["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]


def _versions(res: dict, v: str) -> None:
    res[CLUSTER]["Properties"]["Version"] = v
    for r in res.values():
        if r["Type"] == "AWS::EKS::Nodegroup":
            r["Properties"]["Version"] = v


def _capacity_block(res: dict, desired: int) -> None:
    p5 = _group(res, "p5")
    p5["CapacityType"] = "CAPACITY_BLOCK"
    p5.pop("InstanceTypes", None)
    p5["ScalingConfig"].update(DesiredSize=desired, MinSize=0)


def _add_az(res: dict, layout: list[tuple[str, str]]) -> None:
    """Three AZs: subnets get ``layout`` ranges; the third AZ's subnets are new."""
    nodes1, nodes2, pub1, pub2 = SUBNETS
    for (priv, pub), (n, p) in zip(layout, ((nodes1, pub1), (nodes2, pub2))):
        res[n]["Properties"]["CidrBlock"], res[p]["Properties"]["CidrBlock"] = priv, pub
    for kind, cidr in (("nodes", layout[2][0]), ("public", layout[2][1])):
        third = copy.deepcopy(res[nodes1 if kind == "nodes" else pub1])
        third["Properties"].update(AvailabilityZone="us-east-2c", CidrBlock=cidr)
        res[f"NetworkVpc{kind}Subnet3Subnet0000AAAA"] = third


def _access_entries(res: dict, principals: tuple[str, str]) -> None:
    """Two spec access entries, Access0 and Access1, as PlatformCluster writes them (index-named)."""
    for i, arn in enumerate(principals):
        res[f"EksAccess{i}0000AAAA"] = {"Type": "AWS::EKS::AccessEntry", "Properties": {
            "ClusterName": {"Ref": CLUSTER}, "PrincipalArn": arn, "Type": "STANDARD",
            "AccessPolicies": [{"AccessScope": {"Type": "cluster"},
                                "PolicyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"}]}}


ADMINS, VIEWERS = "arn:aws:iam::111122223333:role/admins", "arn:aws:iam::111122223333:role/viewers"


@dataclass(frozen=True)
class Row:
    change: str
    target: Callable[[dict], str]          # the logical id whose verdict the row states
    verdict: str                           # add | update | replace | remove | will fail
    source: str                            # SCHEMA or a fact key
    head: Callable[[dict], None]           # edits of the new side only
    base: Callable[[dict], None] = lambda res: None    # edits of the deployed side only
    both: Callable[[dict], None] = lambda res: None    # the setting both sides share
    stateful: bool = False                 # the plan also blocks it as data loss


def _set(path: tuple, value) -> Callable[[dict], None]:
    def edit(res: dict) -> None:
        d = res
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return edit


ROWS: tuple[Row, ...] = (
    Row("raise storage.fsx.throughput_per_tib 250 -> 500", lambda r: FSX, "update", "fsx.lustre.throughput-in-place",
        _set((FSX, "Properties", "LustreConfiguration", "PerUnitStorageThroughput"), 500)),
    Row("grow storage.fsx.storage_capacity_gib 1200 -> 2400", lambda r: FSX, "update", SCHEMA,
        _set((FSX, "Properties", "StorageCapacity"), 2400)),
    Row("shrink storage.fsx.storage_capacity_gib 2400 -> 1200", lambda r: FSX, "will fail",
        "fsx.lustre.storage-capacity-increase-only",
        lambda r: None, _set((FSX, "Properties", "StorageCapacity"), 2400)),
    Row("lower storage.fsx.metadata_iops 12000 -> 6000", lambda r: FSX, "will fail",
        "fsx.lustre.metadata-iops-increase-only",
        _set((FSX, "Properties", "LustreConfiguration", "MetadataConfiguration"), {"Mode": "USER_PROVISIONED",
                                                                                  "Iops": 6000}),
        both=_set((FSX, "Properties", "LustreConfiguration", "MetadataConfiguration"), {"Mode": "USER_PROVISIONED",
                                                                                       "Iops": 12000})),
    Row("storage.fsx.metadata_iops 12000 -> unset (back to AUTOMATIC)", lambda r: FSX, "will fail",
        "fsx.lustre.metadata-automatic-switch",
        _set((FSX, "Properties", "LustreConfiguration", "MetadataConfiguration"), {"Mode": "AUTOMATIC"}),
        both=_set((FSX, "Properties", "LustreConfiguration", "MetadataConfiguration"), {"Mode": "USER_PROVISIONED",
                                                                                       "Iops": 12000})),
    Row("turn on EFA for the FSx file system", lambda r: FSX, "replace", "fsx.lustre.efa-create-only",
        _set((FSX, "Properties", "LustreConfiguration", "EfaEnabled"), True), stateful=True),
    Row("link the data repository at a new file system path over the same S3 prefix", lambda r: DRA, "will fail",
        "fsx.dra.unique-paths", _set((DRA, "Properties", "FileSystemPath"), "/data"), stateful=True),
    Row("FSx deployment type PERSISTENT_2 -> PERSISTENT_1", lambda r: FSX, "replace",
        "cfn.fsx.lustre-deployment-type",
        _set((FSX, "Properties", "LustreConfiguration", "DeploymentType"), "PERSISTENT_1"), stateful=True),
    Row("move storage.fsx.availability_zone to another AZ", lambda r: FSX, "replace", SCHEMA,
        _set((FSX, "Properties", "SubnetIds"), [{"Ref": SUBNETS[1]}]), stateful=True),
    Row("change a KMS key's spec (SYMMETRIC_DEFAULT -> RSA_2048)", lambda r: SECRETS, "will fail",
        "cfn.kms.key-spec", _set((SECRETS, "Properties", "KeySpec"), "RSA_2048")),
    Row("replace the secrets key (e.g. a new key construct): the cluster is re-created under its name",
        lambda r: CLUSTER, "will fail", "cfn.custom-name-replacement",
        _set((CLUSTER, "Properties", "EncryptionConfig", 0, "Provider", "KeyArn", "Fn::GetAtt", 0), "SecretsKey2"),
        stateful=True),
    Row("change a group's instance_type (p5.48xlarge -> p5en.48xlarge)", lambda r: _group_id(r, "p5"), "replace",
        SCHEMA, lambda r: _group(r, "p5").update(InstanceTypes=["p5en.48xlarge"])),
    Row("the same with a fixed NodegroupName (platforms before this version)", lambda r: _group_id(r, "p5"),
        "will fail", "cfn.custom-name-replacement",
        lambda r: _group(r, "p5").update(InstanceTypes=["p5en.48xlarge"]),
        both=lambda r: _group(r, "p5").update(NodegroupName="p5")),
    Row("replace a running capacity-block group (move it to another subnet)", lambda r: _group_id(r, "p5"),
        "will fail", "eks.capacity-block-mng",
        lambda r: _group(r, "p5").update(Subnets=[{"Ref": SUBNETS[1]}]), both=lambda r: _capacity_block(r, 4)),
    Row("raise a group's desired_size", lambda r: _group_id(r, "p5"), "update", SCHEMA,
        lambda r: _group(r, "p5")["ScalingConfig"].update(DesiredSize=2, MinSize=0)),
    Row("add a label to a group", lambda r: _group_id(r, "p5"), "update", SCHEMA,
        lambda r: _group(r, "p5")["Labels"].update(workload="frontier")),
    Row("change a group's user data (launch template): its nodes roll", lambda r: _group_id(r, "p5"), "update",
        SCHEMA, lambda r: _lt(r, "p5").update(UserData="bmV3")),
    Row("eks.version 1.33 -> 1.34", lambda r: CLUSTER, "update", "eks.cluster.version-steps",
        lambda r: None, lambda r: _versions(r, "1.33")),
    Row("eks.version 1.32 -> 1.34 (skips a version)", lambda r: CLUSTER, "will fail", "eks.cluster.version-steps",
        lambda r: None, lambda r: _versions(r, "1.32")),
    Row("eks.version 1.34 -> 1.33 (downgrade)", lambda r: CLUSTER, "will fail", "eks.cluster.version-steps",
        lambda r: _versions(r, "1.33")),
    Row("eks.version bump and a user-data change in one deploy", lambda r: _group_id(r, "p5"), "will fail",
        "eks.nodegroup.version-update-alone", lambda r: _lt(r, "p5").update(UserData="bmV3"),
        lambda r: _versions(r, "1.33")),
    Row("eks.version bump of a capacity-block group at desired_size 2", lambda r: _group_id(r, "p5"), "will fail",
        "eks.capacity-block-mng", lambda r: None, lambda r: _versions(r, "1.33"),
        both=lambda r: _capacity_block(r, 2)),
    Row("eks.version bump of a capacity-block group at desired_size 0", lambda r: _group_id(r, "p5"), "update",
        "eks.capacity-block-mng", lambda r: None, lambda r: _versions(r, "1.33"),
        both=lambda r: _capacity_block(r, 0)),
    Row("network.vpc_cidr 10.0.0.0/16 -> 10.1.0.0/16", lambda r: CLUSTER, "will fail", "eks.cluster.subnet-update",
        lambda r: [r[lid]["Properties"].update(CidrBlock=r[lid]["Properties"]["CidrBlock"].replace("10.0.", "10.1."))
                   for lid in (*SUBNETS, "NetworkVpc7FB7348F")]),
    Row("add an AZ, subnets re-split for three AZs (before this version)", lambda r: SUBNETS[1], "will fail",
        "ec2.subnet.cidr-conflict",
        lambda r: _add_az(r, [("10.0.0.0/19", "10.0.96.0/24"), ("10.0.32.0/19", "10.0.97.0/24"),
                              ("10.0.64.0/19", "10.0.98.0/24")])),
    Row("add an AZ with network.layout_azs: 2", lambda r: "NetworkVpcnodesSubnet3Subnet0000AAAA", "add", SCHEMA,
        lambda r: _add_az(r, [("10.0.0.0/18", "10.0.128.0/24"), ("10.0.64.0/18", "10.0.129.0/24"),
                              ("10.0.192.0/18", "10.0.130.0/24")])),
    Row("reorder eks.access_entries (each entry takes the other's principal)", lambda r: "EksAccess00000AAAA",
        "will fail", "eks.unique-per-cluster", lambda r: _access_entries(r, (VIEWERS, ADMINS)),
        both=lambda r: _access_entries(r, (ADMINS, VIEWERS))),
    Row("remove a bucket", lambda r: "BucketsLogsF3E46FAF", "remove", SCHEMA,
        lambda r: r.pop("BucketsLogsF3E46FAF"), stateful=True),
)


def _plan(default, row: Row) -> planmod.Change:
    base, head = copy.deepcopy(default.template), copy.deepcopy(default.template)
    for side in (base, head):
        row.both(side["Resources"])
    row.base(base["Resources"])
    row.head(head["Resources"])
    target = row.target(base["Resources"])
    changes = planmod.diff_stack("openpod-dev", base, head, "us-east-2")
    return next(c for c in changes if c.logical_id == target), changes


@pytest.mark.parametrize("row", ROWS, ids=[r.change for r in ROWS])
def test_each_change_gets_its_documented_verdict(default, row):
    change, changes = _plan(default, row)
    assert change.verdict == row.verdict, (change.causes, change.fails)
    assert (change.stateful is not None and change.action in ("replace", "remove")) is row.stateful
    if row.source != SCHEMA:
        text = " ".join(change.fails + change.causes) if row.verdict in ("will fail", "replace") else ""
        assert not text or f"[{row.source}: {fact(row.source).source}]" in text
    if row.verdict == "will fail":
        assert change.blocking


def test_allow_replace_does_not_make_a_failing_replacement_deployable(default):
    row = next(r for r in ROWS if r.source == "fsx.dra.unique-paths")
    base, head = copy.deepcopy(default.template), copy.deepcopy(default.template)
    row.head(head["Resources"])
    changes = planmod.diff_stack("openpod-dev", base, head, "us-east-2", allow={DRA})
    plan = planmod.Plan(changes, "schemas")
    assert plan.exit_code == planmod.EXIT_WILL_FAIL


def doc_row(row: Row) -> str:
    src = ("CloudFormation provider schema (cfn-lint)" if row.source == SCHEMA
           else f"[{row.source}]({fact(row.source).source})")
    stateful = " + blocks: stateful" if row.stateful else ""
    return f"| {row.change} | {row.verdict}{stateful} | {src} |"


def test_the_docs_table_lists_exactly_these_rows():
    text = (ROOT / "docs" / "gitops.md").read_text()
    start = text.index("<!-- plan-table:start -->")
    end = text.index("<!-- plan-table:end -->")
    rows = [ln for ln in text[start:end].splitlines()
            if ln.startswith("| ") and ln not in ("| change | verdict | source |", "|---|---|---|")]
    assert rows == [doc_row(r) for r in ROWS]
    assert len(rows) >= 15
