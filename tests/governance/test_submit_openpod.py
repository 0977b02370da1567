"""`submit --runtime openpod`: the JobSet runs the platform's training runtime on every node, with the
checkpoint tiers mounted and a command the runtime's own parser accepts."""

from __future__ import annotations

import re

import pytest
import yaml
from click.testing import CliRunner

from openpod_core import labels
from infra.cli.main import main
from infra.governance import job_launcher, job_request, jobset
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES
from tests.governance import k8s_schema
from training import cli as training_cli

SPEC = str(EXAMPLES / "default.yaml")
P5 = ("--name", "llama-p5", "--team", "research", "--group", "p5", "--nodes", "2")
TRAINING_ARGS = ("--model", "xl", "--steps", "1000", "--global-batch", "64")


def submit(*args: str):
    return CliRunner().invoke(main, ["submit", "--spec", SPEC, "--image", "registry.example/train:1", "--dry-run",
                                     *args])


def dry_run(*args: str) -> dict:
    result = submit(*args)
    assert result.exit_code == 0, result.output
    return next(yaml.safe_load_all(result.stdout))  # the JobSet; the job's peer Secret is the last document


def pod_spec(js: dict) -> dict:
    return k8s_schema.jobset_pod_spec(js)


def trainer(js: dict) -> dict:
    (c,) = pod_spec(js)["containers"]
    return c


