"""The admission requests real components send over a team job's life, and the attacks a team may try.

Each entry is derived from the sending component's source at the version the platform pins (Kubernetes: the
spec's EKS version 1.34; Kueue v0.19.2; JobSet v0.12.0; the node agent: this repository), cited in ``source``.
Kubernetes is cited by file and function at the v1.34.0 tag (its repository is too large to mirror here, so
line numbers are not given for it); Kueue and JobSet by file:line at their tags (read 2026-11-25).

How a write reaches validating admission (kubernetes.io/docs/reference/access-authn-authz/extensible-admission-
controllers/, "Matching requests"; checked 2026-11-25): a PATCH is presented as operation UPDATE with the patched
whole object and the stored old object; a subresource (pods/binding, pods/status, pods/eviction) has its own
resource string, so a rule on ``pods`` does not see it; DELETE has a null ``object``.

Entries carry ``family`` (which source they come from). The whole corpus was written from the sources before
any policy was changed, and no entry was edited afterwards to make a policy pass. The rule changes were those
issue 23 names, driven by the ``TUNE`` families' failures (Job controller finalizer removal; pod attacks); the
``HELD_OUT`` families were only run, never used to shape a rule.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from infra.governance import job_request, jobset
from infra.governance.admission import QUEUE_LABEL
from infra.governance.install import JOBSET_NAMESPACE, KUEUE_NAMESPACE
from infra.governance.queues import TEAM_LABEL, resource_flavor
from infra.spec.cluster import ClusterSpec
from openpod_core import labels as L
from tests.governance.vap import TEAM_USER, Request

K8S = "kubernetes/kubernetes@v1.34.0"
KUEUE = "kubernetes-sigs/kueue@v0.19.2"
JOBSET = "kubernetes-sigs/jobset@v0.12.0"

JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
SCHEDULER = "system:kube-scheduler"
KUBELET = "system:node:ip-10-0-1-5.ec2.internal"
KUEUE_SA = f"system:serviceaccount:{KUEUE_NAMESPACE}:kueue-controller-manager"
JOBSET_SA = f"system:serviceaccount:{JOBSET_NAMESPACE}:jobset-controller"
DETECTOR = "system:serviceaccount:openpod-system:node-health-agent"
REMEDIATION = "system:serviceaccount:openpod-system:node-remediation"
NODE = "ip-10-0-1-5.ec2.internal"
TRACKING = "batch.kubernetes.io/job-tracking"

# Submit modes: every runtime and fault-tolerance mode ``openpod submit`` renders (job_request.RUNTIMES,
# FAULT_TOLERANCE, RESTARTS), on a GPU group and a Neuron group.
MODES = {
    "gpu-torchrun": dict(accelerator="nvidia", runtime="torchrun"),
    "gpu-openpod": dict(accelerator="nvidia", runtime="openpod"),
    "gpu-openpod-replica": dict(accelerator="nvidia", runtime="openpod", fault_tolerance="replica"),
    "gpu-openpod-in-process": dict(accelerator="nvidia", runtime="openpod", restart="in-process"),
    "neuron-torchrun": dict(accelerator="neuron", runtime="torchrun"),
    # a group with taints of its own: Kueue merges the flavor's tolerations into the templates
    "tainted-gpu-torchrun": dict(accelerator="nvidia", runtime="torchrun", tainted=True),
}

TUNE = ("submit", "job-controller", "kueue", "attack-pod")
HELD_OUT = ("scheduler", "kubelet", "jobset", "gc", "namespace", "node-agent", "attack-jobset", "attack-node")


@dataclass
class Case:
    name: str
    family: str
    source: str
    request: Request
    deny: str | None = None          # None: must be admitted; else a substring of the denial naming the rule


def group_for(spec: ClusterSpec, accelerator: str, tainted: bool = False) -> str | None:
    """The first queued group of the spec with that accelerator (not an UltraServer group; with ``tainted``, one
    with taints of its own), or None."""
    from infra.governance.queues import queued_groups
    return next((g.name for g in queued_groups(spec)
                 if g.type.accelerator.value == accelerator and not g.type.ultraserver
                 and (bool(g.taints) or not tainted)), None)


def team_image(spec: ClusterSpec, team: str) -> str:
    """An image from the team's own ECR prefix (the default of teams[].images)."""
    return f"{spec.account or '111122223333'}.dkr.ecr.{spec.region}.amazonaws.com/{team}/train:1"


