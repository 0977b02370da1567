"""docs/platform.md "First deploy, step by step", command by command, offline.

- ``openpod`` lines parse against the real CLI (click resolves the command and its options without
  running it); ``openpod validate`` runs.
- ``aws`` lines name an operation of botocore's service model and only its parameters (the CLI spells
  them ``--kebab-case``, botocore's ``xform_name``); ``eks update-kubeconfig`` is a CLI customization
  (aws/aws-cli: awscli/customizations/eks/update_kubeconfig.py, arguments --name, --region as global).
- Every region, account, cluster name, group, Local Zone and reservation agrees with the spec.
"""

from __future__ import annotations

import re
import shlex

import botocore.session
import pytest
from botocore import xform_name
from click.testing import CliRunner

from infra.cli.main import main
from infra.spec.loading import load_spec
from openpod_core import local_zones
from tests.conftest import ROOT

SECTION = "### First deploy, step by step"
CLI_CUSTOMIZATIONS = {("eks", "update-kubeconfig"): {"name", "region", "alias", "role-arn", "kubeconfig"}}


def _blocks() -> dict[str, list[list[str]]]:
    text = (ROOT / "docs" / "platform.md").read_text()
    body = text[text.index(SECTION):]
    body = body[:body.index("\n### ", len(SECTION))]
    blocks = re.findall(r"```console\n(.*?)```", body, re.S)
    out: dict[str, list[list[str]]] = {}
    for block in blocks:
        lines = [shlex.split(ln[2:]) for ln in block.splitlines() if ln.startswith("$ ")]
        spec = next(a.split("=", 1)[1] if "=" in a else a for ln in lines for a in ln
                    if a.startswith("examples/") or a.startswith("spec=examples/"))
        out[spec.removeprefix("spec=")] = lines
    return out


BLOCKS = _blocks()


def test_both_examples_are_walked_through():
    assert set(BLOCKS) == {"examples/default.yaml", "examples/large.yaml"}


def _options(argv: list[str]) -> dict[str, str]:
    out, i = {}, 0
    while i < len(argv):
        if argv[i].startswith("--"):
            out[argv[i][2:]] = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""
        i += 1
    return out


@pytest.mark.parametrize("spec_file", sorted(BLOCKS))
def test_every_command_is_valid_and_agrees_with_its_spec(spec_file):
    spec = load_spec(ROOT / spec_file)
    groups = {g.name: g for g in spec.instance_groups}
    session = botocore.session.get_session()
    for argv in BLOCKS[spec_file]:
        tool, args = argv[0], argv[1:]
        if tool == "openpod":
            ctx = main.make_context("openpod", list(args), resilient_parsing=False)
            sub = main.get_command(ctx, args[0])
            assert sub is not None, argv
            sub.make_context(args[0], list(args[1:]))             # raises on an unknown option or value
            opts = _options(args)
            if "group" in opts:
                assert opts["group"] in groups, argv
            if args[0] == "validate":
                assert list(args[1:]) == ["--spec", spec_file], argv  # the spelling every command shares
                r = CliRunner().invoke(main, [args[0], "--spec", str(ROOT / args[2])])
                assert r.exit_code == 0, r.output
        elif tool == "aws":
            service, op, opts = args[0], args[1], _options(args[2:])
            assert opts.pop("region") == spec.region, argv
            if (service, op) in CLI_CUSTOMIZATIONS:
                assert set(opts) <= CLI_CUSTOMIZATIONS[(service, op)], argv
                assert opts.get("name") == spec.name, argv
                continue
            model = session.get_service_model(service)
            names = {xform_name(o, "-"): o for o in model.operation_names}
            assert op in names, f"{argv}: no operation {op} in {service}"
            members = model.operation_model(names[op]).input_shape.members
            params = {xform_name(m, "-"): m for m in members}
            assert set(opts) <= set(params), f"{argv}: unknown {sorted(set(opts) - set(params))}"
            _agrees(spec, groups, op, opts)
        elif tool == "npx":
            assert args[0] == "cdk", argv
            if args[1] == "bootstrap":
                assert args[2] == f"aws://{spec.account or '111122223333'}/{spec.region}", argv
            else:
                # --all: an app with a pipeline has two stacks, and cdk deploy refuses to pick one
                assert args[1:] == ["deploy", "--all", "-c", f"spec={spec_file}"], argv
        else:
            assert tool == "kubectl", argv


def _agrees(spec, groups, op: str, opts: dict[str, str]) -> None:
    """The AWS calls match the groups they are for."""
    if op == "modify-availability-zone-group":
        zones = [z for z in local_zones.of_region(spec.region) if z.group == opts["group-name"]]
        assert zones and any(z.name in spec.local_zones for z in zones), opts
    elif op == "create-capacity-reservation":
        group = next(g for g in groups.values() if g.instance_type == opts["instance-type"]
                     and g.capacity.type.value == "reservation")
        assert opts["availability-zone"] == spec.group_az(group)
        assert int(opts["instance-count"]) >= group.max_size
    elif op == "purchase-capacity-block":
        assert any(g.capacity.type.value == "capacity-block" for g in groups.values())
