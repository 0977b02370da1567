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
from click.testing import CliRunner

from infra.cli import main
from infra.governance import install, jobset
from infra.spec import load_spec
from tests.conftest import EXAMPLES, ROOT
from tests.governance import jobset_webhook, k8s_schema

SPEC_PATH = EXAMPLES / "default.yaml"
TRAINING_ARGS = ("--model", "xl", "--steps", "1000", "--global-batch", "64")
REPLICA = ("--runtime", "openpod", "--fault-tolerance", "replica")
GITOPS_EXAMPLE = ROOT / "examples" / "gitops" / "jobset-helmrelease.yaml"


def submit(*args: str):
    return CliRunner().invoke(main, ["submit", "--spec", str(SPEC_PATH), "--image", "registry.example/train:1",
                                     "--dry-run", "--team", "research", "--name", "llama", *args])


def dry_run(*args: str) -> dict:
    r = submit(*args)
    assert r.exit_code == 0, r.output
    return next(yaml.safe_load_all(r.stdout))


# ------------------------------------------------------------------ the controller's configuration


def test_the_controller_configuration_turns_the_restart_job_gate_on_and_keeps_the_charts_settings():
    cfg = install.jobset_manager_config()
    assert jobset_webhook.gates(cfg)["RestartJob"] is True
    assert jobset_webhook.gates(None)["RestartJob"] is False  # the chart's own file: features.go:73
    # what the chart's own file sets at its defaults (configmap.yaml:27-37, values.yaml:36-43, release "jobset"),
    # so replacing the file changes nothing but the gates
    assert cfg["apiVersion"] == "config.jobset.x-k8s.io/v1alpha1" and cfg["kind"] == "Configuration"
    assert cfg["leaderElection"] == {"leaderElect": True}
    assert cfg["clientConnection"] == {"qps": 500, "burst": 500}
    assert cfg["internalCertManagement"] == {"enable": True, "webhookServiceName": "jobset-webhook-service",
                                             "webhookSecretName": "jobset-webhook-server-cert"}
    cm = install.jobset_config_map()
    assert (cm["kind"], cm["metadata"]["namespace"]) == ("ConfigMap", install.JOBSET_NAMESPACE)
    assert yaml.safe_load(cm["data"]["controller_manager_config.yaml"]) == cfg
    assert k8s_schema.model_errors(cm, "V1ConfigMap") == []


def test_the_controller_deployment_patch_points_the_charts_config_volume_at_that_file():
    patch = install.jobset_controller_patch("v0.12.0")
    tmpl = patch["spec"]["template"]
    # the chart's volume (deployment.yaml:62-65 mounts it with subPath controller_manager_config.yaml at
    # /controller_manager_config.yaml, the --config path; :113-116 defines it): same name, our ConfigMap
    assert tmpl["spec"]["volumes"] == [{"name": "manager-config", "configMap": {"name": install.JOBSET_CONFIG_MAP}}]
    assert install.JOBSET_CONFIG_KEY == "controller_manager_config.yaml"
    # a subPath mount is never refreshed: the file's hash in the pod template rolls the controller on a change
    text = install.jobset_config_map()["data"][install.JOBSET_CONFIG_KEY]
    assert tmpl["metadata"]["annotations"][install.CONFIG_HASH_ANNOTATION] == hashlib.sha256(text.encode()).hexdigest()
    # a chart upgrade changes the patch, so CloudFormation re-applies it after the upgrade
    assert patch != install.jobset_controller_patch("v0.13.0")
    restore = install.jobset_controller_restore_patch()
    assert restore["spec"]["template"]["spec"]["volumes"][0]["configMap"] == {"name": "jobset-controller-config"}


def test_the_gitops_example_ships_the_same_configmap_and_patch():
    docs = list(yaml.safe_load_all(GITOPS_EXAMPLE.read_text()))
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert cm == install.jobset_config_map()
    (release,) = [d for d in docs if d["kind"] == "HelmRelease"]
    assert release["spec"]["chart"]["spec"]["version"] == "0.12.0"
    assert release["spec"]["releaseName"] == install.JOBSET_RELEASE
    assert release["spec"]["targetNamespace"] == install.JOBSET_NAMESPACE
    assert release["spec"]["values"] == install.jobset_values(load_spec(SPEC_PATH))
    (renderer,) = release["spec"]["postRenderers"]
    (p,) = renderer["kustomize"]["patches"]
    assert p["target"] == {"kind": "Deployment", "name": install.JOBSET_CONTROLLER}
    assert yaml.safe_load(p["patch"]) == {"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": install.JOBSET_CONTROLLER},
                                          **{k: v for k, v in install.jobset_controller_patch("0.12.0").items()
                                             if k != "metadata"}}


# ------------------------------------------------------------------ the replica-mode JobSet


def test_replica_mode_restarts_only_the_failed_group_and_jobsets_webhook_accepts_it_only_with_the_gate():
    js = dry_run("--group", "p5", "--nodes", "2", *REPLICA, "--", *TRAINING_ARGS)
    if k8s_schema.schemas_present():
        assert k8s_schema.validate(js) == []  # the v0.12.0 CRD: rules[].action enum, name, lists
    fp = js["spec"]["failurePolicy"]
    assert fp["rules"] == [{"name": jobset.RESTART_GROUP_RULE, "action": "RestartJob",
                            "onJobFailureReasons": ["BackoffLimitExceeded"],
                            "targetReplicatedJobs": [jobset.REPLICATED_JOB]}]
    # the budget is the job's: RestartJob counts against maxRestarts with whole-JobSet restarts
    # (pkg/controllers/failure_policy.go:226,350,367,548-550)
    assert fp["maxRestarts"] == jobset.DEFAULT_MAX_RESTARTS and fp["restartStrategy"] == "BlockingRecreate"
    # a trainer pod's failure fails its Job with this reason: backoffLimit 0, no podFailurePolicy
    node = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == jobset.REPLICATED_JOB)
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
    assert js["spec"]["failurePolicy"] == {"maxRestarts": jobset.DEFAULT_MAX_RESTARTS,
                                           "restartStrategy": "BlockingRecreate"}


def test_more_replica_groups_than_jobset_restarts_one_by_one_is_a_clear_error():
    # the webhook refuses RestartJob with a replicated job of more than 1024 replicas (jobset_webhook.go:445-450)
    spec = load_spec(SPEC_PATH)
    req = jobset.JobRequest(name="big", team="research", group="p5", image="x", nodes=2050, script=("t",),
                            runtime="openpod", fault_tolerance="replica", replicas=2050)
    with pytest.raises(jobset.JobError, match=r"--replicas 2050 not allowed.*at most 1024"):
        jobset._validate_fault_tolerance(spec, req)
