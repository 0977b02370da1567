"""A lost replica group restarts alone: the platform's JobSet controller runs with the ``RestartJob`` feature gate
on, and a replica-mode JobSet carries the failure-policy rule that restarts only the failed group's child Job.

Upstream (kubernetes-sigs/jobset@v0.12.0): the gate is alpha and off by default (pkg/features/features.go:73);
the controller takes gates only from its configuration file (main.go:111-120); the chart mounts that file from
its own ConfigMap, which has no featureGates (charts/jobset/templates/controller/configmap.yaml:24-37,
deployment.yaml:51-53,62-65,113-116)."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from infra.governance import install, job_fault_tolerance, job_launcher, job_request, job_validation, jobset
from infra.spec.loading import load_spec
from tests.conftest import ROOT
from tests.governance import jobset_webhook, k8s_schema
from tests.governance.test_submit_replica import REPLICA, SPEC_PATH, TRAINING_ARGS, dry_run

GITOPS_EXAMPLE = ROOT / "examples" / "gitops" / "jobset-helmrelease.yaml"


# ------------------------------------------------------------------ the controller's configuration

# Fields chart 0.12.0 renders on the two objects the platform patches (default values plus install.jobset_values),
# as kubernetes-sigs/jobset@v0.12.0:charts/jobset/templates/controller/configmap.yaml:17-37 and deployment.yaml:17-150
# write them. Helm 4.1.3 (the CDK kubectl layer's) upgrades by server-side apply without --force-conflicts
# (helm/helm@v4.1.3:pkg/cmd/upgrade.go:156-157,279-280), so a patch that changed one of these would make the next
# `helm upgrade` of the release fail with a field-manager conflict; a patch may only add fields next to them.
CHART_CONFIG_MAP_FIELDS = {"metadata.name", "metadata.namespace", "metadata.labels", "data.controller_manager_config.yaml"}
CHART_DEPLOYMENT_FIELDS = {
    "metadata.name", "metadata.namespace", "metadata.labels", "spec.replicas", "spec.selector",
    "spec.template.metadata.labels", "spec.template.metadata.annotations.jobset.x-k8s.io/config-hash",
    "spec.template.spec.containers[name=controller]",
    "spec.template.spec.volumes[name=manager-config].name",
    "spec.template.spec.volumes[name=manager-config].configMap.name",
    "spec.template.spec.volumes[name=webhook-cert]", "spec.template.spec.nodeSelector",
    "spec.template.spec.securityContext", "spec.template.spec.serviceAccountName",
}
# The chart's own file at its defaults (configmap.yaml:27-37 with values.yaml:36-43, release "jobset"): no gates.
CHART_FILE = {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
              "leaderElection": {"leaderElect": True}, "clientConnection": {"qps": 500, "burst": 500},
              "internalCertManagement": {"enable": True, "webhookServiceName": "jobset-webhook-service",
                                         "webhookSecretName": "jobset-webhook-server-cert"}}


def leaves(obj, path=""):
    """Field paths a patch sets: list entries keyed by name, as strategic merge and server-side apply key them."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, list) and obj and all(isinstance(x, dict) and "name" in x for x in obj):
        for x in obj:
            yield from leaves({k: v for k, v in x.items() if k != "name"}, f"{path}[name={x['name']}]")
    else:
        yield path


def overlaps(patch_paths, chart_paths):
    return sorted(p for p in patch_paths for c in chart_paths
                  if p == c or p.startswith(c + ".") or p.startswith(c + "[") or c.startswith(p + "."))


