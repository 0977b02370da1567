"""`submit --restart {process,in-process}` and `--spare-workers`: submit sets the runtime's restart mode.

In-process restart (training/ft/inprocess.py) runs its warm standby workers as processes of the same pod
(``supervise_ranks`` starts them with ``subprocess.Popen`` next to the ranks; ``training.worker`` makes a
standby import torch and wait on the launcher's store without touching a device), so the pod requests
exactly what a process-restart pod does: the standbys live within its memory limit, not in extra quota.
"""

from __future__ import annotations

import re

import pytest

from tests.governance import k8s_schema
from tests.governance.test_submit_openpod import dry_run, submit
from training import cli as training_cli

ONE_P5 = ("--name", "llama", "--team", "research", "--group", "p5", "--nodes", "1", "--runtime", "openpod")
TRAINING_ARGS = ("--", "--steps", "100", "--global-batch", "64")


def error(*args: str) -> str:
    result = submit(*args)
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    return result.output.strip()


def trainer(js: dict) -> dict:
    (c,) = k8s_schema.jobset_pod_spec(js)["containers"]
    return c


def runtime_args(js: dict) -> list[str]:
    """The trainer's `python -m training run` arguments as the kubelet expands them."""
    c = trainer(js)
    env = {"NODE_NAME": "ip-10-0-0-1", "POD_IP": "10.0.0.1", "REPLICA_ID": "0"}
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c["command"][4:]]


def test_in_process_restart_is_set_on_the_launcher_and_the_runtime_accepts_it():
    js = dry_run(*ONE_P5, "--restart", "in-process", *TRAINING_ARGS)
    args = runtime_args(js)
    assert "--restart=in-process" in args
    assert not any(a.startswith("--spare-workers") for a in args)  # the runtime's default (1)
    assert training_cli.check_run_args(args) == []
    js = dry_run(*ONE_P5, "--restart", "in-process", "--spare-workers", "2", *TRAINING_ARGS)
    args = runtime_args(js)
    assert "--restart=in-process" in args and "--spare-workers=2" in args
    assert training_cli.check_run_args(args) == []


def test_process_restart_is_the_default_and_renders_as_before():
    default, explicit = dry_run(*ONE_P5, *TRAINING_ARGS), dry_run(*ONE_P5, "--restart", "process", *TRAINING_ARGS)
    assert default == explicit
    assert not any(a.startswith(("--restart", "--spare-workers")) for a in runtime_args(default))


def test_standby_workers_are_processes_of_the_pod_and_ask_for_no_extra_resources():
    process = dry_run(*ONE_P5, *TRAINING_ARGS)
    inproc = dry_run(*ONE_P5, "--restart", "in-process", "--spare-workers", "8", *TRAINING_ARGS)
    assert trainer(inproc)["resources"] == trainer(process)["resources"]
    assert len(k8s_schema.jobset_pod_spec(inproc)["containers"]) == 1
    assert [r["replicas"] for r in inproc["spec"]["replicatedJobs"]] == [1]


@pytest.mark.parametrize("args, message", [
    (("--name", "llama", "--team", "research", "--group", "p5", "--nodes", "1", "--restart", "in-process", "--",
      "train.py"),
     "error: --restart in-process needs --runtime openpod: torchrun restarts every worker of the node; the "
     "platform's launcher replaces the failed rank alone"),
    ((*ONE_P5, "--spare-workers", "1", *TRAINING_ARGS),
     "error: --spare-workers only applies with --restart in-process"),
    ((*ONE_P5, "--restart", "in-process", "--spare-workers", "-1", *TRAINING_ARGS),
     "error: --spare-workers -1 not allowed; use 0 (a replacement starts from scratch) to 8 (the node's "
     "8 ranks: a spare takes one failed rank's place and a new one starts behind it)"),
    ((*ONE_P5, "--restart", "in-process", "--spare-workers", "9", *TRAINING_ARGS),
     "error: --spare-workers 9 not allowed; use 0 (a replacement starts from scratch) to 8"),
    ((*ONE_P5, "--", "--steps", "100", "--global-batch", "64", "--restart", "in-process"),
     "error: --restart after -- not allowed with --runtime openpod: give it to openpod submit (--restart before "
     "--), which sets it on every node's launcher"),
    ((*ONE_P5, "--", "--steps", "100", "--global-batch", "64", "--spare-workers=2"),
     "error: --spare-workers after -- not allowed with --runtime openpod: give it to openpod submit"),
])
def test_bad_combinations_are_one_clear_line(args, message):
    assert error(*args).startswith(message)


def test_what_the_runtime_refuses_of_in_process_restart_is_reported_as_submits_flag():
    """Replica groups keep their survivors' processes already; several nodes per launcher group depend on
    what the runtime supports (training/cli.py usage_problems): submit reports the runtime's own reason."""
    out = error("--name", "llama", "--team", "research", "--group", "p5", "--nodes", "2", "--runtime", "openpod",
                "--fault-tolerance", "replica", "--restart", "in-process", *TRAINING_ARGS)
    assert out.startswith("error: --restart in-process: the training runtime refuses it for this job: "
                          "--restart: in-process applies to --fault-tolerance restart")
    # several nodes per launcher group: supported (node 0 hosts the store, each pod its --node-rank)
    result = submit("--name", "llama", "--team", "research", "--group", "p5", "--nodes", "2", "--runtime",
                    "openpod", "--restart", "in-process", *TRAINING_ARGS)
    assert result.exit_code == 0, result.output


def test_each_node_of_a_multi_node_in_process_job_gets_its_own_node_rank():
    """In-process restart over several nodes (training/ft/inprocess.py): node 0's launcher hosts the job's store
    at --rdzv-endpoint and node i runs global ranks i*nproc.. (--node-rank). Every pod must get its own index:
    left at the default, every node would be node 0, each hosting a store and running ranks 0..nproc-1."""
    js = dry_run("--name", "llama", "--team", "research", "--group", "p5", "--nodes", "2", "--runtime", "openpod",
                 "--restart", "in-process", *TRAINING_ARGS)
    c = trainer(js)
    (rank_env,) = [e for e in c["env"] if e["name"] == "NODE_RANK"]
    # the Job controller's label on each pod of an Indexed Job (the child Jobs are Indexed)
    assert rank_env["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}
    assert "--node-rank=$(NODE_RANK)" in c["command"]
    assert k8s_schema.jobset_pod_spec(js) and js["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"
    for index in ("0", "1"):
        args = [re.sub(r"\$\((\w+)\)", lambda m: {"NODE_NAME": "n", "POD_IP": "10.0.0.1", "NODE_RANK": index}[m.group(1)], a)
                for a in c["command"][4:]]
        assert f"--node-rank={index}" in args and training_cli.check_run_args(args) == []
    # one node: nothing to number, the command is as before
    assert not any(a.startswith("--node-rank") for a in trainer(dry_run(*ONE_P5, "--restart", "in-process",
                                                                             *TRAINING_ARGS))["command"])


def test_node_rank_is_set_by_submit_not_after_the_double_dash():
    assert "--node-rank after -- not allowed" in error("--name", "llama", "--team", "research", "--group", "p5",
                                                       "--nodes", "2", "--runtime", "openpod", "--restart",
                                                       "in-process", *TRAINING_ARGS, "--node-rank=1")
    assert error("--name", "llama", "--team", "research", "--group", "p5", "--nodes", "2", "--runtime", "openpod",
                 "--restart", "in-process", "--env", "NODE_RANK=3", *TRAINING_ARGS).startswith(
        "error: --env NODE_RANK not allowed with --restart in-process on several nodes")
