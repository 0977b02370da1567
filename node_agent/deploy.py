"""Kubernetes manifests of the node agent, as plain dicts (the CDK construct applies them).

Pure functions of the cluster spec and the image URIs, so they are tested
without CDK. The detector DaemonSet runs on accelerated and EFA nodes (one
per CPU architecture, since images are single-platform); the remediation
controller is one Deployment on the system group.
"""

from __future__ import annotations

import yaml

from infra.governance.pod_baseline import baseline_checks
from openpod_core import labels as L
from openpod_core.instance_types import Accelerator
from infra.governance import system_group as _system_group
from infra.spec.cluster import ClusterSpec
from node_agent.config import AgentConfig, ControllerConfig, GroupConfig

NAMESPACE = "openpod-system"
DETECTOR = "node-health-agent"
CONTROLLER = "node-remediation"
APP = "app.kubernetes.io/name"
ARCH = "kubernetes.io/arch"
DETECTOR_METRICS_PORT = AgentConfig().metrics_port
AGENT_STATE_DIR = "/var/lib/openpod/node-agent"
CONTROLLER_METRICS_PORT = ControllerConfig().metrics_port


def namespace() -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def service_account(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NAMESPACE}}


def _cluster_role(name: str, rules: list[dict]) -> list[dict]:
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"openpod-{name}"},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"openpod-{name}"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"openpod-{name}"},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]},
    ]


def _role(name: str, rules: list[dict], service_account: str) -> list[dict]:
    """A Role in the agent's namespace and its RoleBinding to ``service_account``, both named ``name``."""
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": NAMESPACE},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": NAMESPACE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}]},
    ]


def detector_rbac() -> list[dict]:
    """The detector reads and marks nodes (its own, by name) and writes Events. Nothing else."""
    return _cluster_role(DETECTOR, [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ])


def controller_rbac() -> list[dict]:
    """The controller cordons/labels/taints nodes, lists pods and evicts them (the Eviction API enforces PDBs)."""
    return _cluster_role(CONTROLLER, [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},  # the RemediationFailed condition
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ])


def controller_lease_rbac(lease_name: str = ControllerConfig().leader_election.lease_name) -> list[dict]:
    """Leader election: the controller's own Lease in its namespace (create it once; then get/update only it)."""
    return _role(f"openpod-{CONTROLLER}-leader-election", [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease_name],
         "verbs": ["get", "update"]},
    ], CONTROLLER)


def controller_pair_check_rbac() -> list[dict]:
    """The two-node check (node_agent/pair_runner.py), in the controller's namespace only: create, read and delete
    its Jobs; create their Secret (SSH keys) and headless Service, owned by the Job so the garbage collector deletes
    them (no delete, get or list on Secrets); read the index-0 pod's log. Pods are listed by the cluster role."""
    return _role(f"openpod-{CONTROLLER}-pair-check", [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "delete"]},
        {"apiGroups": [""], "resources": ["secrets", "services"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ], CONTROLLER)


PAIR_CHECK_POLICY = "openpod-node-remediation-pair-check"


