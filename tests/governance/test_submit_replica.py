"""`submit --runtime openpod --fault-tolerance replica`: one child Job per replica group and the job's torchft
Lighthouse, rendered, checked against the JobSet v0.12.0 CRD, the team's admission policies, its
NetworkPolicies and its Kueue quota, and the commands checked with the runtime's and torchft's own programs."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from infra.cli.main import main
from infra.governance import all_objects, job_fault_tolerance, job_launcher
from infra.governance import queues as q
from infra.governance import resources as res
from infra.governance.admission import POD_SECURITY_JOBSET_POLICY, POD_SECURITY_POLICY, TEAM_QUEUE_POLICY
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES
from tests.governance import k8s_schema, vap
from tests.governance.lifecycle_corpus import team_image
from tests.governance.test_network import NS, reaches
from training import cli as training_cli

SPEC_PATH = EXAMPLES / "default.yaml"
SPEC = load_spec(SPEC_PATH)
OBJS = all_objects(SPEC)
TRAINING_ARGS = ("--model", "xl", "--steps", "1000", "--global-batch", "64")
REPLICA = ("--runtime", "openpod", "--fault-tolerance", "replica")
TEAM_NS = {q.TEAM_LABEL: "research"}
LIGHTHOUSE_BIN = Path(training_cli.sys.executable).parent / "torchft_lighthouse"


def submit(*args: str):
    return CliRunner().invoke(main, ["submit", "--spec", str(SPEC_PATH), "--image", team_image(SPEC, "research"),
                                     "--dry-run", "--team", "research", "--name", "llama", *args])


def dry_run(*args: str) -> dict:
    r = submit(*args)
    assert r.exit_code == 0, r.output
    return next(yaml.safe_load_all(r.stdout))  # the JobSet; a multi-node GB200 job adds its ComputeDomain


def rjobs(js: dict) -> dict[str, dict]:
    return {r["name"]: r for r in js["spec"]["replicatedJobs"]}


def pod(rjob: dict) -> dict:
    return rjob["template"]["spec"]["template"]["spec"]


def expand(command: list[str], env: dict[str, str]) -> list[str]:
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in command]


def p5_job() -> dict:
    return dry_run("--group", "p5", "--nodes", "2", *REPLICA, "--", *TRAINING_ARGS)


def test_one_child_job_per_replica_group_and_a_lighthouse_valid_and_admitted():
    js = p5_job()
    if k8s_schema.schemas_present():
        assert k8s_schema.validate(js) == []
    jobs = rjobs(js)
    assert list(jobs) == ["node", "lighthouse"]
    node, lh = jobs["node"], jobs["lighthouse"]
    # one child Job per group (a group's failed worker is restarted by its own launcher, not the JobSet)
    assert node["replicas"] == 2 and node["template"]["spec"]["parallelism"] == 1
    assert lh["replicas"] == 1 and lh["template"]["spec"]["parallelism"] == 1
    for r in (node, lh):
        assert k8s_schema.model_errors(r["template"]["spec"]["template"], "V1PodTemplateSpec") == []
    # the job succeeds when every group's Job has; the Lighthouse's Job is deleted then
    assert js["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["node"]}
    # a lost group's Job, and a failed Lighthouse Job, restart alone (the RestartJob gate the platform's JobSet
    # install turns on; tests/governance/test_jobset_restart_job.py, test_lighthouse_failure.py)
    assert [(r["action"], r["targetReplicatedJobs"]) for r in js["spec"]["failurePolicy"]["rules"]] == [
        ("RestartJob", ["node"]), ("RestartJob", ["lighthouse"])]
    # the team's admission policies, as deployed (CEL evaluated): the JobSet and both kinds of pod
    jobsets = next(o for o in OBJS if o["kind"] == "ValidatingAdmissionPolicy"
                   and o["metadata"]["name"] == POD_SECURITY_JOBSET_POLICY)
    pods = next(o for o in OBJS if o["kind"] == "ValidatingAdmissionPolicy"
                and o["metadata"]["name"] == POD_SECURITY_POLICY)
    assert vap.admit(jobsets, js, namespace_labels=TEAM_NS) == []
    for r in (node, lh):
        p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "research"}, "spec": pod(r)}
        assert vap.admit(pods, p, namespace_labels=TEAM_NS, user="system:serviceaccount:kube-system:job-controller") == []
    queue = next(o for o in OBJS if o["kind"] == "ValidatingAdmissionPolicy"
                 and o["metadata"]["name"] == TEAM_QUEUE_POLICY)
    assert vap.admit(queue, js, namespace_labels=TEAM_NS) == []


def test_each_group_runs_the_runtime_in_replica_mode_against_its_own_rendezvous_and_the_lighthouse():
    js = p5_job()
    (c,) = pod(rjobs(js)["node"])["containers"]
    env = {e["name"]: e for e in c["env"]}
    # the group index is the child Job's index, from the label JobSet sets on its pods
    assert env["REPLICA_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}
    vars_ = {"POD_IP": "10.1.2.3", "NODE_NAME": "n1", "REPLICA_ID": "1"}
    assert {m for a in c["command"] for m in re.findall(r"\$\((\w+)\)", a)} == set(vars_) <= env.keys()
    argv = expand(c["command"], vars_)[4:]
    assert training_cli.check_run_args(argv) == []
    p = training_cli.run.make_context("run", argv).params
    assert (p["fault_tolerance"], p["replica_id"], p["replicas"], p["min_replicas"]) == ("replica", 1, 2, 0)
    assert p["nnodes"] == "1" and p["nproc_per_node"] == 8
    assert p["rdzv_endpoint"] == "llama-node-1-0.llama:29500" and p["rdzv_id"] == "llama-1"
    assert p["lighthouse"] == "http://llama-lighthouse-0-0.llama:29510" == job_launcher.lighthouse_url("llama")
    assert p["bind_host"] == "10.1.2.3" and p["max_restarts"] >= 1  # a group restarts its own workers
    # DNS: every replicated job's pods get <jobset>-<rjob>-<job>-<pod>.<subdomain> (enableDNSHostnames)
    assert js["spec"]["network"]["enableDNSHostnames"] and js["spec"]["network"]["subdomain"] == "llama"


def test_the_lighthouse_pod_runs_torchfts_own_binary_with_those_args_and_is_ready_on_the_probed_port(tmp_path):
    (lh,) = pod(rjobs(p5_job())["lighthouse"])["containers"]
    assert lh["command"][0] == "torchft_lighthouse"
    assert lh["command"][lh["command"].index("--min_replicas") + 1] == "2"  # all groups (--min-replicas 0)
    port = lh["readinessProbe"]["tcpSocket"]["port"]
    assert port == job_launcher.LIGHTHOUSE_PORT == lh["ports"][0]["containerPort"]
    assert lh["command"][lh["command"].index("--bind") + 1] == f"[::]:{port}"
    # Start the real binary with the rendered arguments (the port moved to a free one: tests share the host).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    args = [str(LIGHTHOUSE_BIN), *(a.replace(str(port), str(free)) for a in lh["command"][1:])]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", free), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
                time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_min_replicas_reaches_both_the_groups_and_the_lighthouse():
    js = dry_run("--group", "gb200", "--nodes", "4", "--replicas", "2", "--min-replicas", "1", *REPLICA, "--",
                 *TRAINING_ARGS)
    if k8s_schema.schemas_present():
        assert k8s_schema.validate(js) == []
    node, lh = rjobs(js)["node"], rjobs(js)["lighthouse"]
    assert node["replicas"] == 2 and node["template"]["spec"]["completions"] == 2
    cmd = pod(node)["containers"][0]["command"]
    assert "--min-replicas=1" in cmd and "--nnodes=2" in cmd and "--replicas=2" in cmd
    assert pod(lh)["containers"][0]["command"][-2:] == ["--min_replicas", "1"]


# ------------------------------------------------------------------ quota: what Kueue charges

def _amount(quantity: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    m = re.fullmatch(r"(\d+)(m|Ki|Mi|Gi|Ti)?", str(quantity))
    return int(m.group(1)) * units.get(m.group(2), 1)


def _pod_requests(spec: dict) -> dict[str, float]:
    """A pod's effective request (the scheduler's and Kueue's): max(sum of the containers, each init container)
    (kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers)."""
    total: dict[str, float] = {}
    for c in spec["containers"]:
        for r, v in c["resources"]["requests"].items():
            total[r] = total.get(r, 0) + _amount(v)
    for c in spec.get("initContainers", []):
        for r, v in c["resources"]["requests"].items():
            total[r] = max(total.get(r, 0), _amount(v))
    return total


def workload_requests(js: dict) -> dict[str, float]:
    """The one Workload Kueue makes of a JobSet: one PodSet per replicated job, count = replicas x
    min(parallelism, completions) (kubernetes-sigs/kueue@v0.19.2
    pkg/controller/jobs/jobset/jobset_controller.go:115-121, 231-243), admitted together (one gang)."""
    total: dict[str, float] = {}
    for r in js["spec"]["replicatedJobs"]:
        spec = r["template"]["spec"]
        count = r["replicas"] * min(spec["parallelism"], spec["completions"])
        for k, v in _pod_requests(pod(r)).items():
            total[k] = total.get(k, 0) + count * v
    return total


def test_the_job_with_its_lighthouse_fits_the_nominal_quota_it_fills_and_each_node():
    """The team's nominal p5 quota is 2 nodes; a 2-node replica job - trainers and Lighthouse - is admitted
    within it (no borrowing), and the Lighthouse fits next to a trainer pod on one of the job's nodes."""
    js = p5_job()
    cq = next(o for o in OBJS if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == q.cluster_queue_name("research"))
    (flavor,) = [f for g in cq["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == "p5"]
    nominal = {r["name"]: _amount(r["nominalQuota"]) for r in flavor["resources"]}
    need = workload_requests(js)
    assert set(need) <= set(nominal) | {res.HUGEPAGES}
    for r, v in need.items():
        if r in nominal:
            assert v <= nominal[r], (r, v, nominal[r])
    assert need[res.GPU] == nominal[res.GPU] == 16  # every GPU of the quota trains
    t = SPEC.group("p5").type
    whole = res.node_share(t).quantities(t)
    trainer, lighthouse = _pod_requests(pod(rjobs(js)["node"])), _pod_requests(pod(rjobs(js)["lighthouse"]))
    for r in (res.CPU, res.MEMORY):
        unit = 2**30 if r == res.MEMORY else 1
        assert trainer[r] + lighthouse[r] <= whole[r] * unit, r
    share = job_fault_tolerance.LIGHTHOUSE_SHARE
    assert lighthouse == {res.CPU: share.cpu, res.MEMORY: share.memory_gib * 2**30}
    # restart mode: trainer pods keep the whole node share (unchanged)
    restart = dry_run("--group", "p5", "--nodes", "2", "--runtime", "openpod", "--", *TRAINING_ARGS)
    assert _pod_requests(pod(rjobs(restart)["node"]))[res.CPU] == whole[res.CPU]
    assert list(rjobs(restart)) == ["node"] and rjobs(restart)["node"]["replicas"] == 1


def test_the_lighthouse_port_is_reachable_from_the_teams_pods_only():
    js = p5_job()
    trainer = pod(rjobs(js)["node"])
    lh_labels = rjobs(js)["lighthouse"]["template"]["spec"]["template"]["metadata"]["labels"]
    tr_labels = rjobs(js)["node"]["template"]["spec"]["template"]["metadata"]["labels"]
    assert trainer["nodeSelector"] == pod(rjobs(js)["lighthouse"])["nodeSelector"]
    assert reaches("research", tr_labels, "research", lh_labels, NS, port=job_launcher.LIGHTHOUSE_PORT)
    assert not reaches("product", {"app.kubernetes.io/name": "x"}, "research", lh_labels, NS,
                       port=job_launcher.LIGHTHOUSE_PORT)


@pytest.mark.parametrize("args, message", [
    (("--nodes", "2", "--fault-tolerance", "replica", "--", "train.py"),
     "--fault-tolerance replica needs --runtime openpod"),
    (("--nodes", "2", *REPLICA, "--replicas", "3", "--", *TRAINING_ARGS),
     "--replicas 3 not allowed with --nodes 2; use a divisor of --nodes from 2 to 2"),
    (("--nodes", "1", *REPLICA, "--", *TRAINING_ARGS),
     "--fault-tolerance replica needs at least 2 replica groups: --nodes 1 has one"),
    (("--nodes", "2", *REPLICA, "--min-replicas", "3", "--", *TRAINING_ARGS),
     "--min-replicas 3 not allowed; use 0 (all 2 groups) to 2"),
    (("--nodes", "2", "--runtime", "openpod", "--replicas", "2", "--", *TRAINING_ARGS),
     "--replicas only applies with --fault-tolerance replica"),
    (("--nodes", "2", *REPLICA, "--", *TRAINING_ARGS, "--lighthouse", "http://x:1"),
     "--lighthouse after -- not allowed with --runtime openpod: submit sets it"),
    (("--nodes", "2", *REPLICA, "--", "--steps", "5", "--global-batch", "8"),
     "training args after -- not accepted by python -m training run: --global-batch: 8 is smaller than the ranks "
     "of all replica groups (2 x 8)"),
    (("--nodes", "2", *REPLICA, "--env", "REPLICA_ID=1", "--", *TRAINING_ARGS),
     "--env REPLICA_ID not allowed with --fault-tolerance replica: it is the child Job's index"),
], ids=["torchrun", "divisor", "one-node", "min-replicas", "replicas-alone", "lighthouse-flag", "batch", "env"])
def test_bad_replica_requests_are_one_line_exit_2(args, message):
    r = submit("--group", "p5", *args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines
