"""Removing a team or a priority from the spec removes its objects, on the CDK path and on GitOps.

CDK: synthesize spec A, then spec B without team ``product`` and priority ``fine-tuning``, and show
for every object A applies and B does not how the deploy of B deletes it: its manifest resource is
gone from the template (CloudFormation deletes it: the EKS kubectl handler runs ``kubectl delete -f``),
or it is a Namespace in a manifest applied with ``--prune`` (kubectl's default allowlist has
Namespace), or it lives in such a Namespace. Anything else would stay on the cluster.
"""

from __future__ import annotations

import json

import pytest
import yaml

from infra.governance import all_objects, lifecycle, render, write
from infra.spec.loading import parse_spec
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.xdist_group("cdk")


def spec_a() -> dict:
    return yaml.safe_load((EXAMPLES / "default.yaml").read_text())


def spec_b() -> dict:
    d = spec_a()
    d["teams"] = [t for t in d["teams"] if t["name"] != "product"]
    d["priorities"] = [{"name": "inference", "value": 100}, {"name": "experimentation", "value": 80},
                       {"name": "training", "value": 70}]
    return d


def applied(data: dict) -> tuple[dict, dict]:
    """(logical id -> resource, object key -> (logical id, object)) of the governance manifests."""
    from aws_cdk import App, Stack, assertions
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer

    from platform_constructs.governance import TaskGovernance

    stack = Stack(App(), "Gov")
    cluster = eks.Cluster(stack, "Cluster", version=eks.KubernetesVersion.V1_34,
                          kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV34Layer(stack, "K")))
    TaskGovernance(stack, "Governance", cluster=cluster, spec=parse_spec(data))
    resources = assertions.Template.from_stack(stack).find_resources("Custom::AWSCDK-EKS-KubernetesResource")
    objs = {}
    for lid, res in resources.items():
        if "KueueWebhookGate" in lid:  # the deploy-time gate's own RBAC, not a spec object
            continue
        if "JobSetConfig" in lid:  # JobSet's controller configuration, part of its install (install.py)
            continue
        for o in json.loads(res["Properties"]["Manifest"]):
            objs[(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])] = (lid, o)
    return resources, objs


@pytest.fixture(scope="module")
def a_and_b():
    return applied(spec_a()), applied(spec_b())


def how_deleted(key, a_objs, b_resources, removed) -> str | None:
    kind, ns, name = key
    lid, _ = a_objs[key]
    if lid not in b_resources:
        return "resource deleted"
    pruned = "PruneLabel" in b_resources[lid]["Properties"]
    if pruned and kind in lifecycle.KUBECTL_DEFAULT_PRUNE_CLUSTER:
        return "pruned"
    if ns and ("Namespace", "", ns) in removed and how_deleted(("Namespace", "", ns), a_objs, b_resources, removed):
        return "with its namespace"
    return None


def test_removing_a_team_and_a_priority_deletes_their_objects_on_the_cdk_path(a_and_b):
    (a_res, a_objs), (b_res, b_objs) = a_and_b
    removed = set(a_objs) - set(b_objs)
    assert {("ClusterQueue", "", "product"), ("Namespace", "", "product"), ("LocalQueue", "product", "product"),
            ("WorkloadPriorityClass", "", "fine-tuning"), ("PersistentVolumeClaim", "product", "fsx-lustre"),
            ("RoleBinding", "product", "product-submitter")} <= removed
    left = {k: a_objs[k][0] for k in removed if how_deleted(k, a_objs, b_res, removed) is None}
    assert left == {}
    # and nothing that stays is deleted: every object of B keeps a resource of the same logical id
    for key, (lid, _) in b_objs.items():
        if key in a_objs:
            assert a_objs[key][0] == lid, key


def test_each_object_is_applied_exactly_once(a_and_b):
    (_, a_objs), _ = a_and_b
    key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])  # noqa: E731
    assert sorted(a_objs) == sorted(key(o) for o in all_objects(parse_spec(spec_a())))


def test_removing_a_team_removes_its_files_for_gitops(tmp_path):
    # Argo CD (prune: true) and Flux (prune: true) delete what disappears from the directory.
    write(tmp_path, render(parse_spec(spec_a())))
    before = {p.name for p in tmp_path.glob("*.yaml")}
    write(tmp_path, render(parse_spec(spec_b())))
    after = {p.name for p in tmp_path.glob("*.yaml")}
    gone = before - after
    assert "06-clusterqueue-product.yaml" in gone and "00-namespace-product.yaml" in gone
    assert "07-workloadpriorityclass-fine-tuning.yaml" in gone
    assert all("product" in n or "fine-tuning" in n for n in gone), gone
    for example in ("argocd-application.yaml", "flux-kustomization.yaml"):
        assert "prune: true" in (EXAMPLES / "gitops" / example).read_text(), example


def test_gitops_examples_retry_a_sync_the_webhook_refused():
    # The CDK path waits for Kueue's webhook with a dry-run gate; the GitOps tools retry instead.
    import yaml

    argo = yaml.safe_load((EXAMPLES / "gitops" / "argocd-application.yaml").read_text())
    retry = argo["spec"]["syncPolicy"]["retry"]
    assert retry["limit"] >= 5 and retry["backoff"]["duration"] and retry["backoff"]["maxDuration"]
    flux = [d for d in yaml.safe_load_all((EXAMPLES / "gitops" / "flux-kustomization.yaml").read_text())
            if d["kind"] == "Kustomization"]
    assert flux[0]["spec"]["retryInterval"] == "1m"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_object_has_a_way_off_the_cluster(path):
    # A new cluster-scoped kind is a resource of its own unless kubectl's default prune allowlist covers it;
    # only the always-present host Topology is never removed.
    from infra.spec.loading import load_spec

    for o in all_objects(load_spec(path)):
        how = lifecycle.removed_by(o)
        if (o["kind"], o["metadata"]["name"]) in lifecycle.ALWAYS_PRESENT:
            assert how.startswith("never"), o["metadata"]["name"]
        else:
            assert not how.startswith("never"), (o["kind"], o["metadata"]["name"])
