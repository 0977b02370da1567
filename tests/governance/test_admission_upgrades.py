"""Admission across an upgrade that tightens a rule, and who may start a job.

A running job's objects were admitted under the earlier rule; after the upgrade the controllers keep sending
their UPDATEs (Kueue suspends, preempts and restores templates, its topology ungater releases pods, the JobSet
controller resumes child Jobs, the Job controller and the garbage collector remove finalizers, the kubelet writes
status): each must pass, or the job is stranded holding its quota. New objects are judged by the new rule, and a
team user changing a guarded field is refused. The requests are the lifecycle corpus's (each derived from its
sender's source, tests/governance/lifecycle_corpus.py); the policies are evaluated with cel-python (vap.py).
"""

from __future__ import annotations

import copy

import pytest

from infra.governance import admission, all_objects, pod_baseline
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES
from tests.governance import lifecycle_corpus as corpus
from tests.governance import vap
from tests.governance.test_lifecycle_conformance import installed

SPEC = load_spec(EXAMPLES / "default.yaml")
TEAM = SPEC.teams[0].name
NEW_HOLD_TAINT = "openpod.io/draining"


def _loose_priorities(spec):
    """``spec`` with its first team allowed every priority, inference included."""
    team = spec.teams[0].model_copy(update={"allowed_priorities": [p.name for p in spec.priorities]})
    return spec.model_copy(update={"teams": [team, *spec.teams[1:]]})


def _with_images(spec, images):
    team = spec.teams[0].model_copy(update={"images": images})
    return spec.model_copy(update={"teams": [team, *spec.teams[1:]]})


def _template_specs(js):
    return [rj["template"]["spec"]["template"]["spec"] for rj in js["spec"]["replicatedJobs"]]


def _uses_inference_class(js):
    for s in _template_specs(js):
        s["priorityClassName"] = "inference"


def _tolerates_draining(js):
    for s in _template_specs(js):
        s.setdefault("tolerations", []).append({"key": NEW_HOLD_TAINT, "operator": "Exists", "effect": "NoSchedule"})


def _runs_a_registry_image(js):
    for s in _template_specs(js):
        for c in s["containers"] + s.get("initContainers", []):
            c["image"] = "registry.example/train:1"


def _probes_the_node(js):
    for s in _template_specs(js):
        s["containers"][0]["readinessProbe"] = {"httpGet": {"host": "10.0.0.7", "port": 8080, "path": "/"}}


def _policies(spec, monkeypatch, patch: dict) -> list[dict]:
    """The policies ``spec`` installs with ``patch`` (module attribute -> value) in force."""
    for (module, name), value in patch.items():
        monkeypatch.setattr(module, name, value)
    out = installed(spec)
    monkeypatch.undo()
    return out


WITHOUT_PROBE_HOST = {k: v for k, v in getattr(pod_baseline, "CHECKS", {}).items() if k != "hostProbesAndHostLifecycle"}
# name: (spec before, spec after, code before, code after, the JobSet the team submitted before the upgrade)
UPGRADES = {
    # the team loses the inference priority; its running job's templates name that class
    "priority withdrawn": (_loose_priorities(SPEC), SPEC, {}, {}, _uses_inference_class),
    # a new release adds a hold taint the job's templates tolerated
    "hold taint added": (SPEC, SPEC, {}, {(admission, "HOLD_TAINTS"): (*admission.HOLD_TAINTS, NEW_HOLD_TAINT)},
                         _tolerates_draining),
    # the team's image sources narrow to the default (its own ECR prefix); the job runs an image from elsewhere
    "images narrowed": (_with_images(SPEC, ["registry.example/"]), SPEC, {}, {}, _runs_a_registry_image),
    # a new release adds a Baseline control (the probe host field, Baseline since 1.34)
    "Baseline control added": (SPEC, SPEC, {(pod_baseline, "CHECKS"): WITHOUT_PROBE_HOST}, {}, _probes_the_node),
}
CREATES = ("user creates the JobSet", "job controller creates the pod")


@pytest.mark.parametrize("upgrade", sorted(UPGRADES))
def test_a_running_jobs_controller_updates_pass_after_an_upgrade_tightens_a_rule(upgrade, monkeypatch):
    before, after, code_before, code_after, tweak = UPGRADES[upgrade]
    old_rule, new_rule = _policies(before, monkeypatch, code_before), _policies(after, monkeypatch, code_after)
    cases = corpus.lifecycle(before, TEAM, "gpu-openpod", tweak)
    for case in cases:      # the job ran under the earlier rule
        assert vap.denials(old_rule, case.request) == [], f"{case.name}: {vap.denials(old_rule, case.request)}"
    for case in cases:
        denied = vap.denials(new_rule, case.request)
        if case.name in CREATES:    # the new rule is tighter: new objects are judged by it
            assert denied, f"{case.name} was admitted: the upgrade did not tighten the rule"
        else:
            assert denied == [], f"{case.name} ({case.source}) was refused after the upgrade: {denied}"


def _suspended_running_jobset(tweak):
    """A JobSet the earlier rule admitted, as Kueue left it after preempting it (suspended, templates restored)."""
    return corpus.rendered(SPEC, TEAM, "gpu-openpod", tweak)