def submit_request(spec: ClusterSpec, team: str, mode: str) -> jobset.JobRequest:
    m = dict(MODES[mode])
    group = group_for(spec, m.pop("accelerator"), m.pop("tainted", False))
    script = ("--steps", "10", "--global-batch", "64") if m["runtime"] == "openpod" else ("train.py",)
    return jobset.JobRequest(name="llama", team=team, group=group, image=team_image(spec, team), nodes=2,
                             script=script, **m)


def rendered(spec: ClusterSpec, team: str, mode: str, tweak=None) -> dict:
    """The JobSet ``openpod submit`` builds; ``tweak`` (JobSet -> None) edits it before anything derives from it
    (the upgrade tests: a JobSet an earlier rule admitted)."""
    req = submit_request(spec, team, mode)
    jobset.validate(spec, req)
    js = jobset.build(spec, req)
    js["metadata"].setdefault("uid", "6f1c0c1e-0000-4000-8000-000000000001")
    if tweak is not None:
        tweak(js)
    return js


def admitted_jobset(spec: ClusterSpec, js: dict) -> dict:
    """The JobSet after Kueue admits it: ``RunWithPodSetsInfo`` unsuspends it and merges the flavor's node labels,
    tolerations and (TAS) the topology scheduling gate into every template (KUEUE
    pkg/controller/jobs/jobset/jobset_controller.go:138-155, pkg/podset/podset.go:60-92, :181)."""
    out = copy.deepcopy(js)
    out["spec"]["suspend"] = False
    for rj in out["spec"]["replicatedJobs"]:
        tmpl = rj["template"]["spec"]["template"]
        group = tmpl["spec"]["nodeSelector"][L.INSTANCE_GROUP]
        flavor = resource_flavor(next(g for g in spec.instance_groups if g.name == group))["spec"]
        tmpl["spec"]["nodeSelector"].update(flavor["nodeLabels"])
        for t in flavor.get("tolerations", []):
            if t not in tmpl["spec"].setdefault("tolerations", []):
                tmpl["spec"]["tolerations"].append(t)
        tmpl["spec"].setdefault("schedulingGates", []).append({"name": "kueue.x-k8s.io/topology"})
        tmpl.setdefault("metadata", {}).setdefault("annotations", {})["kueue.x-k8s.io/podset-unconstrained-topology"] = "true"
    return out


def job_of(js: dict, index: int = 0) -> dict:
    """The Job the JobSet controller creates (JOBSET pkg/controllers/jobset_controller.go:938-1045, constructJob:
    the template, the JobSet's labels and annotations, suspend as the JobSet's)."""
    rj = js["spec"]["replicatedJobs"][0]
    name = f"{js['metadata']['name']}-{rj['name']}-{index}"
    lbl = {"jobset.sigs.k8s.io/jobset-name": js["metadata"]["name"],
           "jobset.sigs.k8s.io/replicatedjob-name": rj["name"], "jobset.sigs.k8s.io/restart-attempt": "0",
           "jobset.sigs.k8s.io/job-index": str(index), QUEUE_LABEL: js["metadata"]["labels"][QUEUE_LABEL]}
    spec = copy.deepcopy(rj["template"]["spec"])
    spec["suspend"] = bool(js["spec"].get("suspend", False))
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": js["metadata"]["namespace"], "labels": lbl,
                         "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                              "name": js["metadata"]["name"], "controller": True,
                                              "uid": js["metadata"]["uid"]}]},
            "spec": spec}