def expand(command: list[str], env: dict[str, str]) -> list[str]:
    """What the kubelet does to a container command: $(VAR) -> the container's env value."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in command]


def test_p5_jobset_runs_the_training_runtime_with_every_tier():
    js = dry_run(*P5, "--runtime", "openpod", "--s3-uri", "s3://openpod-checkpoints-111122223333/research/runs",
                 "--", *TRAINING_ARGS)
    if k8s_schema.schemas_present():
        assert k8s_schema.validate(js) == []
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert k8s_schema.model_errors(template, "V1PodTemplateSpec") == []
    spec, c = pod_spec(js), trainer(js)

    # Node-local tiers: per-job directories of the host's memory (so snapshots outlive the pods, which the
    # JobSet recreates after a node loss) and of the NVMe RAID0, opened up for the image's user.
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["node-memory"]["hostPath"] == {"path": "/dev/shm/openpod/research/llama-p5",
                                               "type": "DirectoryOrCreate"}
    assert vols["local-nvme"]["hostPath"] == {"path": f"{labels.LOCAL_NVME_MOUNT}/openpod/research/llama-p5",
                                              "type": "DirectoryOrCreate"}
    assert {vols[v]["hostPath"]["path"].rsplit("/", 2)[0] for v in ("node-memory", "local-nvme")} == \
        set(labels.JOB_SCRATCH_ROOTS)  # what the node agent sweeps
    assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts == {"/dev/shm": "dshm", "/fsx/research": "fsx", "/fsx/datasets": "fsx",
                      job_launcher.MEMORY_DIR: "node-memory", labels.LOCAL_NVME_MOUNT: "local-nvme"}
    (init,) = spec["initContainers"]
    assert init["command"] == ["chmod", "1777", "/fsx/research", job_launcher.MEMORY_DIR, labels.LOCAL_NVME_MOUNT]
    assert init["volumeMounts"] == [{"name": "fsx", "mountPath": "/fsx/research", "subPath": "research"},
                                    {"name": "node-memory", "mountPath": job_launcher.MEMORY_DIR},
                                    {"name": "local-nvme", "mountPath": labels.LOCAL_NVME_MOUNT}]

    # Downward API: the pod's IP for the agent and peer side-channel, the node's name for node-local tiers.
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"] if "fieldRef" in e.get("valueFrom", {})}
    assert fields == {"POD_IP": "status.podIP", "NODE_NAME": "spec.nodeName"}
    # The job's peer-replication key, from the Secret submit creates (tests/governance/test_apply.py).
    secret = [e["valueFrom"]["secretKeyRef"] for e in c["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert secret == [{"name": "llama-p5-peer", "key": "OPENPOD_PEER_SECRET", "optional": False}]

    cmd = c["command"]
    assert cmd[:4] == ["python", "-m", "training", "run"]
    assert cmd[-len(TRAINING_ARGS):] == list(TRAINING_ARGS)
    # Every $(VAR) refers to a variable of the container (the kubelet leaves unknown ones as they are).
    env = {e["name"]: e.get("value", "") for e in c["env"]}
    assert {m for arg in cmd for m in re.findall(r"\$\((\w+)\)", arg)} == {"POD_IP", "NODE_NAME"} <= env.keys()
    env.update(POD_IP="10.1.2.3", NODE_NAME="ip-10-1-2-3.us-east-2.compute.internal")
    argv = expand(cmd, env)[4:]

    # The runtime's own click command accepts the flags (parsed only; nothing launches).
    assert training_cli.check_run_args(argv) == []
    params = training_cli.run.make_context("run", argv).params
    assert params["nnodes"] == "2" and params["nproc_per_node"] == 8
    assert params["rdzv_endpoint"] == "llama-p5-node-0-0.llama-p5:29500" and params["rdzv_id"] == "llama-p5"
    assert params["bind_host"] == "10.1.2.3"
    assert params["node_id"] == "ip-10-1-2-3.us-east-2.compute.internal"
    assert params["checkpoint_dir"] == "/fsx/research/llama-p5"
    assert params["memory_dir"] == job_launcher.MEMORY_DIR
    assert params["nvme_dir"] == labels.LOCAL_NVME_MOUNT
    assert params["s3_uri"] == "s3://openpod-checkpoints-111122223333/research/runs"
    assert params["max_restarts"] >= 1 and (params["model"], params["steps"]) == ("xl", 1000)


def test_default_runtime_is_still_torchrun():
    cmd = trainer(dry_run(*P5, "--", "train.py"))["command"]
    assert cmd[0] == "torchrun" and cmd[-1] == "train.py"
    (init,) = pod_spec(dry_run(*P5, "--", "train.py"))["initContainers"]  # only the team's FSx directory
    assert init["command"] == ["chmod", "1777", "/fsx/research"]


def test_group_without_instance_store_has_no_nvme_tier():
    spec = load_spec(EXAMPLES / "large.yaml")
    req = jobset.JobRequest(name="prep", team="research", group="data-prep", image="i", nodes=2,
                            script=("--steps", "10"), runtime="openpod")
    jobset.validate(spec, req)
    js = jobset.build(spec, req)
    if k8s_schema.schemas_present():
        assert k8s_schema.validate(js) == []
    assert not any(a.startswith("--nvme-dir") for a in trainer(js)["command"])
    (init,) = pod_spec(js)["initContainers"]
    assert init["command"] == ["chmod", "1777", "/fsx/research", job_launcher.MEMORY_DIR]
    assert [v["name"] for v in pod_spec(js)["volumes"]] == ["dshm", "fsx", "node-memory"]
    assert "--nproc-per-node=1" in trainer(js)["command"]


@pytest.mark.parametrize("args, message", [
    (("--runtime", "openpod", "--", "--steps", "5", "--global-batch", "16", "--nnodes=3"),
     "--nnodes after -- not allowed with --runtime openpod: submit sets it from the job"),
    (("--runtime", "openpod", "--", "--steps", "5", "--global-batch", "16", "--stepz", "3"),
     "training args after -- not accepted by python -m training run: No such option '--stepz'"),
    (("--runtime", "openpod", "--", "--model", "xl"),
     "training args after -- not accepted by python -m training run: Missing option '--steps'"),
    (("--runtime", "openpod", "--", "--steps", "5"),
     "training args after -- not accepted by python -m training run: --global-batch: 12 is smaller than the "
     "largest world size (8 x 2)"),
    (("--s3-uri", "s3://bucket/x", "--", "train.py"), "--s3-uri needs --runtime openpod"),
    (("--runtime", "openpod", "--s3-uri", "bucket/x", "--", "--steps", "5", "--global-batch", "16"),
     "--s3-uri 'bucket/x' not allowed; use s3://"),
    (("--runtime", "openpod", "--s3-uri", "s3://bucket/product/x", "--", "--steps", "5", "--global-batch", "16"),
     "--s3-uri 's3://bucket/product/x' not allowed; use s3://<checkpoints bucket>/research[/prefix]: the training "
     "role reaches only its team's prefix (research/)"),
    (("--runtime", "openpod", "--env", "POD_IP=1.2.3.4", "--", "--steps", "5", "--global-batch", "16"),
     "--env POD_IP not allowed with --runtime openpod"),
    (("--runtime", "docker", "--", "train.py"), "Invalid value for '--runtime'"),
], ids=["launcher-flag", "unknown-flag", "missing-steps", "batch-vs-world", "s3-torchrun", "s3-uri", "s3-team", "env",
        "runtime"])
def test_bad_combinations_are_one_line_exit_2(args, message):
    result = submit(*P5, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    if "--runtime" in message:  # click's own usage error
        assert message in result.stderr
    else:
        assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines


def test_neuron_groups_are_refused():
    result = submit("--name", "n", "--team", "product", "--group", "trn2", "--nodes", "1", "--runtime", "openpod",
                    "--", "--steps", "5", "--global-batch", "64")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --runtime openpod not available on group trn2 (trn2.48xlarge): the training runtime runs on NVIDIA "
        "GPUs or CPU; use --runtime torchrun with a Neuron training script")


def test_openpod_pods_get_a_grace_period_the_launcher_uses_to_checkpoint_on_sigterm():
    """Eviction (node upgrade or drain) and Kueue preemption send SIGTERM, then SIGKILL after the grace period;
    the launcher must stop the workers (after a durable checkpoint) inside it, with a margin to exit."""
    js = dry_run(*P5, "--runtime", "openpod", "--", *TRAINING_ARGS)
    grace = pod_spec(js)["terminationGracePeriodSeconds"]
    assert grace == job_request.DEFAULT_GRACE_SECONDS["openpod"] == 300
    command = trainer(js)["command"]
    (stop,) = [a for a in command if a.startswith("--stop-timeout=")]
    assert int(stop.split("=")[1]) == grace - job_request.STOP_MARGIN_S
    assert training_cli.check_run_args(expand(command, {"POD_IP": "10.0.0.1", "NODE_NAME": "n1"})[4:]) == []

    custom = dry_run(*P5, "--runtime", "openpod", "--grace-seconds", "900", "--", *TRAINING_ARGS)
    assert pod_spec(custom)["terminationGracePeriodSeconds"] == 900
    assert "--stop-timeout=870" in trainer(custom)["command"]
    assert pod_spec(dry_run(*P5, "--", "train.py"))["terminationGracePeriodSeconds"] == 60  # torchrun: unchanged


@pytest.mark.parametrize("value", ["10", "7200"])
def test_a_grace_period_out_of_range_is_refused_naming_the_flag(value):
    r = submit(*P5, "--runtime", "openpod", "--grace-seconds", value, "--", *TRAINING_ARGS)
    assert r.exit_code == 2 and f"--grace-seconds {value} not allowed; use 30 to 3600" in r.output


def test_stop_timeout_is_set_by_submit_only():
    r = submit(*P5, "--runtime", "openpod", "--", *TRAINING_ARGS, "--stop-timeout", "5")
    assert r.exit_code == 2 and "--stop-timeout" in r.output


def test_openpod_pods_are_scrape_targets_on_every_node():
    """observability/scrape.py keeps pods annotated prometheus.io/scrape and reads prometheus.io/port."""
    js = dry_run(*P5, "--runtime", "openpod", "--", *TRAINING_ARGS)
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert template["metadata"]["annotations"]["prometheus.io/port"] == str(labels.TRAINING_METRICS_PORT)
    c = trainer(js)
    assert f"--metrics-port={labels.TRAINING_METRICS_PORT}" in c["command"]
    assert {"name": "metrics", "containerPort": labels.TRAINING_METRICS_PORT, "protocol": "TCP"} in c["ports"]
    assert "prometheus.io/scrape" not in (pod_spec(dry_run(*P5, "--", "train.py")).get("annotations") or {})
