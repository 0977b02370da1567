"""The Kubernetes manifests, as data (no CDK needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from openpod_core import labels as L
from infra.spec.loading import load_spec
from node_agent import deploy
from node_agent.config import load_agent_config, load_controller_config
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
IMAGES = {"amd64": "repo/agent:amd64", "arm64": "repo/agent:arm64"}


def by_kind(objs):
    out = {}
    for o in objs:
        out.setdefault(o["kind"], []).append(o)
    return out


def test_default_spec_gets_one_daemonset_per_arch_and_one_controller():
    objs = deploy.manifests(load_spec(None), IMAGES)
    k = by_kind(objs)
    assert objs[0]["kind"] == "Namespace"
    assert sorted(d["metadata"]["name"] for d in k["DaemonSet"]) == ["node-health-agent-amd64", "node-health-agent-arm64"]
    assert [d["spec"]["template"]["spec"]["containers"][0]["image"] for d in k["DaemonSet"]] == [
        IMAGES["amd64"], IMAGES["arm64"]]
    (dep,) = k["Deployment"]
    # Two replicas, one acting (Lease): a rolling update never has none (node_agent/leader.py, test_leader.py).
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["strategy"]["type"] == "RollingUpdate"
    pod = dep["spec"]["template"]["spec"]
    assert pod["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert pod["affinity"]["podAntiAffinity"]
    (pdb,) = k["PodDisruptionBudget"]
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": dep["spec"]["selector"]}
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": L.INSTANCE_GROUP, "operator": "In", "values": ["system"]},
                                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    assert "nodeSelector" not in pod
    yaml.safe_dump_all(objs)  # plain data


def test_daemonset_host_access_is_only_what_it_needs():
    ds = deploy.detector_daemonset("img", "amd64")
    pod = ds["spec"]["template"]["spec"]
    paths = {v["hostPath"]["path"]: v["hostPath"]["type"] for v in pod["volumes"] if "hostPath" in v}
    assert paths == {"/dev/kmsg": "CharDevice", "/sys": "Directory", "/proc": "Directory", "/": "Directory",
                     "/run/containerd": "Directory",
                     # writable: the kernel-log position, so a restarted agent acts once per fault
                     "/var/lib/openpod/node-agent": "DirectoryOrCreate",
                     # writable: the per-job checkpoint directories it cleans up (test_scratch.py)
                     "/dev/shm/openpod": "DirectoryOrCreate", "/mnt/local-nvme/openpod": "DirectoryOrCreate"}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert all(mounts[n]["readOnly"] for n in ("kmsg", "sys", "proc", "host-root", "containerd"))
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert "hostPID" not in pod and "hostIPC" not in pod
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["key"] for t in terms] == [L.ACCELERATOR, L.EFA]
    sc = pod["containers"][0]["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["capabilities"] == {"add": ["SYSLOG"]}


def test_rbac_is_minimal():
    det = by_kind(deploy.detector_rbac())["ClusterRole"][0]["rules"]
    assert {(r["resources"][0], tuple(r["verbs"])) for r in det} == {
        ("nodes", ("get", "patch")), ("nodes/status", ("patch",)), ("events", ("create",))}
    ctl = by_kind(deploy.controller_rbac())["ClusterRole"][0]["rules"]
    verbs = {r["resources"][0]: set(r["verbs"]) for r in ctl}
    assert verbs["pods/eviction"] == {"create"} and "delete" not in verbs["pods"] and "delete" not in verbs["nodes"]


def test_the_controller_may_only_touch_its_own_lease():
    role, binding = deploy.controller_lease_rbac()
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == deploy.NAMESPACE
    lease = load_controller_config(None).leader_election
    assert lease.namespace == deploy.NAMESPACE
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease.lease_name],
         "verbs": ["get", "update"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": deploy.CONTROLLER,
                                    "namespace": deploy.NAMESPACE}]
    assert role in deploy.manifests(load_spec(None), IMAGES)


def test_config_maps_round_trip_through_the_loaders(tmp_path):
    spec = load_spec(ROOT / "examples" / "large.yaml")
    k = by_kind(deploy.manifests(spec, {"amd64": "a", "arm64": "b"}, controller_service_account=False))
    assert [s["metadata"]["name"] for s in k["ServiceAccount"]] == [deploy.DETECTOR]
    cms = {c["metadata"]["name"]: c["data"] for c in k["ConfigMap"]}
    (tmp_path / "agent.yaml").write_text(cms["node-health-agent-config"]["agent.yaml"])
    (tmp_path / "controller.yaml").write_text(cms["node-remediation-config"]["controller.yaml"])
    cfg, problems = load_agent_config(tmp_path / "agent.yaml")
    assert problems == []
    ctl = load_controller_config(tmp_path / "controller.yaml")
    assert ctl.region == "us-east-1"
    assert {g: c.hot_spares for g, c in ctl.groups.items()}["gb200"] == 18
    assert ctl.groups["p5en"].hot_spares == 4


def test_cpu_only_spec_runs_no_detector():
    spec = load_spec(None).model_copy(update={"instance_groups": [load_spec(None).instance_groups[0]]})
    assert deploy.detector_arches(spec) == []
    assert "DaemonSet" not in by_kind(deploy.manifests(spec, {"amd64": "a"}))


def test_dockerfile_passes_hadolint():
    hadolint = Path(sys.executable).parent / "hadolint"
    r = subprocess.run([str(hadolint), str(ROOT / "node_agent" / "Dockerfile")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "node_agent" / "Dockerfile").read_text()
    for line in ("COPY pyproject.toml README.md ./", "COPY infra infra", "COPY node_agent node_agent"):
        assert line in text
    assert '".[agent]"' in text


def test_each_nvidia_groups_dcgm_level_reaches_the_agent_and_the_controller(tmp_path):
    """The spec's per-group DCGM level (default 2; the large example asks 4 for p5en) sets the group's deep check
    (agent) and its post-reboot wait (controller)."""
    from node_agent.controller import Controller, await_health_seconds
    from node_agent.kube import InMemoryCluster

    spec = load_spec(ROOT / "examples" / "large.yaml")
    groups = {g.name: g for g in spec.instance_groups}
    assert groups["p5en"].dcgm_level == 4
    k = by_kind(deploy.manifests(spec, {"amd64": "a", "arm64": "b"}))
    cms = {c["metadata"]["name"]: c["data"] for c in k["ConfigMap"]}
    (tmp_path / "agent.yaml").write_text(cms["node-health-agent-config"]["agent.yaml"])
    (tmp_path / "controller.yaml").write_text(cms["node-remediation-config"]["controller.yaml"])
    agent, _ = load_agent_config(tmp_path / "agent.yaml")
    nvidia = {g.name for g in spec.instance_groups if g.type.accelerator.value == "nvidia"}
    assert set(agent.deep_check.dcgm_level_by_group) == nvidia and agent.deep_check.dcgm_level_by_group["p5en"] == 4
    ctl = Controller(InMemoryCluster(), None, load_controller_config(tmp_path / "controller.yaml"))
    assert ctl.dcgm_level("p5en") == 4 and ctl.dcgm_level("trn2") == ctl.config.dcgm_level
    assert await_health_seconds(ctl.dcgm_level("p5en")) > await_health_seconds(ctl.dcgm_level("trn2"))


def test_the_pair_check_rbac_is_namespaced_minimal_and_only_where_a_group_uses_it(tmp_path):
    spec = load_spec(None)
    assert not [o for o in deploy.manifests(spec, IMAGES) if "pair-check" in o["metadata"]["name"]]
    groups = [g.model_copy(update={"pair_check_image": "repo/nccl-tests:2.19.6"}) if g.name == "p5" else g
              for g in spec.instance_groups]
    spec = spec.model_copy(update={"instance_groups": groups})
    objs = deploy.manifests(spec, IMAGES)
    (role,) = [o for o in objs if o["kind"] == "Role" and "pair-check" in o["metadata"]["name"]]
    (binding,) = [o for o in objs if o["kind"] == "RoleBinding" and "pair-check" in o["metadata"]["name"]]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == deploy.NAMESPACE
    verbs = {(r["apiGroups"][0], res): set(r["verbs"]) for r in role["rules"] for res in r["resources"]}
    # Secrets: create only (the Job owns them; the garbage collector deletes them); never read
    assert verbs == {("batch", "jobs"): {"create", "get", "delete"}, ("", "secrets"): {"create"},
                     ("", "services"): {"create"}, ("", "pods/log"): {"get"}}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": deploy.CONTROLLER,
                                    "namespace": deploy.NAMESPACE}]
    # the group's image and instance type reach the controller, through its config file
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "node-remediation-config"]
    (tmp_path / "controller.yaml").write_text(cm["data"]["controller.yaml"])
    from node_agent.controller import Controller
    from node_agent.kube import InMemoryCluster

    ctl = Controller(InMemoryCluster(), None, load_controller_config(tmp_path / "controller.yaml"))
    assert ctl.pairs.enabled("p5") and not ctl.pairs.enabled("system")
    assert ctl.config.groups["p5"].instance_type == "p5.48xlarge"


def _pair_policy_and_objects():
    from node_agent import pair_check as pc
    from node_agent.kube import owned_by
    from openpod_core.instance_types import get

    spec = load_spec(None)
    image = "repo/nccl-tests:2.19.6"
    groups = [g.model_copy(update={"pair_check_image": image}) if g.name == "p5" else g
              for g in spec.instance_groups]
    objs = deploy.manifests(spec.model_copy(update={"instance_groups": groups}), IMAGES)
    (policy,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]
    assert any(o["kind"] == "ValidatingAdmissionPolicyBinding" and o["spec"]["policyName"] == deploy.PAIR_CHECK_POLICY
               for o in objs)
    rendered = pc.job("pair-0123456789ab", get("p5.48xlarge"), ("node-new", "node-0"), image)
    return policy, {o["kind"]: owned_by(o, "Job", "pair-0123456789ab", "u") if o["kind"] != "Job" else o
                    for o in rendered}


CONTROLLER_USER = f"system:serviceaccount:{deploy.NAMESPACE}:{deploy.CONTROLLER}"


def test_the_controller_may_create_what_the_pair_check_renders():
    from tests.governance import vap

    policy, objs = _pair_policy_and_objects()
    for kind, obj in objs.items():
        assert vap.admit(policy, obj, namespace_labels={}, user=CONTROLLER_USER) == [], kind


def _job_with(change):
    def mutate(objs):
        import copy

        job = copy.deepcopy(objs["Job"])
        change(job["spec"]["template"]["spec"])
        return job
    return mutate


@pytest.mark.parametrize("make, message", [
    (_job_with(lambda s: s["containers"][0].update(image="attacker/miner:1")), "a pair-check Job runs only"),
    (_job_with(lambda s: s["volumes"].append({"name": "root", "hostPath": {"path": "/"}})),
     "a pair-check Job runs only"),
    (_job_with(lambda s: s["containers"][0].update(securityContext={"privileged": True})),
     "must meet Pod Security Baseline: privileged containers"),
    (_job_with(lambda s: s.update(hostPID=True)), "must meet Pod Security Baseline: hostNetwork, hostPID"),
    (_job_with(lambda s: s["containers"][0].update(securityContext={"capabilities": {"add": ["SYS_MODULE"]}})),
     "must meet Pod Security Baseline: securityContext.capabilities.add"),
    (_job_with(lambda s: s.update(securityContext={"seccompProfile": {"type": "Unconfined"}})),
     "must meet Pod Security Baseline: seccompProfile.type must be RuntimeDefault"),
    (_job_with(lambda s: s.update(nodeName="ip-10-0-1-5.ec2.internal")), "may not set nodeName"),
    (_job_with(lambda s: s["volumes"].append({"name": "tok", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "audience": "sts.amazonaws.com"}}]}})),
     "may not set nodeName or mount a service-account token"),
    (_job_with(lambda s: s.update(serviceAccountName=deploy.CONTROLLER)), "a pair-check Job runs only"),
    (_job_with(lambda s: s.pop("automountServiceAccountToken")), "a pair-check Job runs only"),
    (lambda objs: {**objs["Secret"], "type": "kubernetes.io/service-account-token"}, "may create only Opaque"),
    (lambda objs: {**objs["Service"], "spec": {**objs["Service"]["spec"], "externalIPs": ["10.0.0.1"]}},
     "may create only headless"),
    (lambda objs: {**objs["Service"], "metadata": {**objs["Service"]["metadata"], "name": "kube-dns"}},
     "node-remediation may create only pair-*"),
], ids=["image", "host-path", "privileged", "host-pid", "sys-module", "unconfined-seccomp", "node-name",
        "projected-token", "service-account", "token", "sa-token-secret",
        "external-ips", "name"])
def test_the_controllers_create_rights_start_nothing_else(make, message):
    from tests.governance import vap

    policy, objs = _pair_policy_and_objects()
    denied = vap.admit(policy, make(objs), namespace_labels={}, user=CONTROLLER_USER)
    assert len(denied) == 1 and message in denied[0], denied
    assert vap.admit(policy, make(objs), namespace_labels={}, user="system:serviceaccount:x:y") == []


def test_the_controller_runs_only_on_system_groups_no_team_has_quota_on():
    """large.yaml's data-prep is a CPU group with team quota: the controller (which can evict any pod and reboot or
    replace any instance) must never share a node with team pods there."""
    spec = load_spec(EXAMPLES / "large.yaml")
    (dep,) = [o for o in deploy.manifests(spec, IMAGES) if o["kind"] == "Deployment"]
    (term,) = dep["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": L.INSTANCE_GROUP, "operator": "In", "values": ["system"]} in term["matchExpressions"]
    assert [g.name for g in deploy.system_groups(spec)] == ["system"]
    no_system = spec.model_copy(update={"instance_groups": [g for g in spec.instance_groups if g.name != "system"]})
    with pytest.raises(ValueError, match="needs a system group"):
        deploy.controller_placement(no_system)