def pod_of(job: dict, index: int = 0) -> dict:
    """The Pod the Job controller creates: the template with the job labels and the tracking finalizer
    (K8S pkg/controller/job/job_controller.go, manageJob / appendJobCompletionFinalizerIfNotFound), then the
    API server's defaults (K8S pkg/apis/core/v1/defaults.go SetDefaults_PodSpec; the DefaultTolerationSeconds
    admission plugin, plugin/pkg/admission/defaulttolerationseconds)."""
    tmpl = job["spec"]["template"]
    meta = copy.deepcopy(tmpl.get("metadata", {}))
    meta.update(name=f"{job['metadata']['name']}-{index}-x7k2p", namespace=job["metadata"]["namespace"],
                finalizers=[TRACKING],
                ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
                                  "controller": True, "blockOwnerDeletion": True}])
    meta.setdefault("labels", {}).update({"batch.kubernetes.io/job-name": job["metadata"]["name"],
                                          "batch.kubernetes.io/job-completion-index": str(index)})
    spec = copy.deepcopy(tmpl["spec"])
    spec.setdefault("restartPolicy", "Never")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec.setdefault("tolerations", [])
    spec["tolerations"] += [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}]
    spec["priority"] = 0
    spec["enableServiceLinks"] = True
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def bound(pod: dict) -> dict:
    """After the scheduler's binding (the API server's binding storage sets spec.nodeName: K8S
    pkg/registry/core/pod/storage/storage.go, BindingREST.setPodNodeAndMetadata)."""
    out = copy.deepcopy(pod)
    out["spec"]["nodeName"] = NODE
    out["spec"].pop("schedulingGates", None)
    out["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return out


def _debugged(pod: dict) -> dict:
    out = copy.deepcopy(pod)
    out["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox:1.36", "targetContainerName":
                                           out["spec"]["containers"][0]["name"],
                                           "securityContext": {"allowPrivilegeEscalation": False}}]
    return out


def _r(op, resource, obj=None, old=None, *, user, ns_labels, sub="", group="", version="v1", ns=None,
       name=None, kind="", extra=None, verb="") -> Request:
    o = obj if obj is not None else old
    return Request(operation=op, resource=resource, subresource=sub, group=group, version=version,
                   namespace=ns if ns is not None else (o or {}).get("metadata", {}).get("namespace", ""),
                   name=name or (o or {}).get("metadata", {}).get("name", ""), object=obj, old_object=old,
                   user=user, namespace_labels=ns_labels, kind=kind or (o or {}).get("kind", ""),
                   extra=extra or {}, verb=verb)


