"""Spec validation: every bad spec gives one clear line per problem naming the field, and exit code 2."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.spec.loading import load_spec, parse_spec
from tests.conftest import EXAMPLES, ROOT, on_kubernetes, spec_problems as problems

DEFAULT = yaml.safe_load((EXAMPLES / "default.yaml").read_text())


def spec_with(**changes) -> dict:
    data = copy.deepcopy(DEFAULT)
    for path, value in changes.items():
        node = data
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return data


def group(name: str) -> int:
    return next(i for i, g in enumerate(DEFAULT["instance_groups"]) if g["name"] == name)


P5, GB = group("p5"), group("gb200")


def test_examples_are_valid():
    for path in EXAMPLES.glob("*.yaml"):
        load_spec(path)


def test_unknown_instance_type_names_the_nearest_valid_ones():
    (line,) = problems(spec_with(**{f"instance_groups__{P5}__instance_type": "p5.48xlarg"}))
    assert line.startswith(f"instance_groups[{P5}] (p5).instance_type: unknown instance type 'p5.48xlarg'")
    assert "did you mean p5.48xlarge" in line


@pytest.mark.parametrize("gib", [1500, 3600, 2000])
def test_fsx_capacity_must_be_1200_or_a_multiple_of_2400(gib):
    (line,) = problems(spec_with(storage__fsx__storage_capacity_gib=gib))
    assert line.startswith("storage.fsx.storage_capacity_gib:")
    assert "1200 GiB or a multiple of 2400 GiB" in line


@pytest.mark.parametrize("gib", [1200, 2400, 4800, 48000])
def test_fsx_capacity_allowed_values(gib):
    parse_spec(spec_with(storage__fsx__storage_capacity_gib=gib))


def test_reservation_without_availability_zone():
    data = spec_with(**{f"instance_groups__{P5}__capacity": {"type": "reservation",
                                                             "reservation_id": "cr-0123456789abcdef0"}})
    del data["instance_groups"][P5]["availability_zone"]
    (line,) = problems(data)
    assert line == (f"instance_groups[{P5}] (p5).availability_zone: required with capacity.type reservation: "
                    "reservations are AZ-bound")


def test_ultraserver_group_must_be_a_multiple_of_its_size():
    (line,) = problems(spec_with(**{f"instance_groups__{GB}__max_size": 20}))
    assert line == (f"instance_groups[{GB}] (gb200).max_size: 20 is not a multiple of 18: p6e-gb200.36xlarge "
                    "comes in u-p6e-gb200x72 UltraServers of 18 instances")


def test_duplicate_group_names():
    data = spec_with(**{f"instance_groups__{GB}__name": "p5"})
    data["teams"] = []
    assert "instance_groups: duplicate group name 'p5'; names must be unique" in problems(data)


def test_placement_group_with_a_reservation():
    data = spec_with(**{f"instance_groups__{P5}__capacity": {"type": "reservation",
                                                             "reservation_id": "cr-0123456789abcdef0"},
                        f"instance_groups__{P5}__placement_group": True})
    (line,) = problems(data)
    assert line.startswith(f"instance_groups[{P5}] (p5).placement_group: must be false (or unset) with a "
                           "reservation or capacity block")


def test_availability_zone_outside_the_region_and_group_az_outside_the_list():
    data = spec_with(availability_zones=["us-east-2a", "us-west-2b"])
    lines = problems(data)
    assert "availability_zones[1]: 'us-west-2b' is not an AZ of region us-east-2 (expected e.g. us-east-2a)" in lines
    assert any(ln.startswith(f"instance_groups[{GB}] (gb200).availability_zone: 'us-east-2b' is not one of")
               for ln in lines)


def test_max_size_zero_is_refused():
    data = spec_with(**{f"instance_groups__{P5}__max_size": 0, f"instance_groups__{P5}__hot_spares": 0})
    data["teams"] = []
    assert problems(data) == [f"instance_groups[{P5}] (p5).max_size: Input should be greater than or equal to 1 "
                              "(got 0)"]


def test_unknown_add_on_and_chart_name_what_is_allowed():
    lines = problems(spec_with(eks={"addons": {"vpc-cin": "v1"}, "charts": {"kueu": "0.1"}}))
    assert lines[0].startswith("eks.addons: unknown add-on vpc-cin; allowed: vpc-cni, coredns")
    assert lines[1].startswith("eks.charts: unknown chart kueu; allowed: aws-efa-k8s-device-plugin")
    assert len(lines) == 2


def test_unknown_field_suggests_the_right_one():
    (line,) = problems(spec_with(**{f"instance_groups__{P5}__instance_typ": "p5.48xlarge"}))
    assert line == (f"instance_groups[{P5}] (p5).instance_typ: unknown field; did you mean 'instance_type'? "
                    "(fields are listed in docs/spec.md)")


def test_every_problem_is_reported_at_once():
    data = spec_with(**{f"instance_groups__{P5}__instance_type": "h100.big",
                        "storage__fsx__storage_capacity_gib": 1000,
                        "network__vpc_cidr": "10.0.0.0/8"})
    lines = problems(data)
    assert len(lines) == 3
    assert {ln.split(":")[0] for ln in lines} == {f"instance_groups[{P5}] (p5).instance_type",
                                                  "storage.fsx.storage_capacity_gib", "network.vpc_cidr"}


# ---------------------------------------------------------------- through the CLIs


@pytest.fixture
def bad_spec(tmp_path):
    data = spec_with(**{f"instance_groups__{P5}__instance_type": "p5.48xlarg",
                        "storage__fsx__storage_capacity_gib": 1500})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(args, **env):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def _assert_clean_failure(proc, path):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 2, proc.stderr
    assert f"error: {path}: instance_groups[{P5}] (p5).instance_type: unknown instance type 'p5.48xlarg'" in lines[0]
    assert lines[1].startswith(f"error: {path}: storage.fsx.storage_capacity_gib: 1500 GiB not allowed")


def test_validate_command_exits_2_with_one_line_per_problem(bad_spec):
    _assert_clean_failure(_run(["-m", "infra", "validate", str(bad_spec)]), bad_spec)


@pytest.mark.slow
def test_app_exits_2_with_one_line_per_problem(bad_spec):
    proc = _run([str(ROOT / "app.py")], CDK_CONTEXT_JSON=json.dumps({"spec": str(bad_spec)}))
    _assert_clean_failure(proc, bad_spec)


def test_unreadable_and_malformed_files(tmp_path):
    proc = _run(["-m", "infra", "validate", str(tmp_path / "missing.yaml")])
    assert proc.returncode == 2 and "cannot read spec file" in proc.stderr and "Traceback" not in proc.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    proc = _run(["-m", "infra", "validate", str(broken)])
    assert proc.returncode == 2 and "not valid YAML" in proc.stderr and "line " in proc.stderr


def test_spec_reference_doc_is_generated_from_the_models():
    from infra.cli.docs import PAGES

    text = PAGES["spec.md"]()
    for field in ("storage_capacity_gib", "reservation_id", "hot_spares", "addons", "access_entries"):
        assert f"`{field}`" in text
    assert (ROOT / "docs" / "spec.md").read_text() == text, "docs/spec.md is stale: run `python -m infra docs`"


# ------------------------------------------------------------------------- EKS version and add-ons


@pytest.mark.parametrize("version", ["1.32", "1.33", "1.34"])
def test_kube_proxy_follows_the_cluster_version(version):
    spec = parse_spec(on_kubernetes(spec_with(), version), "v.yaml")  # GB200 needs >= 1.33
    assert spec.eks.addon_versions["kube-proxy"].startswith(f"v{version}.")


def test_a_pinned_kube_proxy_of_another_version_is_rejected():
    data = spec_with(eks={"version": "1.33", "addons": {"kube-proxy": "v1.34.0-eksbuild.2"}})
    [p] = problems(data)
    assert p.startswith("eks.addons: kube-proxy v1.34.0-eksbuild.2 does not match eks.version 1.33")
def test_public_endpoint_needs_explicit_cidrs_and_cidrs_need_a_public_endpoint():
    lines = problems(spec_with(eks={"endpoint_public": True}))
    assert lines == ["eks.endpoint_public_cidrs: a public endpoint needs the CIDRs allowed to reach it; "
                     "allowed: IPv4 CIDRs such as 203.0.113.0/24 (0.0.0.0/0 only when listed explicitly)"]
    lines = problems(spec_with(eks={"endpoint_public_cidrs": ["203.0.113.0/24"]}))
    assert lines[0].startswith("eks.endpoint_public_cidrs: set only with endpoint_public: true")
    lines = problems(spec_with(eks={"endpoint_public": True, "endpoint_public_cidrs": ["203.0.113.7/24"]}))
    assert lines[0].startswith("eks.endpoint_public_cidrs: 203.0.113.7/24 is not an IPv4 network")
    ok = parse_spec(spec_with(eks={"endpoint_public": True, "endpoint_public_cidrs": ["203.0.113.0/24"]}), "ok.yaml")
    assert ok.eks.endpoint_public_cidrs == ["203.0.113.0/24"]


def test_a_pair_check_image_needs_an_efa_group():
    system = group("system")
    (line,) = problems(spec_with(**{f"instance_groups__{system}__pair_check_image": "repo/nccl-tests:1"}))
    assert line.startswith(f"instance_groups[{system}] (system).pair_check_image: ") and "no EFA" in line
    assert parse_spec(spec_with(**{f"instance_groups__{P5}__pair_check_image": "repo/nccl-tests:1"}))


# ---------------------------------------------------------------- issue 29: every problem, any input, bounded


def test_field_errors_do_not_hide_cross_field_problems():
    """A bad field (fsx size) and a cross-field problem (quotas beyond a group) are both reported in one pass."""
    data = spec_with(storage__fsx__storage_capacity_gib=1500, **{f"instance_groups__{P5}__max_size": 1,
                                                                 f"instance_groups__{P5}__hot_spares": 0})
    lines = problems(data)
    assert any(ln.startswith("storage.fsx.storage_capacity_gib") for ln in lines), lines
    assert any("quotas" in ln and "p5" in ln for ln in lines), lines


def test_a_dropped_group_does_not_invent_problems():
    """The group with a bad instance type is left out of the cross-field rules: no 'unknown instance group'."""
    (line,) = problems(spec_with(**{f"instance_groups__{P5}__instance_type": "p5.48xlarg"}))
    assert "unknown instance type" in line


def _load_problems(path) -> list[str]:
    from infra.spec.base import SpecError

    with pytest.raises(SpecError) as e:
        load_spec(path)
    return [str(p) for p in e.value.problems]


def test_duplicate_keys_are_refused(tmp_path):
    text = (EXAMPLES / "default.yaml").read_text() + "\nteams:\n  - name: late\n"
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    (line,) = _load_problems(path)
    assert "key 'teams' appears twice" in line and "line " in line


@pytest.mark.parametrize("name, content, expect", [pytest.param(*case, id=case[0]) for case in [
    ("binary", b"\x7fELF\x02\x01\x01\x00\x00" + bytes(range(256)), "binary data"),
    ("utf16", "name: x\n".encode("utf-16"), "UTF-16"),
    ("latin1", "name: caf\xe9\n".encode("latin-1"), "not UTF-8"),
    ("huge", b"# padding\n" * 120_000, "larger than 1024 KiB"),
    ("deep", b"[" * 50_000, "not valid YAML"),
    ("laughs", b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        b"%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n" % ((bytes([c]),) * 2 + (bytes([c - 1]),) * 10)
        for c in range(ord("b"), ord("j"))), "expands to more than"),
]])
def test_non_text_and_oversized_input_is_one_line(tmp_path, name, content, expect):
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(content)
    (line,) = _load_problems(path)
    assert expect in line


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_endless_devices_are_read_bounded(device):
    import time

    if not Path(device).exists():
        pytest.skip(f"no {device}")
    t0 = time.monotonic()
    (line,) = _load_problems(device)
    assert ("binary data" in line or "UTF-16" in line or "larger than" in line or "not UTF-8" in line), line
    assert time.monotonic() - t0 < 5


def test_an_addon_pin_is_kept():
    """A field validator that returned nothing turned every `eks.addons` into None: the pin was lost and
    `addon_versions` raised TypeError (found by `openpod validate --show-defaults` round-tripping a spec)."""
    spec = parse_spec(spec_with(eks={"addons": {"coredns": "v1.12.1-eksbuild.2"}}), "pin.yaml")
    assert spec.eks.addons == {"coredns": "v1.12.1-eksbuild.2"}
    assert spec.eks.addon_versions["coredns"] == "v1.12.1-eksbuild.2"


def test_the_library_default_is_the_bundled_example():
    """``load_spec()`` without a path reads examples/default.yaml (a path counted from the module's own place)."""
    from infra.spec.loading import DEFAULT_SPEC

    assert DEFAULT_SPEC == Path(__file__).resolve().parent.parent / "examples" / "default.yaml"
    assert load_spec().name == load_spec(DEFAULT_SPEC).name
