"""Pod security in team namespaces (issue 10): Baseline plus the runtime's two exceptions, enforced by a
ValidatingAdmissionPolicy on every Pod (the Job controller's included) and on JobSet pod templates.

The policies are read from ``all_objects`` (what CDK and ``openpod manifests`` apply) and evaluated with
cel-python (tests/governance/vap.py). Every JobSet ``openpod submit`` builds is admitted; each way out of
the container a hostile team user could try is refused with a message naming the field.
"""

from __future__ import annotations

import copy

import pytest

from infra.governance import all_objects, job_launcher, jobset
from infra.governance.admission import POD_SECURITY_JOBSET_POLICY, POD_SECURITY_POLICY
from infra.governance.queues import POD_SECURITY_LABELS, TEAM_LABEL
from infra.spec.loading import load_spec
from openpod_core import labels
from tests.conftest import EXAMPLES
from tests.governance import lifecycle_corpus as corpus
from tests.governance import vap

SPEC = load_spec(EXAMPLES / "default.yaml")
OBJS = all_objects(SPEC)
PODS = next(o for o in OBJS if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == POD_SECURITY_POLICY)
JOBSETS = next(o for o in OBJS if o["kind"] == "ValidatingAdmissionPolicy"
               and o["metadata"]["name"] == POD_SECURITY_JOBSET_POLICY)
TEAM_NS = {TEAM_LABEL: "research"}
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"


def request(group: str, runtime: str, nodes: int = 2) -> jobset.JobRequest:
    return jobset.JobRequest(name="llama", team="research", group=group, image=corpus.team_image(SPEC, "research"),
                             nodes=nodes,
                             script=("--steps", "10", "--global-batch", "64") if runtime == "openpod" else ("train.py",),
                             runtime=runtime)


def pod_of(js: dict) -> dict:
    """The Pod the Job controller creates from the JobSet's template."""
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "llama-workers-0-0", "namespace": js["metadata"]["namespace"]},
            "spec": copy.deepcopy(template["spec"])}


def admit_pod(pod: dict, *, user: str = JOB_CONTROLLER, subresource: str = "") -> list[str]:
    return vap.admit(PODS, pod, namespace_labels=TEAM_NS, user=user, subresource=subresource)


def standard_pod() -> dict:
    return pod_of(jobset.build(SPEC, request("p5", "openpod")))


@pytest.mark.parametrize("group, runtime", [("p5", "openpod"), ("p5", "torchrun"), ("trn2", "torchrun")])
def test_every_jobset_submit_builds_is_admitted_and_so_are_its_pods(group, runtime):
    req = request(group, runtime)
    jobset.validate(SPEC, req)
    js = jobset.build(SPEC, req)
    assert vap.admit(JOBSETS, js, namespace_labels=TEAM_NS) == []
    assert admit_pod(pod_of(js)) == []