def lifecycle(spec: ClusterSpec, team: str, mode: str, tweak=None) -> list[Case]:
    """Every request of one job's life in ``mode``, from submit to namespace deletion; all must be admitted."""
    ns = {TEAM_LABEL: team, "kubernetes.io/metadata.name": team}
    js = rendered(spec, team, mode, tweak)
    adm = admitted_jobset(spec, js)
    job = job_of(adm)
    pod = pod_of(job)
    on_node = bound(pod)
    running = copy.deepcopy(on_node)
    running["status"]["containerStatuses"] = [{"name": "trainer", "ready": True, "restartCount": 0}]
    done = copy.deepcopy(running)
    done["status"]["phase"] = "Succeeded"
    released = copy.deepcopy(done)
    released["metadata"]["finalizers"] = []
    gated_pod = copy.deepcopy(pod)
    ungated = copy.deepcopy(pod)
    ungated["spec"].pop("schedulingGates", None)
    ungated["spec"]["nodeSelector"]["kubernetes.io/hostname"] = NODE
    suspended = copy.deepcopy(adm)
    suspended["spec"]["suspend"] = True
    labelled = copy.deepcopy(adm)
    labelled["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/workload"] = "jobset-llama-abc12"
    job_done = copy.deepcopy(job)
    job_done["status"] = {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}
    job_fg = copy.deepcopy(job)
    job_fg["metadata"]["finalizers"] = ["foregroundDeletion"]
    job_fg_clear = copy.deepcopy(job_fg)
    job_fg_clear["metadata"]["finalizers"] = []
    restarted = job_of(adm)
    restarted["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "1"
    js_api = dict(group="jobset.x-k8s.io", version="v1alpha2")
    job_api = dict(group="batch", version="v1")
    nsobj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team, "labels": ns}}
    nsobj_terminating = copy.deepcopy(nsobj)
    nsobj_terminating["status"] = {"phase": "Terminating"}
    u = dict(ns_labels=ns)
    return [
        Case("user creates the JobSet", "submit", "infra/governance/jobset.py build (openpod submit)",
             _r("CREATE", "jobsets", js, user=TEAM_USER, **js_api, **u)),
        Case("kueue unsuspends and injects the flavor", "kueue",
             f"{KUEUE}:pkg/controller/jobframework/reconciler.go:1480-1511 (startJob, Patch); "
             "pkg/controller/jobs/jobset/jobset_controller.go:138-155",
             _r("UPDATE", "jobsets", adm, js, user=KUEUE_SA, **js_api, **u)),
        Case("kueue sets its workload annotation", "kueue",
             f"{KUEUE}:pkg/controller/jobframework/reconciler.go (ensureOneWorkload / Patch of the job object)",
             _r("UPDATE", "jobsets", labelled, adm, user=KUEUE_SA, **js_api, **u)),
        Case("jobset creates the child Job", "jobset", f"{JOBSET}:pkg/controllers/jobset_controller.go:731-760",
             _r("CREATE", "jobs", job, user=JOBSET_SA, **job_api, **u)),
        Case("jobset unsuspends its child Job with the admitted node selector", "jobset",
             f"{JOBSET}:pkg/controllers/jobset_controller.go:577-680 (resumeJobsIfNecessary, resumeJob: the "
             "template's nodeSelector and tolerations, then suspend false)",
             _r("UPDATE", "jobs", {**copy.deepcopy(job), "spec": {**copy.deepcopy(job["spec"]), "suspend": False}},
                {**copy.deepcopy(job), "spec": {**copy.deepcopy(job["spec"]), "suspend": True}},
                user=JOBSET_SA, **job_api, **u)),
        Case("job controller creates the pod", "job-controller",
             f"{K8S}:pkg/controller/job/job_controller.go manageJob -> podControl.CreatePodsWithGenerateName",
             _r("CREATE", "pods", gated_pod, user=JOB_CONTROLLER, **u)),
        Case("kueue TAS ungates the pod with its domain's node selector", "kueue",
             f"{KUEUE}:pkg/controller/tas/topology_ungater.go:305-316",
             _r("UPDATE", "pods", ungated, gated_pod, user=KUEUE_SA, **u)),
        Case("scheduler binds the pod", "scheduler",
             f"{K8S}:pkg/scheduler/framework/plugins/defaultbinder/default_binder.go Bind (Pods().Bind, "
             "CREATE pods/binding)",
             _r("CREATE", "pods", {"apiVersion": "v1", "kind": "Binding",
                                   "metadata": {"name": pod["metadata"]["name"], "namespace": team},
                                   "target": {"kind": "Node", "name": NODE}},
                user=SCHEDULER, sub="binding", name=pod["metadata"]["name"], **u)),
        Case("kubelet reports status", "kubelet",
             f"{K8S}:pkg/kubelet/status/status_manager.go syncPod (PatchPodStatus, pods/status)",
             _r("UPDATE", "pods", running, on_node, user=KUBELET, sub="status", **u)),
        Case("job controller removes its finalizer from the finished, bound pod", "job-controller",
             f"{K8S}:pkg/controller/job/job_controller.go removeTrackingFinalizerPatch + podControl.PatchPod "
             "($deleteFromPrimitiveList/finalizers)",
             _r("UPDATE", "pods", released, done, user=JOB_CONTROLLER, **u)),
        Case("job controller deletes a failed pod", "job-controller",
             f"{K8S}:pkg/controller/job/job_controller.go deleteActivePods / deleteJobPods (podControl.DeletePod)",
             _r("DELETE", "pods", None, done, user=JOB_CONTROLLER, **u)),
        Case("job controller writes the Job status", "job-controller",
             f"{K8S}:pkg/controller/job/job_controller.go updateStatusHandler (jobs/status)",
             _r("UPDATE", "jobs", job_done, job, user=JOB_CONTROLLER, sub="status", **job_api, **u)),
        Case("jobset restart deletes the child Job (foreground)", "jobset",
             f"{JOBSET}:pkg/controllers/jobset_controller.go:761-781 (deleteJobs, PropagationPolicy Foreground)",
             _r("DELETE", "jobs", None, job, user=JOBSET_SA, **job_api, **u)),
        Case("garbage collector clears the foreground finalizer", "gc",
             f"{K8S}:pkg/controller/garbagecollector/garbagecollector.go attemptToDeleteItem (removeFinalizer)",
             _r("UPDATE", "jobs", job_fg_clear, job_fg, user=GC, **job_api, **u)),
        Case("jobset re-creates the Job with the next restart attempt", "jobset",
             f"{JOBSET}:pkg/controllers/jobset_controller.go:938-1045 (constructJob, restart-attempt label)",
             _r("CREATE", "jobs", restarted, user=JOBSET_SA, **job_api, **u)),
        Case("kueue suspends the JobSet (preemption)", "kueue",
             f"{KUEUE}:pkg/controller/jobframework/reconciler.go:1522-1560 (stopJob); "
             "pkg/controller/jobs/jobset/jobset_controller.go:103-105 (Suspend)",
             _r("UPDATE", "jobsets", suspended, adm, user=KUEUE_SA, **js_api, **u)),
        Case("kueue restores the templates on suspension", "kueue",
             f"{KUEUE}:pkg/controller/jobs/jobset/jobset_controller.go:157-172 (RestorePodSetsInfo)",
             _r("UPDATE", "jobsets", {**copy.deepcopy(js), "spec": {**copy.deepcopy(js["spec"]), "suspend": True}},
                suspended, user=KUEUE_SA, **js_api, **u)),
        Case("node agent evicts the pod from a failing node", "node-agent",
             "node_agent/kube.py evict_pod (CREATE pods/eviction)",
             _r("CREATE", "pods", {"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": pod["metadata"]["name"], "namespace": team}},
                user=REMEDIATION, sub="eviction", name=pod["metadata"]["name"], **u)),
        Case("user deletes the JobSet", "submit", "openpod cancel / kubectl delete jobset",
             _r("DELETE", "jobsets", None, adm, user=TEAM_USER, **js_api, **u)),
        Case("namespace deletion marks the namespace", "namespace",
             f"{K8S}:pkg/registry/core/namespace/storage/storage.go Delete (UPDATE to Terminating, then DELETE)",
             _r("DELETE", "namespaces", None, nsobj, user="kubernetes-admin", ns="", **u)),
        Case("namespace controller deletes the team's pods", "namespace",
             f"{K8S}:pkg/controller/namespace/deletion/namespaced_resources_deleter.go deleteCollection",
             _r("DELETE", "pods", None, on_node, user=NAMESPACE_CONTROLLER, **u)),
        Case("namespace controller deletes the team's JobSets", "namespace",
             f"{K8S}:pkg/controller/namespace/deletion/namespaced_resources_deleter.go deleteCollection",
             _r("DELETE", "jobsets", None, adm, user=NAMESPACE_CONTROLLER, **js_api, **u)),
        Case("job controller releases a pod of a deleted Job", "job-controller",
             f"{K8S}:pkg/controller/job/job_controller.go cleanupPodFinalizers / enqueueOrphanPod",
             _r("UPDATE", "pods", released, done, user=JOB_CONTROLLER, **u)),
        Case("namespace controller finalizes the namespace", "namespace",
             f"{K8S}:pkg/controller/namespace/deletion/namespaced_resources_deleter.go finalizeNamespace "
             "(namespaces/finalize)",
             _r("UPDATE", "namespaces", nsobj_terminating, nsobj_terminating, user=NAMESPACE_CONTROLLER,
                sub="finalize", ns="", **u)),
    ]


