"""Issue 29: no command falls back to the bundled example; one spelling (--spec) everywhere; --version; -o; warnings.

Before, ten commands read examples/default.yaml when --spec was missing: `openpod manifests --out gitops/`
replaced a real cluster's team files with the example's and exited 0.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from click.testing import CliRunner

from infra.cli.main import main
from tests.conftest import EXAMPLES

SPEC = str(EXAMPLES / "default.yaml")

# every command that reads a spec, with its other required arguments
SPEC_COMMANDS = {
    "validate": ["validate"],
    "manifests": ["manifests", "--out", "OUT"],
    "queues": ["queues"],
    "submit": ["submit", "--name", "j", "--team", "research", "--group", "p5", "--image", "i", "--nodes", "1",
               "--dry-run", "--", "train.py"],
    "rules": ["rules", "--out", "OUT"],
    "drain": ["drain", "--group", "p5"],
    "pair-check render": ["pair-check", "render", "--group", "p5", "--nodes", "a,b", "--image", "i"],
    "pair-check decide": ["pair-check", "decide", "--group", "p5", "LOG"],
    "preflight": ["preflight"],
    "capacity": ["capacity", "--group", "gb200"],
    "plan": ["plan", "--base-template", "OUT"],
}


def _args(args: list[str], tmp_path) -> list[str]:
    (tmp_path / "LOG").write_text("")
    return [str(tmp_path / a) if a in ("OUT", "LOG") else a for a in args]


@pytest.mark.parametrize("name", sorted(SPEC_COMMANDS))
def test_without_spec_every_command_stops_and_writes_nothing(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, _args(SPEC_COMMANDS[name], tmp_path))
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    assert "--spec" in r.stderr
    assert not (tmp_path / "OUT").exists()


def test_the_documented_place_is_used_and_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(EXAMPLES / "large.yaml", tmp_path / "openpod.yaml")
    r = CliRunner().invoke(main, ["validate"])
    assert r.exit_code == 0, r.output
    assert "using spec openpod.yaml" in r.stderr and "openpod-frontier" in r.stdout


def test_an_empty_spec_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["manifests", "--spec", "", "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "--spec '' is empty" in r.stderr and not (tmp_path / "out").exists()


def test_version():
    r = CliRunner().invoke(main, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("openpod ")


def test_validate_takes_spec_like_every_command_and_prints_data():
    r = CliRunner().invoke(main, ["validate", "--spec", SPEC, "-o", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ok"] and data["name"] == "openpod-dev" and data["instance_groups"][0]["name"] == "system"
    assert yaml.safe_load(CliRunner().invoke(main, ["validate", "--spec", SPEC, "-o", "yaml"]).stdout) == data
    old = CliRunner().invoke(main, ["validate", SPEC])
    assert old.exit_code == 0 and "deprecated" in old.stderr and "validate --spec" in old.stderr


def test_queues_prints_data():
    r = CliRunner().invoke(main, ["queues", "--spec", SPEC, "-o", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["quotas"]
    assert {"team": "research", "group": "p5"}.items() <= rows[0].items()


# ------------------------------------------------------------------------- sizes that break synthesis or quotas


def _validate(tmp_path, data) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(main, ["validate", "--spec", str(path)])
    return r.exit_code, r.stderr


def test_absurd_sizes_warn(tmp_path):
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["instance_groups"][0]["max_size"] = 10**12
    data["instance_groups"] += [{"name": f"cpu{i}", "instance_type": "m7i.2xlarge", "max_size": 1}
                                for i in range(120)]
    rc, err = _validate(tmp_path, data)
    assert rc == 0, err
    assert "one stack holds at most 500" in err and "CloudFormation resources" in err
    assert "managed node groups; EKS's default quota is 30" in err
    assert "instance_groups[0] (system).max_size: 1000000000000 nodes" in err


def test_a_gb200_block_group_outside_the_zones_that_sell_its_blocks_warns(tmp_path):
    """default.yaml's gb200 group sat in us-east-2b, where no P6e-GB200 block is sold (only the Dallas Local Zone,
    fact ec2.p6e-gb200.local-zone), and validated without a word; large.yaml's group in us-east-1-dfw-2a stays quiet."""
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    rc, err = _validate(tmp_path, data)
    assert rc == 0, err
    line = [x for x in err.splitlines() if "(gb200).availability_zone" in x]
    assert len(line) == 1, err
    assert "us-east-2b" in line[0] and "sold only in us-east-1-dfw-2a" in line[0] and "never created" in line[0]
    rc, err = _validate(tmp_path, yaml.safe_load((EXAMPLES / "large.yaml").read_text()))
    assert rc == 0 and "availability_zone" not in err, err


def test_spec_warnings_come_with_the_commands_that_judge_a_deploy_not_every_command():
    """validate, plan and preflight say what a deploy cannot serve; queues, submit, jobs and manifests run many
    times a day against the same spec and do not repeat it (nor break output that tools read line by line)."""
    spec = str(EXAMPLES / "default.yaml")
    r = CliRunner().invoke(main, ["validate", "--spec", spec])
    assert r.exit_code == 0 and "(gb200).availability_zone" in r.stderr
    r = CliRunner().invoke(main, ["queues", "--spec", spec])
    assert r.exit_code == 0 and "warning:" not in r.stderr, r.stderr


def test_duplicate_devices_are_an_error(tmp_path):
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["instance_groups"][1]["volumes"] = [{"device_name": "/dev/sdb", "size_gib": 10},
                                             {"device_name": "/dev/xvdb", "size_gib": 10}]
    rc, err = _validate(tmp_path, data)
    assert rc == 2 and "device /dev/sdb (or its /dev/xvd name) is listed twice" in err


def test_jobs_list_and_status_print_data(monkeypatch):
    """`-o json|yaml` on the status-like commands, over the recorded API objects of tests/governance/test_live.py."""
    from infra.cli import jobs as jobs_cli
    from tests.governance.test_live import memory_api

    api = memory_api()
    monkeypatch.setattr(jobs_cli, "connect", lambda kubeconfig, context: api)
    r = CliRunner().invoke(main, ["jobs", "list", "--team", "research", "-o", "json"])
    assert r.exit_code == 0, r.output
    jobs = {j["name"]: j for j in json.loads(r.stdout)["jobs"]}
    assert (jobs["sweep-p5"]["state"], jobs["sweep-p5"]["flavor"]) == ("Running", "p5")
    r = CliRunner().invoke(main, ["jobs", "status", "llama-p5", "--team", "research", "-o", "yaml"])
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(r.stdout)["preempted_by"].startswith("/openpod/product")


def test_show_defaults_prints_the_spec_as_read_and_it_validates_again(tmp_path):
    from infra.spec.loading import load_spec

    r = CliRunner().invoke(main, ["validate", "--spec", SPEC, "--show-defaults"])
    assert r.exit_code == 0, r.output
    full = yaml.safe_load(r.stdout)
    assert full["instance_groups"][0]["dcgm_level"] == 2 and full["network"]["nat_gateways"] == 1
    path = tmp_path / "full.yaml"
    path.write_text(r.stdout)
    assert load_spec(path) == load_spec(SPEC)


def test_shell_completion_as_documented():
    r = CliRunner().invoke(main, [], prog_name="openpod", env={"_OPENPOD_COMPLETE": "bash_source"})
    assert r.exit_code == 0 and "_openpod_completion" in r.output