def pair_check_policy(images: list[str]) -> list[dict]:
    """What the controller may create in its namespace for the two-node check, enforced by the API server
    (a ValidatingAdmissionPolicy, like the detector's own-node one in infra/governance/admission.py): Jobs named
    ``pair-*`` whose pods run only the spec's pair-check images, without host namespaces, hostPath volumes,
    privileged containers or a service-account token; ``Opaque`` Secrets (never a token request); headless
    ClusterIP Services without external IPs. So its create rights cannot start anything else on a node."""
    user = f"system:serviceaccount:{NAMESPACE}:{CONTROLLER}"
    meta = {"name": PAIR_CHECK_POLICY, "labels": {"app.kubernetes.io/managed-by": "openpod"}}
    allowed = "[" + ", ".join(f"'{i}'" for i in sorted(set(images))) + "]"
    pod = "object.spec.template.spec"
    job_ok = (f"object.kind != 'Job' || ("
              f"has({pod}.automountServiceAccountToken) && {pod}.automountServiceAccountToken == false"
              f" && (!has({pod}.serviceAccountName) || {pod}.serviceAccountName == 'default')"
              f" && !has({pod}.initContainers)"
              f" && !has({pod}.ephemeralContainers)"
              f" && (!has({pod}.volumes) || {pod}.volumes.all(v, !has(v.hostPath)))"
              f" && {pod}.containers.all(c, c.image in {allowed}))")
    # Pod Security Baseline on the Job's pods (the same checks as team pods), and neither a pinned node - the
    # scheduler places them by the hostname affinity pair_check.job writes - nor a projected service-account
    # token: the check needs no Kubernetes API.
    baseline = [{"expression": f"object.kind != 'Job' || ({expr})", "reason": "Forbidden",
                 "message": f"{CONTROLLER}: a pair-check Job's pods must meet Pod Security Baseline: {msg}"}
                for expr, msg in baseline_checks()]
    baseline.append({
        "expression": f"object.kind != 'Job' || (!has({pod}.nodeName) && (!has({pod}.volumes) || "
                      f"{pod}.volumes.all(v, !has(v.projected) || !has(v.projected.sources) || "
                      "v.projected.sources.all(x, !has(x.serviceAccountToken)))))",
        "reason": "Forbidden",
        "message": f"{CONTROLLER}: a pair-check Job's pods may not set nodeName or mount a service-account token"})
    validations = [
        {"expression": "object.metadata.name.startsWith('pair-')", "reason": "Forbidden",
         "messageExpression": f"'{CONTROLLER} may create only pair-* objects, not ' + object.metadata.name"},
        {"expression": job_ok, "reason": "Forbidden",
         "messageExpression": f"'{CONTROLLER}: a pair-check Job runs only the pair-check images of the spec, without "
                              "hostPath volumes or a service-account token'"},
        {"expression": "object.kind != 'Secret' || (has(object.type) && object.type == 'Opaque')",
         "reason": "Forbidden", "messageExpression": f"'{CONTROLLER} may create only Opaque Secrets'"},
        {"expression": "object.kind != 'Service' || (has(object.spec.clusterIP) && object.spec.clusterIP == 'None'"
                       " && !has(object.spec.externalIPs) && (!has(object.spec.type) || object.spec.type == "
                       "'ClusterIP'))",
         "reason": "Forbidden", "messageExpression": f"'{CONTROLLER} may create only headless Services'"},
        *baseline,
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": meta,
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"], "operations": ["CREATE"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets", "services"],
                 "operations": ["CREATE"]}]},
            "matchConditions": [{"name": "the-remediation-controller",
                                 "expression": f"request.userInfo.username == '{user}'"}],
            "variables": [{"name": "pods", "expression": "object.kind == 'Job' ? [object.spec.template] : []"},
                          {"name": "specs", "expression": "variables.pods.map(p, p.spec)"}],
            "validations": validations,
        },
    }
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": dict(meta), "spec": {"policyName": PAIR_CHECK_POLICY, "validationActions": ["Deny"]}}
    return [policy, binding]


def agent_config(spec: ClusterSpec | None = None) -> dict:
    """The agent's config file: the defaults, written out so operators see and edit every knob, with each
    group's deep-check DCGM level from the spec."""
    cfg = AgentConfig()
    cfg.kernel_log.state_path = f"{AGENT_STATE_DIR}/kernel-log.json"  # on the hostPath below: survives pod restarts
    if spec is not None:
        cfg.deep_check.dcgm_level_by_group = {g.name: g.dcgm_level for g in spec.instance_groups
                                              if g.type.accelerator is Accelerator.NVIDIA}
    return cfg.model_dump(mode="json")


def controller_config(spec: ClusterSpec, **overrides) -> dict:
    cfg = ControllerConfig(region=spec.region,
                           groups={g.name: GroupConfig(hot_spares=g.hot_spares,
                                                       dcgm_level=g.dcgm_level
                                                       if g.type.accelerator is Accelerator.NVIDIA else None,
                                                       instance_type=g.instance_type,
                                                       pair_check_image=g.pair_check_image)
                                   for g in spec.instance_groups},
                           **overrides)
    return cfg.model_dump(mode="json")


def config_map(name: str, filename: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {filename: yaml.safe_dump(data, sort_keys=True)}}


