"""Admission policies: what the API server refuses in team namespaces, as ValidatingAdmissionPolicy (core CEL).

One module for every admission rule the platform deploys (governance and, next, pod security), so each
rule is one expression a reader can audit and tests evaluate with a CEL interpreter exactly as deployed.

``openpod-team-queue`` (issue 11): in a namespace carrying the team label, a JobSet or Job must name the
team's own LocalQueue in ``kueue.x-k8s.io/queue-name`` - on create and on every update, so the label
can be neither omitted, pointed at another team's queue, nor removed while the job waits suspended.
Bare Pods are refused: Kueue's pod integration is off (``install.FRAMEWORKS``), so a bare Pod would
run outside every quota. Requests from the controllers that create and update the children of
admitted jobs (service accounts of kube-system, the Kueue and the JobSet namespaces) are not matched.
The same policy refuses a ``kueue.x-k8s.io/priority-class`` the team may not use (``teams[].allowed_priorities``,
default every priority but ``inference``). Together with Kueue's ``manageJobsWithoutQueueName`` over team
namespaces (``install.py``), no job in a team namespace starts without Kueue's admission.
"""

from __future__ import annotations

from typing import Any

from infra.governance import device_env, team_images
from infra.governance.install import JOBSET_CONTROLLER, JOBSET_NAMESPACE, KUEUE_CONTROLLER, KUEUE_NAMESPACE
from infra.governance.job_request import MAX_RESTARTS
from infra.governance.jobset import PRIORITY_LABEL
from infra.governance.pod_baseline import APPARMOR_ANNOTATION, baseline_checks
from infra.governance.pod_baseline import CONTAINERS as _CONTAINERS
from infra.governance.queues import FSX_CLAIM, TEAM_LABEL, queued_groups
from infra.spec.cluster import ClusterSpec
from infra.spec.teams import TeamSpec
from openpod_core import labels

API = "admissionregistration.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TEAM_QUEUE_POLICY = "openpod-team-queue"
# Service-account namespaces whose controllers create and update children of admitted jobs.
CONTROLLER_NAMESPACES = ("kube-system", KUEUE_NAMESPACE, JOBSET_NAMESPACE)

# Priorities a team may not use unless its allowed_priorities names them.
DEFAULT_DENIED_PRIORITIES = ("inference",)

NOT_A_CONTROLLER = "!(" + " || ".join(
    f"request.userInfo.username.startsWith('system:serviceaccount:{ns}:')" for ns in CONTROLLER_NAMESPACES) + ")"


def policy_and_binding(name: str, resource_rules: list[dict], validations: list[dict], *,
                       namespace_selector: dict | None = None, match_conditions: list[dict] | None = None,
                       variables: list[dict] | None = None) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy (failurePolicy Fail) and its binding of the same name, denying on a failed
    validation: the boilerplate every admission rule of this module shares."""
    meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "openpod"}}
    constraints: dict[str, Any] = {"namespaceSelector": namespace_selector} if namespace_selector else {}
    constraints["resourceRules"] = resource_rules
    spec: dict[str, Any] = {"failurePolicy": "Fail", "matchConstraints": constraints}
    if match_conditions:
        spec["matchConditions"] = match_conditions
    if variables:
        spec["variables"] = variables
    spec["validations"] = validations
    policy = {"apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": meta, "spec": spec}
    binding = {"apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": dict(meta),
               "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return [policy, binding]


def team_namespaces() -> dict[str, Any]:
    """The namespaceSelector of team namespaces: those carrying the team label."""
    return {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}


def allowed_priorities(spec: ClusterSpec, team: TeamSpec) -> list[str]:
    """The team's ``allowed_priorities``, or every priority of the spec but ``inference``."""
    if team.allowed_priorities is not None:
        return list(team.allowed_priorities)
    return [p.name for p in spec.priorities if p.name not in DEFAULT_DENIED_PRIORITIES]