def test_the_openpod_runtime_pods_really_use_both_exceptions():
    spec = standard_pod()["spec"]
    paths = [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v]
    assert paths == [f"{labels.HOST_MEMORY_TIER}/research/llama", f"{labels.NVME_JOB_ROOT}/research/llama"]
    assert spec["containers"][0]["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]


def _set(pod: dict, path: str, value) -> dict:
    obj = pod
    *parents, last = path.split(".")
    for p in parents:
        obj = obj[int(p)] if p.isdigit() else obj.setdefault(p, {})
    obj[last] = value
    return pod


ATTACKS = {
    "privileged": ("spec.containers.0.securityContext.privileged", True, "privileged containers are not allowed"),
    "privileged init": ("spec.initContainers.0.securityContext.privileged", True,
                        "privileged containers are not allowed"),
    "SYS_ADMIN": ("spec.containers.0.securityContext.capabilities.add", ["IPC_LOCK", "SYS_ADMIN"],
                  "securityContext.capabilities.add may only hold"),
    "host network": ("spec.hostNetwork", True, "hostNetwork, hostPID and hostIPC are not allowed"),
    "host PID": ("spec.hostPID", True, "hostNetwork, hostPID and hostIPC are not allowed"),
    "host port": ("spec.containers.0.ports", [{"containerPort": 22, "hostPort": 22}], "hostPort is not allowed"),
    "unconfined seccomp": ("spec.securityContext.seccompProfile", {"type": "Unconfined"},
                           "seccompProfile.type must be RuntimeDefault or Localhost"),
    "unconfined apparmor": ("spec.containers.0.securityContext.appArmorProfile", {"type": "Unconfined"},
                            "appArmorProfile.type must be RuntimeDefault or Localhost"),
    "unmasked /proc": ("spec.containers.0.securityContext.procMount", "Unmasked", "securityContext.procMount must be Default"),
    "selinux user": ("spec.securityContext.seLinuxOptions", {"user": "system_u"}, "seLinuxOptions: type must be"),
    "unsafe sysctl": ("spec.securityContext.sysctls", [{"name": "kernel.core_pattern", "value": "|/x"}],
                      "only Baseline's safe sysctls are allowed"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_pod_escaping_the_baseline_is_denied_naming_the_field(name):
    path, value, message = ATTACKS[name]
    denied = admit_pod(_set(standard_pod(), path, value))
    assert len(denied) == 1 and denied[0].startswith(message), denied
    assert f"({POD_SECURITY_POLICY}; docs/security.md)" in denied[0]


@pytest.mark.parametrize("path", [
    "/",                                                   # the host's root
    "/var/lib/kubelet",                                    # kubelet credentials
    f"{labels.HOST_MEMORY_TIER}/product/llama",            # another team's node-memory checkpoints
    f"{labels.HOST_MEMORY_TIER}/research",                 # the team root: would reach every job's dir
    f"{labels.HOST_MEMORY_TIER}/research/llama/x",         # deeper: a symlink a job planted could lead anywhere
    f"{labels.HOST_MEMORY_TIER}/research/../product/llama",
    f"{labels.NVME_JOB_ROOT}/research/..",
    f"{labels.HOST_MEMORY_TIER}x/research/llama",
])
def test_host_paths_outside_the_teams_own_job_directories_are_denied(path):
    pod = standard_pod()
    pod["spec"]["volumes"].append({"name": "evil", "hostPath": {"path": path}})
    denied = admit_pod(pod)
    assert len(denied) == 1 and denied[0].startswith("hostPath volumes are allowed only as <root>/<team>/<job>")


def test_a_jobset_with_a_privileged_template_is_refused_at_submission():
    js = jobset.build(SPEC, request("p5", "openpod"))
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["hostPID"] = True
    assert vap.admit(JOBSETS, js, namespace_labels=TEAM_NS) == [
        f"hostNetwork, hostPID and hostIPC are not allowed in team namespaces ({POD_SECURITY_POLICY}; "
        "docs/security.md)"]


def test_controllers_are_not_exempt_and_ephemeral_containers_are_covered():
    """The Job controller creates the pods, so exempting it would exempt everything: the one matchCondition
    compares the object with the old object and names no identity. An ephemeral container comes through the
    pods/ephemeralcontainers subresource (the team Role does not grant it; an identity that has it is judged)."""
    (cond,) = PODS["spec"]["matchConditions"]
    assert "userInfo" not in cond["expression"] and "oldObject" in cond["expression"]
    pod = standard_pod()
    debugged = copy.deepcopy(pod)
    debugged["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox",
                                                "securityContext": {"privileged": True}}]
    denied = vap.admit(PODS, debugged, namespace_labels=TEAM_NS, user="kubernetes-admin", old=pod,
                       subresource="ephemeralcontainers")
    assert denied and denied[0].startswith("privileged containers are not allowed")


def test_other_namespaces_are_not_matched():
    pod = _set(standard_pod(), "spec.hostNetwork", True)
    pod["metadata"]["namespace"] = "kube-system"
    assert vap.admit(PODS, pod, namespace_labels={}) == []


def test_team_namespaces_warn_and_audit_at_baseline():
    ns = next(o for o in OBJS if o["kind"] == "Namespace" and o["metadata"]["name"] == "research")
    assert {k: ns["metadata"]["labels"][k] for k in POD_SECURITY_LABELS} == {
        "pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/audit": "baseline"}
    assert "pod-security.kubernetes.io/enforce" not in ns["metadata"]["labels"]  # it would refuse every hostPath


# ------------------------------------------------------------------------------------------------ FSx


def test_submitted_pods_see_only_their_teams_fsx_directory_and_the_datasets_read_only():
    mounts = {m["mountPath"]: m for m in standard_pod()["spec"]["containers"][0]["volumeMounts"] if m["name"] == "fsx"}
    assert mounts == {"/fsx/research": {"name": "fsx", "mountPath": "/fsx/research", "subPath": "research"},
                      "/fsx/datasets": {"name": "fsx", "mountPath": "/fsx/datasets", "subPath": "datasets",
                                        "readOnly": True}}
    assert job_launcher.checkpoint_dir(SPEC, request("p5", "openpod")).startswith("/fsx/research/")
    init = standard_pod()["spec"]["initContainers"][0]
    assert init["command"][:3] == ["chmod", "1777", "/fsx/research"]  # the image's user can write there


@pytest.mark.parametrize("mount", [
    {"name": "fsx", "mountPath": "/fsx"},                                           # the root: every team
    {"name": "fsx", "mountPath": "/x", "subPath": "product"},                       # another team
    {"name": "fsx", "mountPath": "/x", "subPath": "product/llama"},
    {"name": "fsx", "mountPath": "/x", "subPath": "research/../product"},
    {"name": "fsx", "mountPath": "/x", "subPathExpr": "$(TEAM)"},                   # expanded at run time
    {"name": "fsx", "mountPath": "/x", "subPath": "datasets"},                      # datasets read-write
    {"name": "fsx", "mountPath": "/x", "subPath": "researchers"},                   # a prefix is not the team
])
def test_mounting_more_of_fsx_than_the_teams_own_directory_is_denied(mount):
    pod = standard_pod()
    pod["spec"]["containers"][0]["volumeMounts"].append(mount)
    denied = admit_pod(pod)
    assert len(denied) == 1 and denied[0].startswith("the fsx-lustre claim may be mounted only with subPath"), denied


@pytest.mark.parametrize("sub", ["research/llama", "research/x", "datasets/x"])
def test_no_subpath_below_the_teams_directory_or_the_datasets_is_mounted(sub):
    """The kubelet resolves symlinks in a subPath and only checks the result stays inside the volume - the whole
    file system - so ``research/x -> ../product`` planted by the team would reach another team's checkpoints."""
    pod = standard_pod()
    pod["spec"]["containers"][0]["volumeMounts"].append(
        {"name": "fsx", "mountPath": "/ckpt", "subPath": sub, "readOnly": True})
    denied = admit_pod(pod)
    assert len(denied) == 1 and "subPath exactly <team>" in denied[0], denied


# ------------------------------------------------------------------------------ placement and identity


@pytest.mark.parametrize("change, message", [
    (lambda s: s["nodeSelector"].update({labels.INSTANCE_GROUP: "system"}), "pods must select an instance group"),
    (lambda s: s.pop("nodeSelector"), "pods must select an instance group"),
    (lambda s: s.update(nodeName="ip-10-0-0-1.ec2.internal"), "pods must select an instance group"),
    (lambda s: s.update(serviceAccountName="node-remediation"), "serviceAccountName must be training"),
], ids=["system-group", "no-selector", "node-name", "service-account"])
def test_team_pods_stay_off_the_system_group_and_run_as_the_training_service_account(change, message):
    """The system group runs the remediation controller, whose identity can reboot and replace nodes."""
    pod = standard_pod()
    change(pod["spec"])
    denied = admit_pod(pod)
    assert len(denied) == 1 and denied[0].startswith(message), denied


HOLD = "tolerations of the platform's hold taints"


@pytest.mark.parametrize("toleration", [
    {"key": labels.UNHEALTHY_TAINT, "operator": "Exists"},                          # a node awaiting replacement
    {"key": labels.HOT_SPARE_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {"key": labels.STARTUP_TAINT, "operator": "Exists", "effect": "NoSchedule"},     # not yet deep-checked
    {"key": labels.PAIR_CHECK_TAINT, "operator": "Exists"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},               # cordoned/draining nodes
    {"operator": "Exists"},                                                           # every taint at once
], ids=["unhealthy", "hot-spare", "health-check", "pair-check", "cordoned", "everything"])
def test_team_pods_cannot_tolerate_the_platforms_hold_taints(toleration):
    """A hand-written pod tolerating a hold taint would land on a node awaiting replacement, a spare held out of
    the quotas, or a node not yet checked; the JobSet builder only ever adds the group's own taints."""
    pod = standard_pod()
    pod["spec"].setdefault("tolerations", []).append(toleration)
    denied = admit_pod(pod)
    assert len(denied) == 1 and HOLD in denied[0], denied


def test_the_groups_own_taints_and_kubernetes_default_tolerations_stay_allowed():
    pod = standard_pod()
    pod["spec"].setdefault("tolerations", []).extend([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ])
    assert admit_pod(pod) == []


NODE_POLICY = next(o for o in OBJS if o["kind"] == "ValidatingAdmissionPolicy"
                   and o["metadata"]["name"] == "openpod-node-agent-own-node")
DETECTOR = "system:serviceaccount:openpod-system:node-health-agent"


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}}


def test_the_node_health_agent_may_update_only_its_own_node():
    own = {"authentication.kubernetes.io/node-name": ["ip-10-0-1-5.ec2.internal"]}
    assert vap.admit(NODE_POLICY, node("ip-10-0-1-5.ec2.internal"), namespace_labels={}, user=DETECTOR,
                     old=node("ip-10-0-1-5.ec2.internal"), extra=own) == []
    assert vap.admit(NODE_POLICY, node("ip-10-0-9-9.ec2.internal"), namespace_labels={}, user=DETECTOR,
                     old=node("ip-10-0-9-9.ec2.internal"), extra=own) == [
        "node-health-agent may update only the node its pod runs on, not ip-10-0-9-9.ec2.internal"]
    assert vap.admit(NODE_POLICY, node("n"), namespace_labels={}, user=DETECTOR, old=node("n")) != []  # no claim
    controller = "system:serviceaccount:openpod-system:node-remediation"  # cordons and drains any node
    assert vap.admit(NODE_POLICY, node("n"), namespace_labels={}, user=controller, old=node("n")) == []


def test_training_pods_run_without_privilege_escalation_and_the_platform_image_without_capabilities():
    spec = standard_pod()["spec"]
    (main_c,), (init,) = spec["containers"], spec["initContainers"]
    assert main_c["securityContext"] == {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                         "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}
    assert init["securityContext"] == {"runAsUser": 0, "allowPrivilegeEscalation": False,
                                       "capabilities": {"drop": ["ALL"], "add": ["FOWNER"]}}
    assert init["resources"]["limits"] == init["resources"]["requests"]
    assert spec["automountServiceAccountToken"] is False
    torchrun = pod_of(jobset.build(SPEC, request("p5", "torchrun")))["spec"]["containers"][0]
    assert torchrun["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"add": ["IPC_LOCK"]}}


def test_submit_refuses_nvidia_device_selection_in_env():
    req = request("p5", "torchrun")
    req.env["NVIDIA_VISIBLE_DEVICES"] = "all"
    with pytest.raises(jobset.JobError, match="--env NVIDIA_VISIBLE_DEVICES not allowed"):
        jobset.validate(SPEC, req)


def test_a_bound_pod_updated_by_the_job_controller_is_admitted():
    """The Job controller removes batch.kubernetes.io/job-tracking from every finished pod with an UPDATE of the
    bound pod (nodeName set); refusing it kept Jobs from ever finishing."""
    old = standard_pod()
    old["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    old["spec"]["nodeName"] = "ip-10-0-1-5.ec2.internal"
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    assert vap.admit(PODS, new, namespace_labels=TEAM_NS, user=JOB_CONTROLLER, old=old) == []


DEVICE_ENV = "NVIDIA_* and AWS_NEURON_VISIBLE_DEVICES environment variables are not allowed"


@pytest.mark.parametrize("env_from, refused", [
    ({"prefix": "NVIDIA_", "configMapRef": {"name": "x"}}, True),
    ({"prefix": "NV", "configMapRef": {"name": "x"}}, True),     # NV + IDIA_VISIBLE_DEVICES
    ({"prefix": "AWS_", "secretRef": {"name": "x"}}, True),      # AWS_ + NEURON_VISIBLE_DEVICES
    ({"prefix": "", "configMapRef": {"name": "x"}}, True),       # the team writes the keys: any name
    ({"secretRef": {"name": "x"}}, True),
    ({"prefix": "APP_", "configMapRef": {"name": "x"}}, False),
])
def test_envfrom_without_a_safe_prefix_is_refused(env_from, refused):
    """A ConfigMap or Secret the team writes can hold a key NVIDIA_VISIBLE_DEVICES; envFrom imports it under
    that name unless a prefix no device-selecting name starts with is set."""
    pod = standard_pod()
    pod["spec"]["containers"][0]["envFrom"] = [env_from]
    denied = admit_pod(pod)
    assert bool(denied) is refused and all(d.startswith(DEVICE_ENV) for d in denied), denied


@pytest.mark.parametrize("name", ["AWS_NEURON_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"])
def test_device_selecting_environment_is_refused_in_pods_and_by_submit(name):
    pod = standard_pod()
    pod["spec"]["containers"][0]["env"].append({"name": name, "value": "all"})
    denied = admit_pod(pod)
    assert len(denied) == 1 and denied[0].startswith(DEVICE_ENV), denied
    req = request("trn2", "torchrun")
    req.env[name] = "0,1"
    with pytest.raises(jobset.JobError, match=f"--env {name} not allowed"):
        jobset.validate(SPEC, req)