def _host_path(name: str, path: str, kind: str, mount: str, read_only: bool = True, **extra) -> tuple[dict, dict]:
    return ({"name": name, "hostPath": {"path": path, "type": kind}},
            {"name": name, "mountPath": mount, "readOnly": read_only, **extra})


def detector_daemonset(image: str, arch: str = "amd64") -> dict:
    """The detector on every accelerated or EFA node of one CPU architecture.

    Host access, and why: /dev/kmsg (kernel log; CAP_SYSLOG reads it), /sys and /proc
    read-only (EFA devices and counters, mounts, memory pressure), the host root
    read-only (free space of watched mounts), the containerd socket (liveness),
    host network (kubelet /healthz on 127.0.0.1), and read-write the roots of the
    per-job checkpoint directories it cleans up. ``privileged`` is needed by
    the deep checks only: DCGM diagnostics, the NCCL test, the EFA loopback and
    Neuron tools open the accelerator and EFA device files directly.
    """
    mounts = [
        _host_path("kmsg", "/dev/kmsg", "CharDevice", "/dev/kmsg"),
        _host_path("sys", "/sys", "Directory", "/host/sys"),
        _host_path("proc", "/proc", "Directory", "/host/proc"),
        _host_path("host-root", "/", "Directory", "/host", mountPropagation="HostToContainer"),
        _host_path("containerd", "/run/containerd", "Directory", "/run/containerd"),
        # The kernel-log position (boot id + last record handled), so a restarted agent acts once per fault.
        _host_path("agent-state", AGENT_STATE_DIR, "DirectoryOrCreate", AGENT_STATE_DIR, read_only=False),
    ]
    sc = AgentConfig().scratch
    mounts += [_host_path(f"job-scratch-{i}", root, "DirectoryOrCreate", sc.mount_prefix + root, read_only=False)
               for i, root in enumerate(sc.roots)]
    accelerated = {"key": L.ACCELERATOR, "operator": "In", "values": ["nvidia", "neuron"]}
    with_efa = {"key": L.EFA, "operator": "In", "values": ["true"]}
    on_arch = {"key": ARCH, "operator": "In", "values": [arch]}
    labels = {APP: DETECTOR, ARCH: arch}
    name = f"{DETECTOR}-{arch}"
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {APP: DETECTOR}},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {
                "metadata": {"labels": labels, "annotations": L.scrape_annotations(DETECTOR_METRICS_PORT)},
                "spec": {
                    "serviceAccountName": DETECTOR,
                    "priorityClassName": "system-node-critical",
                    "hostNetwork": True,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [accelerated, on_arch]},
                                              {"matchExpressions": [with_efa, on_arch]}]}}},
                    # Runs everywhere it is selected, including nodes it tainted itself.
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{
                        "name": "detector",
                        "image": image,
                        "args": ["detector", "--config", "/etc/openpod/agent.yaml"],
                        "env": [
                            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                            # The NVIDIA container runtime exposes every GPU without allocating any.
                            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
                        ],
                        "ports": [{"name": "metrics", "containerPort": DETECTOR_METRICS_PORT}],
                        "resources": {"requests": {"cpu": "50m", "memory": "96Mi"},
                                      "limits": {"memory": "512Mi"}},
                        "securityContext": {"privileged": True, "readOnlyRootFilesystem": True,
                                            "capabilities": {"add": ["SYSLOG"]}},
                        "volumeMounts": [m for _, m in mounts] + [
                            {"name": "config", "mountPath": "/etc/openpod", "readOnly": True},
                            {"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [v for v, _ in mounts] + [
                        {"name": "config", "configMap": {"name": f"{DETECTOR}-config"}},
                        {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def system_groups(spec: ClusterSpec) -> list:
    """The groups the platform's controllers run on: CPU groups that always have nodes (min_size >= 1) and on
    which no team has quota - so no team pod shares a node with an identity that can evict any pod and
    reboot or replace any instance (admission keeps team pods on queued groups, the system taint every pod
    that does not tolerate it: infra/governance/system_group.py)."""
    return _system_group.system_groups(spec)


def controller_placement(spec: ClusterSpec) -> dict:
    """Pod-spec fields that hold the controller to the system groups: a required node affinity on their
    instance-group label (and amd64: the controller's image) and tolerations of those groups' taints (their own
    and the system taint)."""
    groups = system_groups(spec)
    if not groups:
        raise ValueError("instance_groups: the remediation controller needs a system group - a CPU group with "
                         "min_size >= 1 that no team has quota on")
    tolerations: list[dict] = []
    for g in groups:
        for t in _system_group.group_taints(spec, g):
            if _system_group.toleration(t) not in tolerations:
                tolerations.append(_system_group.toleration(t))
    out: dict = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": L.INSTANCE_GROUP, "operator": "In", "values": [g.name for g in groups]},
            {"key": ARCH, "operator": "In", "values": ["amd64"]}]}]}}}}
    if tolerations:
        out["tolerations"] = tolerations
    return out