def team_queue_policy(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The policy and its binding (the LocalQueue of a team is named after the team: queues.local_queue_name).
    The priority label and the templates' priorityClassName are judged on CREATE and when an UPDATE changes them,
    so a team's edit of a JobSet admitted before its allowed priorities narrowed is not refused for them."""
    allowed = _allowed_map(spec)
    return policy_and_binding(
        TEAM_QUEUE_POLICY,
        [{"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "resources": ["jobsets"],
          "operations": ["CREATE", "UPDATE"]},
         {"apiGroups": ["batch"], "apiVersions": ["*"], "resources": ["jobs"], "operations": ["CREATE", "UPDATE"]},
         {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}],
        [{"expression": "object.kind != 'Pod'", "reason": "Forbidden",
          "message": "bare Pods are not allowed in team namespaces: submit a JobSet or Job (openpod submit) "
                     f"with {QUEUE_LABEL} set to the team's queue, so the team's quota applies"},
         {"expression": "object.kind == 'Pod' || variables.queue == variables.team", "reason": "Forbidden",
          "messageExpression": f"'{QUEUE_LABEL} must be ' + variables.team + ' (the LocalQueue of team ' + "
                               f"variables.team + '), got ' + (variables.queue == '' ? 'none' : variables.queue)"},
         {"expression": "variables.priority == '' || variables.priority in variables.allowed || "
                        f"(request.operation == 'UPDATE' ? variables.priority == {_priority_label('oldObject')} "
                        ": false)",
          "reason": "Forbidden",
          "messageExpression": f"'{PRIORITY_LABEL} ' + variables.priority + ' is not allowed for team ' + "
                               "variables.team + ' (teams[].allowed_priorities in the cluster spec)'"},
         {"expression": f"variables.templates.all(s, {_PRIORITY_CLASS_OK}) || (request.operation == 'UPDATE' ? "
                        f"{_classes('object')} == {_classes('oldObject')} : false)", "reason": "Forbidden",
          "messageExpression": "'priorityClassName of a pod template is not allowed for team ' + variables.team + "
                               "': without the priority label Kueue takes the class as the priority; use the '"
                               f" + '{PRIORITY_LABEL} label (teams[].allowed_priorities in the cluster spec)'"}],
        namespace_selector=team_namespaces(),
        match_conditions=[{"name": "not-a-platform-controller", "expression": NOT_A_CONTROLLER}],
        variables=[
            {"name": "team", "expression": f"namespaceObject.metadata.labels['{TEAM_LABEL}']"},
            {"name": "queue", "expression": f"has(object.metadata.labels) && '{QUEUE_LABEL}' in "
                                            f"object.metadata.labels ? object.metadata.labels['{QUEUE_LABEL}'] : ''"},
            {"name": "priority", "expression": _priority_label("object")},
            {"name": "allowed", "expression": f"variables.team in {allowed} ? {allowed}[variables.team] : []"},
            {"name": "templates", "expression": _templates("object")},
        ])


def _priority_label(obj: str) -> str:
    return (f"(has({obj}.metadata.labels) && '{PRIORITY_LABEL}' in {obj}.metadata.labels ? "
            f"{obj}.metadata.labels['{PRIORITY_LABEL}'] : '')")


def _templates(obj: str) -> str:
    return (f"({obj}.kind == 'JobSet' ? (has({obj}.spec.replicatedJobs) ? {obj}.spec.replicatedJobs.map(r, "
            f"r.template.spec.template.spec) : []) : ({obj}.kind == 'Job' ? [{obj}.spec.template.spec] : []))")


def _classes(obj: str) -> str:
    """CEL: the pod templates' priorityClassNames ('' where unset)."""
    return f"{_templates(obj)}.map(s, has(s.priorityClassName) ? s.priorityClassName : '')"


# -------------------------------------------------------------------------------------- bounded restarts
#
# ``openpod-jobset-restarts`` (issue 13): a team JobSet's failure policy may use only the actions that count
# against ``maxRestarts``. JobSet v0.12.0's actions (kubernetes-sigs/jobset@v0.12.0
# api/jobset/v1alpha2/jobset_types.go:412-435, enum :449): FailJobSet, RestartJobSet, RestartJob, and two that
# restart "but do not check jobSet.spec.maxRestarts" - RestartJobSetAndIgnoreMaxRestarts (:421-423) and
# RestartJobAndIgnoreMaxRestarts (:431-434; live once the platform turns the RestartJob gate on for replica
# mode, install.JOBSET_FEATURE_GATES). With those a failing team job restarts forever while it holds quota
# (borrowed quota included), and nothing ends it but a person. Updates from the platform's controllers
# (Kueue suspends and resumes JobSets) are not matched, so a JobSet created before the policy stays manageable.
# The bounded actions are bounded only by ``maxRestarts`` (int32), so it is capped at submit's own limit
# (job_request.MAX_RESTARTS): a JobSet applied with kubectl cannot go around submit.

RESTART_POLICY = "openpod-jobset-restarts"
UNBOUNDED_RESTART_ACTIONS = ("RestartJobSetAndIgnoreMaxRestarts", "RestartJobAndIgnoreMaxRestarts")
BOUNDED_RESTART_ACTIONS = ("FailJobSet", "RestartJobSet", "RestartJob")


def restart_policy() -> list[dict[str, Any]]:
    """Refuse team JobSets whose failure-policy rules restart without counting against ``maxRestarts``, or
    whose ``maxRestarts`` is above ``MAX_RESTARTS``."""
    allowed = ", ".join(BOUNDED_RESTART_ACTIONS[:-1]) + " or " + BOUNDED_RESTART_ACTIONS[-1]
    return policy_and_binding(
        RESTART_POLICY,
        [{"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "resources": ["jobsets"],
          "operations": ["CREATE", "UPDATE"]}],
        [{"expression": "size(variables.unbounded) == 0", "reason": "Forbidden",
          "messageExpression": "'spec.failurePolicy.rules: rule ' + (has(variables.unbounded[0].name) ? "
                               "variables.unbounded[0].name : '(unnamed)') + ' has action ' + "
                               "variables.unbounded[0].action + ', which does not count against maxRestarts "
                               f"(a team job could restart forever); use {allowed}'"},
         {"expression": f"variables.max_restarts <= {MAX_RESTARTS}", "reason": "Forbidden",
          "messageExpression": "'spec.failurePolicy.maxRestarts: ' + string(variables.max_restarts) + "
                               f"' is above {MAX_RESTARTS}, the most a team job may restart; use 0 to {MAX_RESTARTS}'"}],
        namespace_selector=team_namespaces(),
        match_conditions=[{"name": "not-a-platform-controller", "expression": NOT_A_CONTROLLER}],
        variables=[{"name": "unbounded",
                    "expression": "has(object.spec.failurePolicy) && has(object.spec.failurePolicy.rules) ? "
                                  "object.spec.failurePolicy.rules.filter(r, has(r.action) && r.action in "
                                  f"{_cel_list(UNBOUNDED_RESTART_ACTIONS)}) : []"},
                   {"name": "max_restarts",
                    "expression": "has(object.spec.failurePolicy) && has(object.spec.failurePolicy.maxRestarts) ? "
                                  "object.spec.failurePolicy.maxRestarts : 0"}])


# -------------------------------------------------------------------------------------------- start by Kueue
#
# ``openpod-kueue-starts-jobs``: in a team namespace only Kueue starts a JobSet - a JobSet is created suspended
# (Kueue's mutating webhook, which runs before validating admission, suspends every queue-managed JobSet:
# kueue@v0.19.2 pkg/controller/jobs/jobset/jobset_webhook.go:75-91, pkg/controller/jobframework/defaults.go:36-46;
# openpod submit renders it suspended) and only Kueue's controller turns ``spec.suspend``
# from true to false, when it admits the workload within the team's quota (kueue@v0.19.2
# pkg/controller/jobframework/reconciler.go:1480-1511, startJob). The team Role may update its JobSets, so without
# this a team user could unsuspend its own pending JobSet and run outside Kueue until Kueue suspends it again,
# as often as it likes. Child Jobs run when the JobSet controller creates them unsuspended or resumes them for an
# admitted JobSet (kubernetes-sigs/jobset@v0.12.0 pkg/controllers/jobset_controller.go:577-680, 938-1045), or
# when Kueue starts a plain Job.

START_POLICY = "openpod-kueue-starts-jobs"
KUEUE_USER = f"system:serviceaccount:{KUEUE_NAMESPACE}:{KUEUE_CONTROLLER}"
JOBSET_USER = f"system:serviceaccount:{JOBSET_NAMESPACE}:{JOBSET_CONTROLLER}"
_RUNNING = "!(has(object.spec.suspend) && object.spec.suspend)"


def start_policy() -> list[dict[str, Any]]:
    """Refuse a JobSet or Job created running, or turned from suspended to running, by anyone but the
    controllers that admit it (Kueue; for Jobs also the JobSet controller)."""
    starters = {"JobSet": [KUEUE_USER], "Job": [KUEUE_USER, JOBSET_USER]}
    return policy_and_binding(
        START_POLICY,
        [{"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "resources": ["jobsets"],
          "operations": ["CREATE", "UPDATE"]},
         {"apiGroups": ["batch"], "apiVersions": ["*"], "resources": ["jobs"], "operations": ["CREATE", "UPDATE"]}],
        [{"expression": f"request.userInfo.username in {starters}[object.kind]", "reason": "Forbidden",
          "messageExpression": "'spec.suspend of a ' + object.kind + ' in a team namespace is turned to false only "
                               "by Kueue when it admits the job within the quota of its team, not by ' + "
                               "request.userInfo.username + ' (submit it suspended; openpod submit does)'"}],
        namespace_selector=team_namespaces(),
        match_conditions=[{"name": "starts-a-job",
                           "expression": f"{_RUNNING} && (request.operation == 'CREATE' ? true : "
                                         "has(oldObject.spec.suspend) && oldObject.spec.suspend)"}])


# ---------------------------------------------------------------------------------------------- pod security
#
# ``openpod-pod-security`` (issue 10): every Pod created in a team namespace - by anyone, the Job
# controller included - must meet the Pod Security Standards' Baseline profile
# (https://kubernetes.io/docs/concepts/security/pod-security-standards/, "Baseline", checked 2026-11-23)
# with two exceptions the training runtime needs: hostPath volumes, only one directory deep under the
# team's own per-job roots (labels.JOB_SCRATCH_ROOTS: node memory and NVMe checkpoint tiers), and the
# IPC_LOCK capability (EFA registers memory). It also confines the team's FSx claim to the team's own
# directory and the read-only datasets (trainer_pod.fsx_mounts). Pod Security Admission's own ``enforce: baseline`` cannot
# express those exceptions (it refuses every hostPath), so the namespaces carry ``warn``/``audit`` labels
# only and this policy enforces. ``openpod-pod-security-jobsets`` applies the same checks to a JobSet's pod
# templates, so a bad JobSet is refused when it is submitted instead of failing its pods later. The Baseline
# controls are pod_baseline.CONTROLS (all 12 at Kubernetes 1.34). Both policies judge CREATE and an UPDATE that
# changes a field they read (guarded_fields_changed), so an upgrade that tightens a rule leaves the controllers'
# updates of objects admitted before it alone.

POD_SECURITY_POLICY = "openpod-pod-security"
POD_SECURITY_JOBSET_POLICY = "openpod-pod-security-jobsets"
# Taints that hold nodes out of team use (openpod_core/labels.py), and the one `kubectl cordon`/drain sets
# (kubernetes/api core/v1/well_known_taints.go TaintNodeUnschedulable, checked 2026-11-23).
HOLD_TAINTS = (labels.STARTUP_TAINT, labels.UNHEALTHY_TAINT, labels.HOT_SPARE_TAINT, labels.PAIR_CHECK_TAINT,
               "node.kubernetes.io/unschedulable")
# Environment names and prefixes that select accelerators outside the device plugins' allocation.
DEVICE_ENV_PREFIXES, DEVICE_ENV_NAMES = device_env.PREFIXES, device_env.NAMES
# Kueue takes a workload's priority from the first pod template's priorityClassName when it has no
# kueue.x-k8s.io/priority-class label (kubernetes-sigs/kueue@v0.19.2 pkg/controller/jobframework/reconciler.go:1716-1733,
# ExtractPriority / extractPriorityFromPodSets; read 2026-11-25), and kube-scheduler preempts by it.
_PRIORITY_CLASS_OK = ("!has(s.priorityClassName) || s.priorityClassName == '' || "
                      "s.priorityClassName in variables.allowed")


def _cel_list(items) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


def _device_env(name: str) -> str:
    """CEL: the environment name ``name`` selects accelerators."""
    return " || ".join([f"{name}.startsWith('{p}')" for p in DEVICE_ENV_PREFIXES]
                       + [f"{name} == '{n}'" for n in DEVICE_ENV_NAMES])


def _safe_env_prefix(prefix: str) -> str:
    """CEL: no key imported under ``prefix`` can form a device-selecting name."""
    return " && ".join([f"!('{p}'.startsWith({prefix}) || {prefix}.startsWith('{p}'))" for p in DEVICE_ENV_PREFIXES]
                       + [f"!'{n}'.startsWith({prefix})" for n in DEVICE_ENV_NAMES])


def pod_security_checks(spec: ClusterSpec) -> list[tuple[str, str]]:
    """(CEL over ``variables.specs`` - the pod specs of the object - and ``variables.team``, message) pairs."""
    roots = "|".join(labels.JOB_SCRATCH_ROOTS)
    datasets = spec.storage.fsx.data_repository_path.strip("/")
    groups = [g.name for g in queued_groups(spec)]
    checks = baseline_checks()
    checks.append((f"variables.specs.all(s, !has(s.volumes) || s.volumes.all(v, !has(v.hostPath) || "
                   f"v.hostPath.path.matches('^({roots})/' + variables.team + '/[a-z0-9][a-z0-9-]*$')))",
                   f"hostPath volumes are allowed only as <root>/<team>/<job> with <root> one of "
                   f"{', '.join(labels.JOB_SCRATCH_ROOTS)} (the job's own checkpoint scratch)"))
    # The team's FSx claim mounts the file-system root: only its own directory (subPath <team>[/...]) and
    # the datasets read-only may be mounted, never the root or another team's directory.
    fsx = (f"s.volumes.filter(v, has(v.persistentVolumeClaim) && v.persistentVolumeClaim.claimName == '{FSX_CLAIM}')"
           ".map(v, v.name)")
    checks.append((f"variables.specs.all(s, !has(s.volumes) || {_CONTAINERS}.all(c, !has(c.volumeMounts) || "
                   f"c.volumeMounts.all(m, !({fsx}.exists(n, n == m.name)) || (!has(m.subPathExpr) && "
                   f"has(m.subPath) && (m.subPath == variables.team || (m.subPath == '{datasets}' && "
                   f"has(m.readOnly) && m.readOnly))))))",
                   f"the {FSX_CLAIM} claim may be mounted only with subPath exactly <team>, or exactly {datasets} "
                   "read-only (a deeper subPath could be a symlink the team planted to another team's directory)"))
    # Team pods run only on groups with team quota - never next to the platform's controllers on the
    # system group (whose service accounts can reboot nodes) - and never bypass the scheduler with nodeName.
    checks.append((f"variables.specs.all(s, (!variables.node_name_checked || !has(s.nodeName)) && "
                   f"has(s.nodeSelector) && "
                   f"'{labels.INSTANCE_GROUP}' in s.nodeSelector && "
                   f"s.nodeSelector['{labels.INSTANCE_GROUP}'] in {_cel_list(groups)})",
                   f"pods must select an instance group with team quota (nodeSelector {labels.INSTANCE_GROUP} "
                   f"one of {', '.join(groups) or '(none)'}) and may not set nodeName"))
    # The platform's hold taints keep pods off nodes awaiting replacement, spares outside the quotas, nodes not
    # yet checked and cordoned ones; the JobSet builder adds only the group's own taints, so a pod that
    # tolerates a hold taint (or every taint, an Exists toleration without a key) was written to get around them.
    hold = _cel_list(HOLD_TAINTS)
    checks.append((f"variables.specs.all(s, !has(s.tolerations) || s.tolerations.all(t, has(t.key) && t.key != '' "
                   f"&& !(t.key in {hold})))",
                   "tolerations of the platform's hold taints are not allowed (" + ", ".join(HOLD_TAINTS)
                   + "), nor an Exists toleration without a key"))
    # The system group's taint keeps every pod that does not tolerate it off the controllers' nodes; a team pod
    # may not opt in, with any operator or effect (an Exists toleration without a key is refused above).
    checks.append((f"variables.specs.all(s, !has(s.tolerations) || "
                   f"s.tolerations.all(t, !has(t.key) || t.key != '{labels.SYSTEM_TAINT}'))",
                   f"tolerations of the system group's taint {labels.SYSTEM_TAINT} (it keeps that group to the "
                   "platform's controllers) are not allowed"))
    # Only the team's own service accounts exist in its namespace; of those, jobs run as `training`.
    checks.append((f"variables.specs.all(s, (!has(s.serviceAccountName) || s.serviceAccountName in "
                   f"['{labels.TRAINING_SERVICE_ACCOUNT}', 'default']) && (!has(s.serviceAccount) || "
                   f"s.serviceAccount in ['{labels.TRAINING_SERVICE_ACCOUNT}', 'default']))",
                   f"serviceAccountName must be {labels.TRAINING_SERVICE_ACCOUNT} (or default)"))
    # Accelerators only through the device plugins: with the NVIDIA container toolkit an NVIDIA_VISIBLE_DEVICES in
    # the container's environment selects GPUs the pod never requested (device_plugins.NVIDIA_DEVICE_SELECTION),
    # and the Neuron OCI hook does the same with AWS_NEURON_VISIBLE_DEVICES (fact neuron.oci-hook.visible-devices).
    # envFrom imports every key of a ConfigMap or Secret the team itself writes, under names admission never
    # sees: it needs a prefix, and one that no device-selecting name starts with (nor starts with one).
    checks.append((f"variables.specs.all(s, {_CONTAINERS}.all(c, (!has(c.env) || c.env.all(e, "
                   f"!({_device_env('e.name')}))) && (!has(c.envFrom) || c.envFrom.all(f, has(f.prefix) && "
                   f"f.prefix != '' && {_safe_env_prefix('f.prefix')}))))",
                   f"{', '.join(n + '*' for n in DEVICE_ENV_PREFIXES)} and {', '.join(DEVICE_ENV_NAMES)} environment "
                   "variables are not allowed (accelerators are selected by the device plugins from "
                   "resources.limits), nor envFrom without a prefix or with a prefix that could spell one "
                   "(use e.g. prefix APP_)"))
    # Images only from the team's sources (teams[].images; team_images.py): every container kind and image volumes.
    checks.append((f"variables.image_pattern != '' && variables.specs.all(s, {_CONTAINERS}.all(c, has(c.image) && "
                   "c.image.matches(variables.image_pattern)) && (!has(s.volumes) || s.volumes.all(v, !has(v.image) "
                   "|| (has(v.image.reference) && v.image.reference.matches(variables.image_pattern)))))",
                   "images (containers, initContainers, ephemeralContainers, image volumes) must come from the "
                   "team's registries and repositories, written with the registry host (teams[].images in the "
                   "cluster spec; default: the team's own ECR prefix <registry>/<team>/)"))
    checks.append((f"variables.specs.all(s, {_PRIORITY_CLASS_OK})",
                   "priorityClassName must be one of the team's allowed priorities "
                   "(teams[].allowed_priorities; Kueue and the scheduler would take the class's priority)"))
    return checks


def _allowed_map(spec: ClusterSpec) -> str:
    return "{" + ", ".join(f"'{t.name}': [{', '.join(repr(p) for p in allowed_priorities(spec, t))}]"
                           for t in spec.teams) + "}"


def _guarded(pods: str) -> list[str]:
    """CEL projections of ``pods`` (a list of objects with ``metadata`` and ``spec``: a Pod, or a JobSet's pod
    templates) onto what the pod-security checks read, one homogeneous list per part. The parts the platform's
    controllers change on objects they did not write are narrowed to what the checks judge: Kueue merges its
    flavor's node labels, tolerations, annotations and scheduling gates into templates and restores them on
    suspension (kueue@v0.19.2 pkg/podset/podset.go:45-54,179-200), its topology ungater adds a hostname selector
    (pkg/controller/tas/topology_ungater.go:305-316); so only the instance-group selector, the tolerations the
    checks refuse and the AppArmor annotations count."""
    tolerated = _cel_list((*HOLD_TAINTS, labels.SYSTEM_TAINT))
    return [
        f"{pods}.map(p, p.spec.containers)",
        f"{pods}.map(p, has(p.spec.initContainers) ? p.spec.initContainers : [])",
        f"{pods}.map(p, has(p.spec.ephemeralContainers) ? p.spec.ephemeralContainers : [])",
        f"{pods}.map(p, has(p.spec.volumes) ? p.spec.volumes : [])",
        f"{pods}.map(p, has(p.spec.securityContext) ? [p.spec.securityContext] : [])",
        f"{pods}.map(p, [has(p.spec.hostNetwork) && p.spec.hostNetwork, has(p.spec.hostPID) && p.spec.hostPID, "
        "has(p.spec.hostIPC) && p.spec.hostIPC])",
        f"{pods}.map(p, [has(p.spec.nodeName) ? p.spec.nodeName : '', "
        "has(p.spec.serviceAccountName) ? p.spec.serviceAccountName : '', "
        "has(p.spec.serviceAccount) ? p.spec.serviceAccount : '', "
        "has(p.spec.priorityClassName) ? p.spec.priorityClassName : '', "
        f"has(p.spec.nodeSelector) && '{labels.INSTANCE_GROUP}' in p.spec.nodeSelector ? "
        f"p.spec.nodeSelector['{labels.INSTANCE_GROUP}'] : ''])",
        f"{pods}.map(p, has(p.spec.tolerations) ? p.spec.tolerations.filter(t, !has(t.key) || t.key == '' || "
        f"t.key in {tolerated}) : [])",
        f"{pods}.map(p, has(p.metadata) && has(p.metadata.annotations) ? p.metadata.annotations.filter(k, "
        f"k.startsWith('{APPARMOR_ANNOTATION}')).map(k, k + '=' + p.metadata.annotations[k]) : [])",
    ]


def guarded_fields_changed(pods: str) -> str:
    """A matchCondition: the request is a CREATE, or an UPDATE that changes a guarded field (``pods`` is written
    over ``object``; the same over ``oldObject`` is compared). Pod Security Admission judges updates the same way:
    only a change that could weaken the pod is evaluated (pod-security-admission@v0.34.0
    admission/admission.go:370-387, isSignificantPodUpdate :632-671), so a controller's update of an object
    admitted under an earlier rule - Kueue suspending or ungating, the Job controller or the garbage collector
    removing a finalizer - passes after an upgrade tightens the rule, while a change of a guarded field is judged."""
    old = pods.replace("object", "oldObject")
    same = " && ".join(f"{part} == {old_part}" for part, old_part in zip(_guarded(pods), _guarded(old)))
    return f"request.operation == 'UPDATE' ? !({same}) : true"


def _image_map(spec: ClusterSpec) -> str:
    return "{" + ", ".join(f"'{t.name}': r'{team_images.pattern(spec, t)}'" for t in spec.teams) + "}"


def _pod_security(spec: ClusterSpec, name: str, rules: list[dict], pods: str,
                  node_name_checked: str) -> list[dict[str, Any]]:
    allowed, images = _allowed_map(spec), _image_map(spec)
    return policy_and_binding(
        name, rules,
        [{"expression": expr, "reason": "Forbidden",
          "message": f"{msg} in team namespaces ({POD_SECURITY_POLICY}; docs/security.md)"}
         for expr, msg in pod_security_checks(spec)],
        namespace_selector=team_namespaces(),
        match_conditions=[{"name": "create-or-guarded-fields-changed", "expression": guarded_fields_changed(pods)}],
        variables=[{"name": "team", "expression": f"namespaceObject.metadata.labels['{TEAM_LABEL}']"},
                   {"name": "pods", "expression": pods},
                   {"name": "specs", "expression": "variables.pods.map(p, p.spec)"},
                   {"name": "node_name_checked", "expression": node_name_checked},
                   {"name": "allowed", "expression": f"variables.team in {allowed} ? {allowed}[variables.team] : []"},
                   {"name": "image_pattern", "expression": f"variables.team in {images} ? {images}[variables.team] "
                                                           ": ''"}])


POD_OBJECTS = "[object]"
JOBSET_TEMPLATES = ("(has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.map(r, r.template.spec.template) "
                    ": [])")


def pod_security_policies(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Pods (every creator, controllers included) and JobSet pod templates (refused at submission); each judged on
    CREATE and on an UPDATE that changes a guarded field (``guarded_fields_changed``)."""
    return [
        *_pod_security(spec, POD_SECURITY_POLICY,
                       # kubectl debug adds containers through pods/ephemeralcontainers (UPDATE)
                       [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "pods/ephemeralcontainers"],
                         "operations": ["CREATE", "UPDATE"]}],
                       # A pod's nodeName is set by the scheduler's binding (pods/binding) and cannot change on
                       # UPDATE (ValidatePodUpdate), so it is refused at creation only: kubectl debug on a bound
                       # pod is an UPDATE of a pod with nodeName.
                       POD_OBJECTS, "request.operation == 'CREATE'"),
        *_pod_security(spec, POD_SECURITY_JOBSET_POLICY,
                       [{"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "resources": ["jobsets"],
                         "operations": ["CREATE", "UPDATE"]}],
                       JOBSET_TEMPLATES, "true"),
    ]


# ------------------------------------------------------------------------------------------ node scope
#
# ``openpod-node-agent-own-node`` (issue 10): the node-health DaemonSet's service account may update only
# the node its pod runs on. Its RBAC must allow patching nodes (Kubernetes RBAC cannot name "my node"),
# so a compromised agent pod could otherwise mark every node unhealthy and drain the cluster. A token
# bound to a pod carries the pod's node in ``authentication.kubernetes.io/node-name`` (KEP-4193,
# ServiceAccountTokenPodNodeInfo, beta and on by default since Kubernetes 1.30:
# https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/, checked 2026-11-23).

NODE_SCOPE_POLICY = "openpod-node-agent-own-node"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


def node_scope_policy() -> list[dict[str, Any]]:
    from node_agent.deploy import DETECTOR, NAMESPACE

    user = f"system:serviceaccount:{NAMESPACE}:{DETECTOR}"
    return policy_and_binding(
        NODE_SCOPE_POLICY,
        [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["nodes", "nodes/status"], "operations": ["UPDATE"]}],
        [{"expression": f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in request.userInfo.extra && "
                        f"object.metadata.name in request.userInfo.extra['{NODE_NAME_EXTRA}']",
          "reason": "Forbidden",
          "messageExpression": f"'{DETECTOR} may update only the node its pod runs on, not ' + object.metadata.name"}],
        match_conditions=[{"name": "the-node-health-agent", "expression": f"request.userInfo.username == '{user}'"}])


def admission_objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Every admission policy and binding the platform deploys for teams."""
    return team_queue_policy(spec) + pod_security_policies(spec) + restart_policy() + start_policy()