@pytest.mark.parametrize("change, message", [
    (lambda s: s["containers"][0].setdefault("securityContext", {}).update(privileged=True),
     "privileged containers are not allowed"),
    (lambda s: s.update(priorityClassName="system-node-critical"), "priorityClassName must be one of"),
    (lambda s: s["containers"][0].update(image="registry.example/other:2"), None),
], ids=["privileged", "another-class", "image"])
def test_a_team_user_changing_a_guarded_field_of_a_grandfathered_jobset_is_judged(change, message):
    """The earlier rule admitted a template with priorityClassName inference; after the upgrade the team user's
    own edit of a guarded field is judged against the whole new rule (as Pod Security Admission judges a
    significant pod update), so the grandfathered field no longer passes either."""
    old = _suspended_running_jobset(_uses_inference_class)
    new = copy.deepcopy(old)
    for s in _template_specs(new):
        change(s)
    req = corpus._r("UPDATE", "jobsets", new, old, user=vap.TEAM_USER, group="jobset.x-k8s.io", version="v1alpha2",
                    ns_labels={"openpod.io/team": TEAM})
    denied = vap.denials(installed(SPEC), req)
    assert denied, "a change of a guarded field was admitted"
    if message:
        assert any(message in d for d in denied), denied


def _inference_label_and_class(js):
    js["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "inference"
    _uses_inference_class(js)


def test_a_team_user_edit_that_leaves_the_guarded_fields_alone_passes():
    """Admitted while the team could use inference; the priority was withdrawn since. An edit of anything else
    passes every policy; turning the label back to inference after changing it is judged."""
    old = _suspended_running_jobset(_inference_label_and_class)
    new = copy.deepcopy(old)
    new["metadata"].setdefault("annotations", {})["note"] = "rerun with more steps"
    ns = {"openpod.io/team": TEAM}
    api = dict(group="jobset.x-k8s.io", version="v1alpha2")
    assert vap.denials(installed(SPEC), corpus._r("UPDATE", "jobsets", new, old, user=vap.TEAM_USER, ns_labels=ns,
                                                  **api)) == []
    lowered = copy.deepcopy(old)
    lowered["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "training"
    raised = copy.deepcopy(lowered)
    raised["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "inference"
    denied = vap.denials(installed(SPEC), corpus._r("UPDATE", "jobsets", raised, lowered, user=vap.TEAM_USER,
                                                    ns_labels=ns, **api))
    assert any("kueue.x-k8s.io/priority-class inference is not allowed" in d for d in denied), denied


# ------------------------------------------------------------------------------------------------ who starts


def _start(user, *, kind="JobSet", create=False, suspend_after=False):
    js = corpus.rendered(SPEC, TEAM, "gpu-openpod")
    ns = {"openpod.io/team": TEAM}
    if kind == "Job":
        obj = corpus.job_of(js)
        api = dict(group="batch", version="v1")
        resource = "jobs"
    else:
        obj, api, resource = js, dict(group="jobset.x-k8s.io", version="v1alpha2"), "jobsets"
    before = copy.deepcopy(obj)
    before["spec"]["suspend"] = True
    after = copy.deepcopy(obj)
    after["spec"]["suspend"] = suspend_after
    if create:
        return corpus._r("CREATE", resource, after, user=user, ns_labels=ns, **api)
    return corpus._r("UPDATE", resource, after, before, user=user, ns_labels=ns, **api)


START = "turned to false only by Kueue"


def test_a_team_user_cannot_unsuspend_its_pending_jobset():
    denied = vap.denials(all_objects(SPEC), _start(vap.TEAM_USER))
    assert len(denied) == 1 and START in denied[0], denied
    assert vap.TEAM_USER in denied[0]


@pytest.mark.parametrize("user, kind, create, admitted", [
    (corpus.KUEUE_SA, "JobSet", False, True),            # Kueue admits the workload
    (vap.TEAM_USER, "JobSet", True, False),              # created running
    (vap.TEAM_USER, "JobSet", False, False),
    (corpus.JOBSET_SA, "JobSet", False, False),          # the JobSet controller never starts its own JobSet
    ("kubernetes-admin", "JobSet", False, False),        # nor does an administrator, outside Kueue
    (corpus.JOBSET_SA, "Job", True, True),               # child Job of an admitted JobSet
    (corpus.JOBSET_SA, "Job", False, True),              # resumed child Job
    (corpus.KUEUE_SA, "Job", False, True),               # a plain Job Kueue admits
    (vap.TEAM_USER, "Job", False, False),
], ids=["kueue", "team-create", "team-update", "jobset-controller", "admin", "jobset-creates-job",
        "jobset-resumes-job", "kueue-job", "team-job"])
def test_only_kueue_starts_a_queue_managed_job(user, kind, create, admitted):
    denied = [d for d in vap.denials(all_objects(SPEC), _start(user, kind=kind, create=create)) if START in d]
    assert (denied == []) is admitted, denied


def test_suspending_and_edits_of_a_suspended_jobset_are_not_matched():
    assert vap.denials(all_objects(SPEC), _start(vap.TEAM_USER, suspend_after=True)) == []
    assert not any(START in d for d in vap.denials(all_objects(SPEC), _start(vap.TEAM_USER, suspend_after=True,
                                                                                create=True)))
