"""The Baseline control table (infra/governance/pod_baseline.py): every control of pod-security-admission at the
pinned version is judged, each by an attack the team policies refuse, and Baseline's allowed values pass."""

from __future__ import annotations

import re

import pytest

from infra.governance import jobset, pod_baseline
from infra.spec.eks import EksSpec
from tests.governance import vap
from tests.governance.test_pod_security import JOBSETS, SPEC, TEAM_NS, admit_pod, request, standard_pod

CONTROL_IDS = [c.id for c in pod_baseline.CONTROLS]


def test_the_table_holds_every_baseline_control_at_the_pinned_version_once():
    """12 checks carry ``Level: api.LevelBaseline`` at pod-security-admission v0.34.0 (policy/check_*.go)."""
    assert len(set(CONTROL_IDS)) == len(CONTROL_IDS) == 12
    assert pod_baseline.BASELINE_VERSION == EksSpec.model_fields["version"].default
    assert pod_baseline.PSA.endswith("@v0." + pod_baseline.BASELINE_VERSION.split(".")[1] + ".0")
    for c in pod_baseline.CONTROLS:
        assert re.fullmatch(r"policy/check_\w+\.go:\d+-\d+(,\d+-\d+)*( \(.+\))?", c.source), c
        assert c.id in pod_baseline.CHECKS or c.id in pod_baseline.LEFT_TO_CALLER, c.id
    assert pod_baseline.coverage() == (12, 12)


def _c(p):
    return p["spec"]["containers"][0]


# control id -> (change to a submitted pod, a substring of the denial)
ATTACKS = {
    "appArmorProfile": (lambda p: p["metadata"].setdefault("annotations", {}).update(
        {"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}), "apparmor"),
    "capabilities_baseline": (lambda p: _c(p)["securityContext"]["capabilities"]["add"].append("NET_RAW"),
                              "capabilities.add"),
    "hostNamespaces": (lambda p: p["spec"].update(hostIPC=True), "hostIPC"),
    "hostPathVolumes": (lambda p: p["spec"]["volumes"].append({"name": "x", "hostPath": {"path": "/etc"}}),
                        "hostPath"),
    "hostPorts": (lambda p: _c(p).update(ports=[{"containerPort": 80, "hostPort": 80}]), "hostPort"),
    "hostProbesAndHostLifecycle": (lambda p: _c(p).update(
        livenessProbe={"tcpSocket": {"host": "10.0.0.1", "port": 22}}), "may not set host"),
    "privileged": (lambda p: p["spec"]["initContainers"][0]["securityContext"].update(privileged=True),
                   "privileged"),
    "procMount": (lambda p: _c(p)["securityContext"].update(procMount="Unmasked"), "procMount"),
    "seLinuxOptions": (lambda p: _c(p)["securityContext"].update(seLinuxOptions={"type": "spc_t"}), "seLinuxOptions"),
    "seccompProfile_baseline": (lambda p: _c(p)["securityContext"].update(seccompProfile={"type": "Unconfined"}),
                                "seccompProfile"),
    "sysctls": (lambda p: p["spec"]["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
                "sysctls"),
    "windowsHostProcess": (lambda p: p["spec"].setdefault("securityContext", {}).update(
        windowsOptions={"hostProcess": True}), "hostProcess"),
}


def _pod():
    pod = standard_pod()
    pod["spec"].setdefault("securityContext", {})
    return pod


def test_every_control_has_an_attack():
    assert sorted(ATTACKS) == sorted(CONTROL_IDS)


@pytest.mark.parametrize("control", CONTROL_IDS)
def test_each_control_refuses_its_attack_on_pods_and_on_jobset_templates(control):
    change, message = ATTACKS[control]
    pod = _pod()
    change(pod)
    denied = admit_pod(pod)
    assert len(denied) == 1 and message in denied[0], denied
    js = jobset.build(SPEC, request("p5", "openpod"))
    tmpl = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    tmpl.setdefault("metadata", {})
    tmpl["spec"].setdefault("securityContext", {})
    change(tmpl)
    denied = vap.admit(JOBSETS, js, namespace_labels=TEAM_NS)
    assert len(denied) == 1 and message in denied[0], denied


@pytest.mark.parametrize("change", [
    lambda p: _c(p)["securityContext"].update(seLinuxOptions={"type": "container_engine_t", "level": "s0:c1"}),
    lambda p: _c(p)["securityContext"].update(seLinuxOptions={"user": "", "role": ""}),
    lambda p: p["metadata"].setdefault("annotations", {}).update(
        {"container.apparmor.security.beta.kubernetes.io/trainer": "localhost/k8s-train"}),
    lambda p: _c(p)["securityContext"].update(appArmorProfile={"type": "RuntimeDefault"},
                                              seccompProfile={"type": "Localhost", "localhostProfile": "x.json"}),
    lambda p: p["spec"]["securityContext"].update(sysctls=[{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 1"}]),
    lambda p: _c(p).update(readinessProbe={"httpGet": {"host": "", "port": 8080, "path": "/"}},
                           lifecycle={"preStop": {"exec": {"command": ["true"]}}}),
    lambda p: _c(p)["securityContext"].update(windowsOptions={"hostProcess": False}, procMount="Default"),
], ids=["selinux-engine-type", "selinux-empty-user", "apparmor-localhost", "profiles", "sysctl-1.32",
        "probe-without-host", "host-process-false"])
def test_what_baseline_allows_stays_allowed(change):
    pod = _pod()
    change(pod)
    assert admit_pod(pod) == []


def test_the_pair_check_policy_uses_the_same_table():
    from node_agent import deploy
    policy = deploy.pair_check_policy(["registry.example/pair:1"])[0]
    messages = " ".join(v.get("message", "") for v in policy["spec"]["validations"])
    for checks in pod_baseline.CHECKS.values():
        for _, msg in checks:
            assert msg in messages
    assert policy["spec"]["variables"][0]["name"] == "pods"


def test_docs_security_lists_every_control_with_its_source_and_the_coverage():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    judged, total = pod_baseline.coverage()
    assert f"**{judged} of {total}** Baseline controls of Kubernetes {pod_baseline.BASELINE_VERSION}" in text
    for c in pod_baseline.CONTROLS:
        path, _, lines = c.source.partition(" ")[0].partition(":")
        assert f"| {c.id} | `{path.removeprefix('policy/')}:{lines}`" in text, c.id
