"""Must show 3: `submit --dry-run` for P5, Trn2 and GB200 jobs gives valid JobSets with the right
resources, labels, annotations, restart policy, rendezvous and tolerations."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from openpod_core import labels
from infra.cli.main import main
from openpod_core.instance_types import get
from tests.conftest import EXAMPLES, free_port, write_kubeconfig
from tests.governance import k8s_schema

SPEC = str(EXAMPLES / "default.yaml")
FORBIDDEN_TAINTS = {labels.STARTUP_TAINT, labels.UNHEALTHY_TAINT, labels.HOT_SPARE_TAINT}


def dry_run(*args: str) -> dict:
    result = CliRunner().invoke(main, ["submit", "--spec", SPEC, "--image", "registry.example/train:1", "--dry-run",
                                       *args, "--", "train.py", "--steps", "100"])
    assert result.exit_code == 0, result.output
    return next(yaml.safe_load_all(result.stdout))  # the JobSet (a GB200 job's ComputeDomain follows it)


def pod(js: dict) -> dict:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def container(js: dict) -> dict:
    (c,) = pod(js)["spec"]["containers"]
    return c


def check_common(js: dict, *, name: str, team: str, priority: str, nodes: int, nproc: int, group: str) -> None:
    if k8s_schema.schemas_present():
        assert k8s_schema.validate(js) == []
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and js["kind"] == "JobSet"
    assert js["metadata"]["namespace"] == team
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == team
    assert js["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == priority
    assert js["spec"]["suspend"] is True
    # Restart: a failed pod (node lost) recreates the whole job set, up to maxRestarts times, and only once
    # every old pod is gone (BlockingRecreate, jobset@v0.12.0 api/jobset/v1alpha2/jobset_types.go:500-508):
    # pods finishing their SIGTERM checkpoint never overlap the new pods' rendezvous and restore.
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 10, "restartStrategy": "BlockingRecreate"}
    rj = js["spec"]["replicatedJobs"]
    assert len(rj) == 1 and rj[0]["replicas"] == 1
    job = rj[0]["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["completionMode"]) == (nodes, nodes, "Indexed")
    # Rendezvous: c10d on pod 0 through the JobSet's headless service.
    assert js["spec"]["network"]["enableDNSHostnames"] is True
    assert js["spec"]["network"]["subdomain"] == name
    cmd = container(js)["command"]
    assert cmd[0] == "torchrun"
    assert f"--nnodes={nodes}" in cmd and f"--nproc-per-node={nproc}" in cmd
    assert "--rdzv-backend=c10d" in cmd
    assert f"--rdzv-endpoint={name}-node-0-0.{name}:29500" in cmd
    assert cmd[-3:] == ["train.py", "--steps", "100"]
    spec = pod(js)["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {labels.INSTANCE_GROUP: group}
    tolerated = {t.get("key") for t in spec.get("tolerations", [])}
    assert not tolerated & FORBIDDEN_TAINTS and None not in tolerated  # no wildcard toleration either
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
    assert vols["fsx"]["persistentVolumeClaim"] == {"claimName": "fsx-lustre"}
    mounts = {m["mountPath"]: m["name"] for m in container(js)["volumeMounts"]}
    assert mounts == {"/dev/shm": "dshm", f"/fsx/{team}": "fsx", "/fsx/datasets": "fsx"}  # its own FSx dir only
    res = container(js)["resources"]
    assert res["requests"] == res["limits"]  # hugepages need requests == limits
    # What the EFA node groups preallocate (vm.nr_hugepages in their user data): one shared constant.
    assert res["requests"]["hugepages-2Mi"] == f"{labels.EFA_HUGEPAGES_MI}Mi" == "5120Mi"
    # Pod Identity: the service account the governance objects create and the stack associates.
    assert spec["serviceAccountName"] == labels.TRAINING_SERVICE_ACCOUNT == "training"


def test_p5_job_under_one_network_spine():
    js = dry_run("--name", "llama-p5", "--team", "research", "--group", "p5", "--nodes", "2",
                 "--require-topology", "layer-1")
    check_common(js, name="llama-p5", team="research", priority="training", nodes=2, nproc=8, group="p5")
    req = container(js)["resources"]["requests"]
    assert req["nvidia.com/gpu"] == "8"
    assert req["vpc.amazonaws.com/efa"] == str(get("p5.48xlarge").efa_count) == "32"
    assert pod(js)["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-1"}


def test_trn2_job_prefers_one_layer3_network_node():
    js = dry_run("--name", "neuron", "--team", "product", "--group", "trn2", "--nodes", "3",
                 "--priority", "fine-tuning", "--prefer-topology", "layer-3")
    # 16 Trainium2 devices x 4 logical NeuronCores (LNC=2) = 64 ranks per node.
    check_common(js, name="neuron", team="product", priority="fine-tuning", nodes=3, nproc=64, group="trn2")
    req = container(js)["resources"]["requests"]
    assert req["aws.amazon.com/neuron"] == "16" and "nvidia.com/gpu" not in req
    assert req["vpc.amazonaws.com/efa"] == str(get("trn2.48xlarge").efa_count) == "16"
    assert pod(js)["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}


def test_gb200_job_inside_one_ultraserver():
    js = dry_run("--name", "moe", "--team", "research", "--group", "gb200", "--nodes", "18",
                 "--priority", "experimentation", "--require-topology", "ultraserver")
    check_common(js, name="moe", team="research", priority="experimentation", nodes=18, nproc=4, group="gb200")
    req = container(js)["resources"]["requests"]
    assert req["nvidia.com/gpu"] == "4"
    assert req["vpc.amazonaws.com/efa"] == str(get("p6e-gb200.36xlarge").efa_count)
    assert pod(js)["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/ultraserver-id"}


def test_partial_node_scales_cpu_memory_and_efa():
    js = dry_run("--name", "small", "--team", "research", "--group", "p5", "--nodes", "1",
                 "--accelerators-per-node", "2")
    req = container(js)["resources"]["requests"]
    assert req["nvidia.com/gpu"] == "2" and req["vpc.amazonaws.com/efa"] == "8"
    assert req["cpu"] == "44" and req["memory"] == "471Gi"  # a quarter of 176 vCPU / 1884 GiB
    assert "--nproc-per-node=2" in container(js)["command"]


def test_part_node_jobs_request_hugepages_in_proportion():
    # 2 of 8 GPUs: a quarter of the 5120 MiB the node preallocates. Asking for all of them (the old
    # default) held the whole node's hugepages while the queue charged a quarter node.
    js = dry_run("--name", "small", "--team", "research", "--group", "p5", "--nodes", "1",
                 "--accelerators-per-node", "2")
    res = container(js)["resources"]
    assert res["requests"]["hugepages-2Mi"] == res["limits"]["hugepages-2Mi"] == "1280Mi"
    whole = dry_run("--name", "big", "--team", "research", "--group", "p5", "--nodes", "1")
    assert container(whole)["resources"]["requests"]["hugepages-2Mi"] == "5120Mi"


def test_part_node_pods_that_fill_a_node_fit_it_in_every_resource():
    from infra.governance import resources as r
    from openpod_core.instance_types import INSTANCE_TYPES

    for t in INSTANCE_TYPES.values():
        if not t.is_accelerated:
            continue
        whole = r.node_share(t).quantities(t)
        for n in range(1, t.accelerator_count + 1):
            pods = t.accelerator_count // n
            part = r.pod_share(t, n).quantities(t)
            for name, amount in part.items():
                if name == r.EFA and whole[name] < pods:
                    continue  # at least one EFA device per pod: fewer devices than pods cannot be split
                assert amount * pods <= whole[name], (t.name, n, name)
            assert r.hugepages_share_mi(t, n) * pods <= (labels.EFA_HUGEPAGES_MI if t.efa_supported else 0)


def test_part_node_hugepages_beyond_the_share_are_refused():
    result = CliRunner().invoke(main, ["submit", "--spec", SPEC, "--image", "i", "--name", "x", "--team", "research",
                                       "--group", "p5", "--nodes", "1", "--accelerators-per-node", "2",
                                       "--hugepages", "5120", "--dry-run", "--", "t.py"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "error: --hugepages 5120 is more than the share of a job using 2 of 8 accelerators per node: 1280 of the "
        "node's 5120 MiB (more would hold the whole node's hugepages while quota charges part of it); use 0 to 1280")


def test_group_taints_are_tolerated_but_never_the_health_taints():
    from infra.governance import jobset
    from infra.spec.loading import load_spec

    spec = load_spec(EXAMPLES / "large.yaml")
    req = jobset.JobRequest(name="dev", team="research", group="p5-dev", image="i", nodes=1, script=("t.py",))
    jobset.validate(spec, req)
    tol = pod(jobset.build(spec, req))["spec"]["tolerations"]
    assert tol == [{"key": "dedicated", "operator": "Equal", "value": "dev", "effect": "NoSchedule"}]


@pytest.mark.parametrize("kubeconfig", ["missing", "empty"])
def test_without_dry_run_and_no_cluster_a_clear_error(tmp_path, monkeypatch, kubeconfig):
    path = tmp_path / "kubeconfig"
    if kubeconfig == "empty":
        path.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = CliRunner().invoke(main, ["submit", "--spec", SPEC, "--image", "i", "--name", "x", "--team", "research",
                                       "--group", "p5", "--nodes", "1", "--kubeconfig", str(path), "--", "t.py"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "kubeconfig" in lines[0]


def test_without_dry_run_unreachable_api_server(tmp_path):
    cfg = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}", "t")  # nothing listens
    result = CliRunner().invoke(main, ["submit", "--spec", SPEC, "--image", "i", "--name", "x", "--team", "research",
                                       "--group", "p5", "--nodes", "1", "--kubeconfig", str(cfg), "--", "t.py"])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the cluster API server")


def test_default_placement_packs_into_one_ultraserver_or_layer3_node():
    from infra.governance import jobset
    from infra.spec.loading import load_spec

    spec = load_spec(EXAMPLES / "large.yaml")
    expected = {"gb200": ("pretraining", "topology.k8s.aws/ultraserver-id"),
                "p5en": ("pretraining", "topology.k8s.aws/network-node-layer-3"),
                "data-prep": ("research", None)}
    for group, (team, label) in expected.items():
        req = jobset.JobRequest(name="j", team=team, group=group, image="i", nodes=1, script=("t.py",))
        jobset.validate(spec, req)
        annotations = pod(jobset.build(spec, req))["metadata"].get("annotations", {})
        assert annotations == ({"kueue.x-k8s.io/podset-preferred-topology": label} if label else {})


@pytest.mark.parametrize("hugepages, message", [
    ("5121", "--hugepages 5121 not allowed; use 0 or more MiB, a multiple of 2 (2 MiB pages)"),
    ("8192", "--hugepages 8192 is more than an EFA node of group p5 has: nodes preallocate 5120 MiB; use 0 to 5120"),
])
def test_hugepages_beyond_what_efa_nodes_preallocate_is_refused(hugepages, message):
    result = CliRunner().invoke(main, ["submit", "--spec", SPEC, "--image", "i", "--name", "x", "--team", "research",
                                       "--group", "p5", "--nodes", "1", "--hugepages", hugepages, "--dry-run",
                                       "--", "t.py"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"error: {message}"