def test_the_controller_reads_a_file_with_the_restart_job_gate_and_the_charts_settings():
    cfg = install.jobset_manager_config()
    assert jobset_webhook.gates(cfg)["RestartJob"] is True
    assert jobset_webhook.gates(CHART_FILE)["RestartJob"] is False  # the chart's own file: features.go:73
    assert {k: v for k, v in cfg.items() if k != "featureGates"} == CHART_FILE  # nothing else changes

    # The chart's objects, then the two patches as the API server merges them (merge patch; strategic merge with
    # volumes keyed by name). The controller reads the subPath controller_manager_config.yaml of volume
    # manager-config (deployment.yaml:62-65); with items, that path is the listed key's value (ConfigMapVolumeSource).
    data = {"controller_manager_config.yaml": yaml.safe_dump(CHART_FILE)}
    volume = {"name": "manager-config", "configMap": {"name": "jobset-controller-config"}}
    data.update(install.jobset_config_patch("0.12.0")["data"])
    (pv,) = install.jobset_controller_patch("0.12.0")["spec"]["template"]["spec"]["volumes"]
    assert pv["name"] == volume["name"]
    volume["configMap"].update(pv["configMap"])
    assert volume["configMap"]["name"] == "jobset-controller-config"
    files = {i["path"]: data[i["key"]] for i in volume["configMap"]["items"]}
    assert yaml.safe_load(files["controller_manager_config.yaml"]) == cfg
    assert data["controller_manager_config.yaml"] == yaml.safe_dump(CHART_FILE)  # the chart's key untouched


def test_the_patches_only_add_fields_next_to_the_charts_so_helm_upgrades_keep_working():
    cm = install.jobset_config_patch("0.12.0")
    dep = install.jobset_controller_patch("0.12.0")
    assert overlaps(set(leaves(cm)), CHART_CONFIG_MAP_FIELDS) == []
    assert overlaps(set(leaves(dep)), CHART_DEPLOYMENT_FIELDS) == []
    assert overlaps(set(leaves(install.jobset_controller_restore_patch())), CHART_DEPLOYMENT_FIELDS) == []
    # the check bites: pointing the chart's volume at another ConfigMap would conflict
    assert overlaps({"spec.template.spec.volumes[name=manager-config].configMap.name"}, CHART_DEPLOYMENT_FIELDS)


def test_a_changed_file_rolls_the_controller_and_a_chart_upgrade_reapplies_the_patches():
    tmpl = install.jobset_controller_patch("v0.12.0")["spec"]["template"]
    # a subPath mount is never refreshed: the file's hash in the pod template rolls the controller on a change
    text = install.jobset_config_patch("v0.12.0")["data"][install.JOBSET_OPENPOD_KEY]
    assert tmpl["metadata"]["annotations"][install.CONFIG_HASH_ANNOTATION] == hashlib.sha256(text.encode()).hexdigest()
    # CloudFormation re-applies a patch whose properties change: the chart version is one of them
    assert install.jobset_controller_patch("v0.12.0") != install.jobset_controller_patch("v0.13.0")
    assert install.jobset_config_patch("v0.12.0") != install.jobset_config_patch("v0.13.0")
    restore = install.jobset_controller_restore_patch()["spec"]["template"]["spec"]["volumes"]
    assert restore == [{"name": "manager-config", "configMap": {"items": []}}]  # every key again: the chart's file


def test_the_gitops_example_post_renders_the_same_patches():
    docs = list(yaml.safe_load_all(GITOPS_EXAMPLE.read_text()))
    (release,) = [d for d in docs if d["kind"] == "HelmRelease"]
    assert release["spec"]["chart"]["spec"]["version"] == "0.12.0"
    assert release["spec"]["releaseName"] == install.JOBSET_RELEASE
    assert release["spec"]["targetNamespace"] == install.JOBSET_NAMESPACE
    assert release["spec"]["values"] == install.jobset_values(load_spec(SPEC_PATH))
    (renderer,) = release["spec"]["postRenderers"]
    patches = {(p["target"]["kind"], p["target"]["name"]): yaml.safe_load(p["patch"])
               for p in renderer["kustomize"]["patches"]}
    assert set(patches) == {("ConfigMap", install.JOBSET_CONFIG_MAP), ("Deployment", install.JOBSET_CONTROLLER)}
    cm, dep = patches[("ConfigMap", install.JOBSET_CONFIG_MAP)], patches[("Deployment", install.JOBSET_CONTROLLER)]
    assert (cm["apiVersion"], cm["kind"], cm["metadata"]) == ("v1", "ConfigMap", {"name": install.JOBSET_CONFIG_MAP})
    assert cm["data"] == install.jobset_config_patch("0.12.0")["data"]
    assert (dep["apiVersion"], dep["kind"], dep["metadata"]) == ("apps/v1", "Deployment",
                                                                 {"name": install.JOBSET_CONTROLLER})
    assert dep["spec"] == install.jobset_controller_patch("0.12.0")["spec"]