def node_agent_cases() -> list[Case]:
    """The node agent's own writes (node_agent/kube.py patch_node: a merge patch on the node, UPDATE)."""
    n = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {}}, "spec": {}}
    cordoned = copy.deepcopy(n)
    cordoned["spec"]["unschedulable"] = True
    tainted = copy.deepcopy(n)
    tainted["spec"]["taints"] = [{"key": L.UNHEALTHY_TAINT, "value": "true", "effect": "NoSchedule"}]
    labelled = copy.deepcopy(n)
    labelled["metadata"]["labels"][L.ULTRASERVER_ID] = "us-a1b2"
    other = copy.deepcopy(tainted)
    other["metadata"]["name"] = "ip-10-0-9-9.ec2.internal"
    own = {"authentication.kubernetes.io/node-name": [NODE]}
    src = "node_agent/kube.py:381-400 (patch_node)"
    return [
        Case("remediation controller cordons a node", "node-agent", src,
             _r("UPDATE", "nodes", cordoned, n, user=REMEDIATION, ns_labels=None)),
        Case("remediation controller taints a node", "node-agent", src,
             _r("UPDATE", "nodes", tainted, n, user=REMEDIATION, ns_labels=None)),
        Case("remediation controller labels an UltraServer node", "node-agent", "node_agent/topology.py",
             _r("UPDATE", "nodes", labelled, n, user=REMEDIATION, ns_labels=None)),
        Case("detector labels its own node's NVLink domain", "node-agent", "node_agent/topology.py "
             "label_own_nvlink_domain", _r("UPDATE", "nodes", labelled, n, user=DETECTOR, ns_labels=None, extra=own)),
        Case("detector taints its own node", "node-agent", src,
             _r("UPDATE", "nodes", tainted, n, user=DETECTOR, ns_labels=None, extra=own)),
        Case("detector taints another node", "attack-node", src,
             _r("UPDATE", "nodes", other, {**other, "spec": {}}, user=DETECTOR, ns_labels=None, extra=own),
             deny="node-health-agent may update only the node its pod runs on"),
    ]


