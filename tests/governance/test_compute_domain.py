"""GB200 jobs and IMEX ComputeDomains: admissible through the queues, created with the job.

Upstream behaviour relied on (facts register): kueue.dra-device-class-mapping (Kueue 0.19.2 refuses a workload
whose pod claims a ResourceClaimTemplate of an unmapped device class), chart.nvidia-dra-driver-gpu and
dra.compute-domain.clique-and-imex-daemon (the ComputeDomain API and its channel DeviceClass at v25.12.0).
"""

from __future__ import annotations


import yaml
from click.testing import CliRunner

from infra.cli.main import main
from infra.governance import compute_domain as cd
from infra.governance import job_launcher, jobset, queues
from infra.governance.install import kueue_manager_config
from infra.spec.loading import parse_spec
from tests.conftest import EXAMPLES, example_data
from tests.governance.test_apply import api_server  # noqa: F401 - the recording API server fixture

SPEC = parse_spec(example_data())


def req(**kw) -> jobset.JobRequest:
    base = dict(name="llama", team="research", group="gb200", image="img", nodes=9, script=("train.py",))
    return jobset.JobRequest(**{**base, **kw})


def test_kueue_maps_the_imex_channel_class_to_a_quota_resource():
    cfg = kueue_manager_config(SPEC)
    assert cfg["resources"]["deviceClassMappings"] == [
        {"name": "openpod.io/imex-channel", "deviceClassNames": ["compute-domain-default-channel.nvidia.com"]}]
    assert cfg["resources"]["excludeResourcePrefixes"]  # kept


def test_no_mapping_without_a_multi_node_nvlink_group():
    data = example_data()
    data["instance_groups"] = [g for g in data["instance_groups"] if g["name"] != "gb200"]
    for t in data["teams"]:
        t["quotas"].pop("gb200", None)
    assert "deviceClassMappings" not in kueue_manager_config(parse_spec(data))["resources"]


def test_each_gb200_flavor_has_one_channel_of_quota_per_node_and_other_flavors_none():
    cq = queues.cluster_queue(SPEC, SPEC.team("research"))
    (group,) = cq["spec"]["resourceGroups"]
    assert cd.IMEX_CHANNEL in group["coveredResources"]
    quota = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quota["gb200"][cd.IMEX_CHANNEL] == str(SPEC.team("research").quotas["gb200"].nodes)
    assert quota["p5"][cd.IMEX_CHANNEL] == "0" and quota["trn2"][cd.IMEX_CHANNEL] == "0"


def test_teams_may_manage_compute_domains_in_their_namespace():
    rules = [r for r in queues.SUBMITTER_RULES if "resource.nvidia.com" in r["apiGroups"]]
    assert rules == [{"apiGroups": ["resource.nvidia.com"], "resources": ["computedomains"],
                      "verbs": ["create", "delete", "get", "list", "watch"]}]


def test_a_multi_node_gb200_job_claims_its_channel_in_every_pod():
    obj = jobset.build(SPEC, req())
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "imex-channel", "resourceClaimTemplateName": "llama-imex-channel"}]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "imex-channel"}]
    # the channel is a claim, never a container request (no node advertises it as an extended resource)
    assert cd.IMEX_CHANNEL not in pod["containers"][0]["resources"]["requests"]
    domain = cd.compute_domain(req())
    assert domain["metadata"] == {"name": "llama-imex", "namespace": "research",
                                  "labels": {"app.kubernetes.io/name": "llama"}}
    assert domain["spec"] == {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "llama-imex-channel"}}}


def test_only_multi_node_jobs_on_multi_node_nvlink_groups_need_one():
    assert cd.needed(SPEC, req())
    assert not cd.needed(SPEC, req(nodes=1))
    assert not cd.needed(SPEC, req(group="p5", nodes=2))


GB200 = ["submit", "--spec", str(EXAMPLES / "large.yaml"), "--image", "i", "--name", "llama", "--team",
         "pretraining", "--group", "gb200", "--nodes", "18", "--require-topology", "ultraserver"]


def test_submit_creates_the_compute_domain_owned_by_the_jobset(api_server):  # noqa: F811
    cfg, seen, _ = api_server
    result = CliRunner().invoke(main, [*GB200, "--kubeconfig", str(cfg), "--", "train.py"])
    assert result.exit_code == 0, result.output
    (js_path, _, js), (cd_path, _, domain) = seen
    assert js_path == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/pretraining/jobsets"
    assert cd_path == "/apis/resource.nvidia.com/v1beta1/namespaces/pretraining/computedomains"
    assert domain["metadata"]["ownerReferences"] == [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "llama", "uid": "6f1c0e2a-uid"}]
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == domain["spec"]["channel"][
        "resourceClaimTemplate"]["name"]
    assert "computedomain.resource.nvidia.com/llama-imex created" in result.stdout


def test_submit_dry_run_prints_the_compute_domain_too():
    result = CliRunner().invoke(main, [*GB200, "--dry-run", "--", "train.py"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in docs] == ["JobSet", "ComputeDomain"]


def test_a_refused_compute_domain_deletes_the_jobset_again(api_server):  # noqa: F811
    cfg, seen, answer = api_server
    answer["computedomains"] = 404   # e.g. the DRA driver's CRD is not installed
    result = CliRunner().invoke(main, [*GB200, "--kubeconfig", str(cfg), "--", "train.py"])
    assert result.exit_code == 1
    assert "refused the ComputeDomain llama-imex (404)" in result.stderr
    assert "the JobSet llama was deleted again" in result.stderr
    assert seen[-1][0] == "DELETE /apis/jobset.x-k8s.io/v1alpha2/namespaces/pretraining/jobsets/llama"


def test_in_replica_mode_only_trainer_pods_claim_a_channel():
    # The torchft Lighthouse needs no NVLink: a channel claim of its own would be charged one channel of the
    # per-node quota more than the job's nodes (a job of every node of the quota would never be admitted).
    r = req(runtime="openpod", fault_tolerance="replica", replicas=3, script=("--global-batch", "288"))
    obj = jobset.build(SPEC, r)
    by_name = {rj["name"]: rj["template"]["spec"]["template"]["spec"] for rj in obj["spec"]["replicatedJobs"]}
    assert set(by_name) == {job_launcher.REPLICATED_JOB, job_launcher.LIGHTHOUSE_JOB}
    assert "resourceClaims" not in by_name[job_launcher.LIGHTHOUSE_JOB]
    assert all("claims" not in c.get("resources", {}) for c in by_name[job_launcher.LIGHTHOUSE_JOB]["containers"])
    assert by_name[job_launcher.REPLICATED_JOB]["resourceClaims"][0]["name"] == cd.CLAIM