# ------------------------------------------------------------------ the replica-mode JobSet


def test_replica_mode_restarts_only_the_failed_group_and_jobsets_webhook_accepts_it_only_with_the_gate():
    js = dry_run("--group", "p5", "--nodes", "2", *REPLICA, "--", *TRAINING_ARGS)
    if k8s_schema.schemas_present():
        assert k8s_schema.validate(js) == []  # the v0.12.0 CRD: rules[].action enum, name, lists
    fp = js["spec"]["failurePolicy"]
    assert fp["rules"] == [{"name": job_fault_tolerance.RESTART_GROUP_RULE, "action": "RestartJob",
                            "onJobFailureReasons": ["BackoffLimitExceeded"],
                            "targetReplicatedJobs": [job_launcher.REPLICATED_JOB]},
                           {"name": job_fault_tolerance.RESTART_LIGHTHOUSE_RULE, "action": "RestartJob",
                            "onJobFailureReasons": ["BackoffLimitExceeded"],
                            "targetReplicatedJobs": [job_launcher.LIGHTHOUSE_JOB]}]
    # the budget is the job's: RestartJob counts against maxRestarts with whole-JobSet restarts
    # (pkg/controllers/failure_policy.go:226,350,367,548-550)
    assert fp["maxRestarts"] == job_request.DEFAULT_MAX_RESTARTS and fp["restartStrategy"] == "BlockingRecreate"
    # a trainer pod's failure fails its Job with this reason: backoffLimit 0, no podFailurePolicy
    node = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == job_launcher.REPLICATED_JOB)
    assert node["template"]["spec"]["backoffLimit"] == 0 and "podFailurePolicy" not in node["template"]["spec"]
    on = jobset_webhook.gates(install.jobset_manager_config())
    off = jobset_webhook.gates(None)
    assert jobset_webhook.failure_policy_errors(js, on) == []
    assert jobset_webhook.failure_policy_errors(js, off) == [
        "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when "
        "RestartJob feature gate is disabled"]


def test_the_webhook_port_catches_what_jobset_refuses():
    js = dry_run("--group", "p5", "--nodes", "2", *REPLICA, "--", *TRAINING_ARGS)
    on = jobset_webhook.gates(install.jobset_manager_config())
    bad = {**js, "spec": {**js["spec"], "failurePolicy": {**js["spec"]["failurePolicy"], "rules": [
        {"name": "1bad", "action": "RestartJob", "targetReplicatedJobs": ["nope"], "onJobFailureReasons": ["OOM"]}]}}}
    assert len(jobset_webhook.failure_policy_errors(bad, on)) == 3


def test_restart_mode_jobs_carry_no_rule():
    js = dry_run("--group", "p5", "--nodes", "2", "--runtime", "openpod", "--", *TRAINING_ARGS)
    assert js["spec"]["failurePolicy"] == {"maxRestarts": job_request.DEFAULT_MAX_RESTARTS,
                                           "restartStrategy": "BlockingRecreate"}


def test_more_replica_groups_than_jobset_restarts_one_by_one_is_a_clear_error():
    # the webhook refuses RestartJob with a replicated job of more than 1024 replicas (jobset_webhook.go:445-450)
    spec = load_spec(SPEC_PATH)
    req = jobset.JobRequest(name="big", team="research", group="p5", image="x", nodes=2050, script=("t",),
                            runtime="openpod", fault_tolerance="replica", replicas=2050)
    with pytest.raises(jobset.JobError, match=r"--replicas 2050 not allowed.*at most 1024"):
        job_validation._validate_fault_tolerance(spec, req)