def _pod_attack(spec: ClusterSpec, team: str, change) -> Request:
    pod = pod_of(job_of(admitted_jobset(spec, rendered(spec, team, "gpu-openpod"))))
    pod["spec"].pop("schedulingGates", None)
    change(pod)
    return _r("CREATE", "pods", pod, user=JOB_CONTROLLER, ns_labels={TEAM_LABEL: team})


def _js_attack(spec: ClusterSpec, team: str, change) -> Request:
    js = rendered(spec, team, "gpu-openpod")
    change(js)
    return _r("CREATE", "jobsets", js, user=TEAM_USER, group="jobset.x-k8s.io", version="v1alpha2",
              ns_labels={TEAM_LABEL: team})


def _c(pod_or_tmpl: dict) -> dict:
    return pod_or_tmpl["spec"]["containers"][0]


def _tmpl(js: dict) -> dict:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def attacks(spec: ClusterSpec, team: str, other: str) -> list[Case]:
    """What a hostile team user tries; each must be denied with a message naming the rule."""
    src = "docs/security.md threat model (team user is hostile)"
    P = "attack-pod"
    J = "attack-jobset"

    def sc(**kw):
        return lambda p: _c(p).setdefault("securityContext", {}).update(kw)

    def vol(v):
        return lambda p: p["spec"]["volumes"].append(v)

    def mount(m):
        return lambda p: _c(p)["volumeMounts"].append(m)

    def env(name, value):
        return lambda p: _c(p).setdefault("env", []).append({"name": name, "value": value})

    pod_cases = [
        ("privileged container", sc(privileged=True), "privileged containers are not allowed"),
        ("SYS_ADMIN capability", sc(capabilities={"add": ["SYS_ADMIN"]}), "capabilities.add may only hold"),
        ("host network", lambda p: p["spec"].update(hostNetwork=True), "hostNetwork, hostPID and hostIPC"),
        ("hostPath to the host root", vol({"name": "root", "hostPath": {"path": "/"}}), "hostPath volumes"),
        ("NVIDIA_VISIBLE_DEVICES=all", env("NVIDIA_VISIBLE_DEVICES", "all"), "NVIDIA_"),
        ("NVIDIA_VISIBLE_DEVICES by index", env("NVIDIA_VISIBLE_DEVICES", "0,1"), "NVIDIA_"),
        ("CUDA device selection via NVIDIA_DRIVER_CAPABILITIES", env("NVIDIA_DRIVER_CAPABILITIES", "all"),
         "NVIDIA_"),
        ("FSx subPath under the team dir (symlink escape)",
         mount({"name": "fsx", "mountPath": "/x", "subPath": f"{team}/x"}), "fsx-lustre claim"),
        ("FSx another team's dir", mount({"name": "fsx", "mountPath": "/x", "subPath": other}), "fsx-lustre claim"),
        ("FSx datasets read-write", mount({"name": "fsx", "mountPath": "/x", "subPath": "datasets"}),
         "fsx-lustre claim"),
        ("FSx datasets subdirectory (symlink escape)",
         mount({"name": "fsx", "mountPath": "/x", "subPath": "datasets/x", "readOnly": True}), "fsx-lustre claim"),
        ("priorityClassName of a class the team may not use",
         lambda p: p["spec"].update(priorityClassName="inference"), "priorityClassName"),
        ("nodeName at creation", lambda p: p["spec"].update(nodeName=NODE), "may not set nodeName"),
        ("SELinux type spc_t (unconfined)", sc(seLinuxOptions={"type": "spc_t"}), "seLinuxOptions: type must be"),
        ("readiness probe against another host",
         lambda p: _c(p).update(readinessProbe={"httpGet": {"host": "169.254.169.254", "port": 80, "path": "/"}}),
         "probes and lifecycle handlers may not set host"),
        ("preStop hook against another host",
         lambda p: _c(p).update(lifecycle={"preStop": {"tcpSocket": {"host": "10.0.0.9", "port": 988}}}),
         "probes and lifecycle handlers may not set host"),
        ("Windows host process", sc(windowsOptions={"hostProcess": True}), "windowsOptions.hostProcess"),
        ("AWS_NEURON_VISIBLE_DEVICES=ALL", env("AWS_NEURON_VISIBLE_DEVICES", "ALL"), "AWS_NEURON_VISIBLE_DEVICES"),
        ("envFrom a team Secret without prefix (it can hold NVIDIA_VISIBLE_DEVICES)",
         lambda p: _c(p).update(envFrom=[{"secretRef": {"name": "mine"}}]), "nor envFrom without a prefix"),
    ]
    out = [Case(n, P, src, _pod_attack(spec, team, ch), deny=d) for n, ch, d in pod_cases]
    # The team Role grants no pod writes: RBAC refuses these before admission (tests/governance/rbac.py); the
    # policies refuse them too (tests/governance/test_admission.py, test_pod_security.py).
    bare = _pod_attack(spec, team, lambda p: None)
    bare.user = TEAM_USER
    out.append(Case("bare Pod by a team user", P, src, bare, deny="forbidden by RBAC"))
    running = bound(_pod_attack(spec, team, lambda p: None).object)
    out.append(Case("team user attaches a debug container to a running pod (kubectl debug)", P,
                    f"{K8S}:staging/src/k8s.io/kubectl/pkg/cmd/debug/debug.go (debugByEphemeralContainer: PATCH of "
                    "pods/ephemeralcontainers)",
                    _r("UPDATE", "pods", _debugged(running), running, user=TEAM_USER, sub="ephemeralcontainers",
                       ns_labels={TEAM_LABEL: team}, verb="patch"),
                    deny="forbidden by RBAC"))

    def js_sc(**kw):
        return lambda js: _c(_tmpl(js)).setdefault("securityContext", {}).update(kw)

    def drop_queue(js):
        del js["metadata"]["labels"][QUEUE_LABEL]

    def drop_priority_set_class(js):
        js["metadata"]["labels"].pop("kueue.x-k8s.io/priority-class", None)
        _tmpl(js)["spec"]["priorityClassName"] = "inference"

    js_cases = [
        ("missing queue label", drop_queue, f"{QUEUE_LABEL} must be {team}"),
        ("another team's queue", lambda js: js["metadata"]["labels"].update({QUEUE_LABEL: other}),
         f"{QUEUE_LABEL} must be {team}"),
        ("privileged template", js_sc(privileged=True), "privileged containers are not allowed"),
        ("NVIDIA_VISIBLE_DEVICES in the template",
         lambda js: _c(_tmpl(js)).setdefault("env", []).append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}),
         "NVIDIA_"),
        ("priority label the team may not use",
         lambda js: js["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": "inference"}),
         "is not allowed for team"),
        ("priorityClassName instead of the label (Kueue falls back to it)", drop_priority_set_class,
         "priorityClassName"),
        ("AppArmor unconfined by annotation on the template",
         lambda js: _tmpl(js).setdefault("metadata", {}).setdefault("annotations", {}).update(
             {"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}),
         "container.apparmor.security.beta.kubernetes.io"),
        ("created running (suspend false)", lambda js: js["spec"].update(suspend=False),
         "turned to false only by Kueue"),
    ]
    out += [Case(n, J, src, _js_attack(spec, team, ch), deny=d) for n, ch, d in js_cases]
    pending = rendered(spec, team, "gpu-openpod")
    started = copy.deepcopy(pending)
    started["spec"]["suspend"] = False
    out.append(Case("team user unsuspends its pending JobSet", J,
                    "kubectl patch jobset --type merge -p '{\"spec\":{\"suspend\":false}}' (the team Role may "
                    "patch its JobSets)",
                    _r("UPDATE", "jobsets", started, pending, user=TEAM_USER, group="jobset.x-k8s.io",
                       version="v1alpha2", ns_labels={TEAM_LABEL: team}, verb="patch"),
                    deny="turned to false only by Kueue"))
    return out