def controller_deployment(image: str, replicas: int = 2, *, placement: dict | None = None) -> dict:
    """Two controller replicas on the system group's CPU nodes (``placement``: controller_placement), on different
    nodes when possible; the one holding the Lease acts, the other takes over when it stops renewing
    (node_agent/leader.py)."""
    labels = {APP: CONTROLLER}
    placement = placement or {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": L.INSTANCE_GROUP, "operator": "In",
                                                     "values": ["system"]},
                                                    {"key": ARCH, "operator": "In", "values": ["amd64"]}]}]}}}}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": CONTROLLER, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": replicas,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": L.scrape_annotations(CONTROLLER_METRICS_PORT)},
                "spec": {
                    "serviceAccountName": CONTROLLER,
                    "priorityClassName": "system-cluster-critical",
                    "affinity": {**placement["affinity"],
                                 "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                     {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": labels},
                                                                         "topologyKey": "kubernetes.io/hostname"}}]}},
                    **({"tolerations": placement["tolerations"]} if "tolerations" in placement else {}),
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "controller",
                        "image": image,
                        "args": ["controller", "--config", "/etc/openpod/controller.yaml"],
                        # The Lease holder identity.
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "ports": [{"name": "metrics", "containerPort": CONTROLLER_METRICS_PORT}],
                        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                                      "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/openpod", "readOnly": True}],
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": f"{CONTROLLER}-config"}}],
                },
            },
        },
    }


def controller_pdb() -> dict:
    """A drain of the system nodes never takes both replicas at once: one always holds or can take the Lease."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": CONTROLLER, "namespace": NAMESPACE},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {APP: CONTROLLER}}}}


def detector_arches(spec: ClusterSpec) -> list[str]:
    """CPU architectures of the groups the detector runs on (accelerated or EFA)."""
    arches = {("arm64" if g.type.arch == "arm64" else "amd64") for g in spec.instance_groups
              if g.type.is_accelerated or g.type.efa_supported}
    return sorted(arches)


def manifests(spec: ClusterSpec, images: dict[str, str], *, controller_service_account: bool = True) -> list[dict]:
    """Everything, in apply order. ``images``: arch -> image URI (amd64 is required: the controller uses it).

    ``controller_service_account=False`` when the caller creates it (CDK does, to bind the IAM role
    through EKS Pod Identity).
    """
    out = [namespace(), service_account(DETECTOR)]
    if controller_service_account:
        out.append(service_account(CONTROLLER))
    out += detector_rbac() + controller_rbac() + controller_lease_rbac()
    pair_images = [g.pair_check_image for g in spec.instance_groups if g.pair_check_image]
    if pair_images:  # only where a group runs the two-node check
        out += controller_pair_check_rbac() + pair_check_policy(pair_images)
    out.append(config_map(f"{DETECTOR}-config", "agent.yaml", agent_config(spec)))
    out.append(config_map(f"{CONTROLLER}-config", "controller.yaml", controller_config(spec)))
    for arch in detector_arches(spec):
        if arch not in images:
            raise ValueError(f"no {arch} image for the detector; groups of that architecture need one")
        out.append(detector_daemonset(images[arch], arch))
    out.append(controller_deployment(images["amd64"], placement=controller_placement(spec)))
    out.append(controller_pdb())
    return out
