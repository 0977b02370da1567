"""Images per team (``teams[].images``, infra/governance/team_images.py): a team's pods run images only from its
own sources - every container kind and image volumes - so it cannot run another team's private images, which
the node role can pull and the node may have cached."""

from __future__ import annotations

import copy

import pytest
import yaml

from infra.app.pipeline import BOOTSTRAP_QUALIFIER
from infra.governance import all_objects, jobset, team_images
from infra.governance.admission import POD_SECURITY_JOBSET_POLICY, POD_SECURITY_POLICY
from infra.spec.base import SpecError
from infra.spec.loading import load_spec, parse_spec
from tests.conftest import EXAMPLES
from tests.governance import vap
from tests.governance.lifecycle_corpus import team_image
from tests.governance.test_pod_security import TEAM_NS, pod_of, request

SPEC = load_spec(EXAMPLES / "default.yaml")
LARGE = load_spec(EXAMPLES / "large.yaml")
REGISTRY = "111122223333.dkr.ecr.us-east-2.amazonaws.com"
IMAGES = "images (containers, initContainers, ephemeralContainers, image volumes) must come from the team's"


def _policy(objs, name):
    return next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == name)


def _with_images(spec, images):
    team = spec.teams[0].model_copy(update={"images": images})
    return spec.model_copy(update={"teams": [team, *spec.teams[1:]]})


def _pod(spec=SPEC, image=None):
    pod = pod_of(jobset.build(spec, request("p5", "openpod")))
    if image:
        for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
            c["image"] = image
    return pod


def admit(pod, spec=SPEC, **kw):
    return vap.admit(_policy(all_objects(spec), POD_SECURITY_POLICY), pod, namespace_labels=TEAM_NS,
                     user="system:serviceaccount:kube-system:job-controller", **kw)


@pytest.mark.parametrize("image, admitted", [
    (f"{REGISTRY}/research/train:1", True),
    (f"{REGISTRY}/research/llm/train@sha256:{'a' * 64}", True),
    (f"{REGISTRY}/cdk-{BOOTSTRAP_QUALIFIER}-container-assets-111122223333-us-east-2:0f1e2d", True),   # training image
    (f"{REGISTRY}/product/train:1", False),                  # another team's private repository
    (f"{REGISTRY}/researchers/train:1", False),              # a prefix of the team's name is not the team
    (f"{REGISTRY}/cdk-{BOOTSTRAP_QUALIFIER}-container-assets-111122223333-us-east-2-x:1", False),
    ("111122223333.dkr.ecr.eu-west-1.amazonaws.com/research/train:1", False),   # another Region
    (f"{REGISTRY}.evil.example/research/train:1", False),
    ("busybox", False),                                      # no registry host: the runtime would pick docker.io
    ("registry.example/train:1", False),
])
def test_by_default_a_team_runs_only_its_own_ecr_prefix_and_the_platform_image(image, admitted):
    denied = admit(_pod(image=image))
    assert (denied == []) is admitted, denied
    assert all(d.startswith(IMAGES) for d in denied)


def test_a_spec_with_an_account_pins_the_registry():
    team = LARGE.teams[0].name
    group = next(g.name for g in LARGE.instance_groups if g.type.accelerator.value == "nvidia")
    req = jobset.JobRequest(name="llama", team=team, group=group, image=team_image(LARGE, team), nodes=1,
                            script=("train.py",), runtime="torchrun")
    pod = pod_of(jobset.build(LARGE, req))
    assert req.image.startswith("111122223333.")
    policy, ns = _policy(all_objects(LARGE), POD_SECURITY_POLICY), {"openpod.io/team": team}
    assert vap.admit(policy, pod, namespace_labels=ns) == []
    pod["spec"]["containers"][0]["image"] = req.image.replace("111122223333", "444455556666")
    assert vap.admit(policy, pod, namespace_labels=ns)[0].startswith(IMAGES)


KINDS = {
    "container": lambda p, i: p["spec"]["containers"][0].update(image=i),
    "init container": lambda p, i: p["spec"]["initContainers"][0].update(image=i),
    "ephemeral container": lambda p, i: p["spec"].update(ephemeralContainers=[{"name": "dbg", "image": i}]),
    "image volume": lambda p, i: p["spec"]["volumes"].append({"name": "weights", "image": {"reference": i}}),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_container_kind_and_image_volumes_are_judged(kind):
    pod = _pod()
    KINDS[kind](pod, f"{REGISTRY}/product/secret-model:1")
    assert admit(pod)[0].startswith(IMAGES)
    ok = _pod()
    KINDS[kind](ok, f"{REGISTRY}/research/tools:1")
    assert admit(ok) == []


def test_an_ephemeral_container_from_another_teams_repository_is_refused_on_update():
    old = _pod()
    new = copy.deepcopy(old)
    KINDS["ephemeral container"](new, f"{REGISTRY}/product/secret-model:1")
    assert admit(new, old=old, subresource="ephemeralcontainers")[0].startswith(IMAGES)


def test_jobset_templates_are_judged_at_submission():
    js = jobset.build(SPEC, request("p5", "openpod"))
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = \
        f"{REGISTRY}/product/train:1"
    denied = vap.admit(_policy(all_objects(SPEC), POD_SECURITY_JOBSET_POLICY), js, namespace_labels=TEAM_NS)
    assert len(denied) == 1 and denied[0].startswith(IMAGES)


@pytest.mark.parametrize("image, admitted", [
    ("nvcr.io/nvidia/pytorch:25.01-py3", True),
    ("nvcr.io/nvidia/pytorch@sha256:" + "b" * 64, True),
    ("nvcr.io/nvidia/pytorch", True),
    ("nvcr.io/nvidia/pytorch-evil:1", False),               # a repository entry is that repository only
    ("nvcr.io/nvidia/tritonserver:25.01", False),
    ("registry.example/any/path:1", True),                  # a prefix entry
    (f"{REGISTRY}/research/train:1", False),                # the default is replaced, not extended
])
def test_a_teams_images_replace_the_default(image, admitted):
    spec = _with_images(SPEC, ["nvcr.io/nvidia/pytorch", "registry.example/"])
    assert team_images.sources(spec, spec.teams[0]) == ["nvcr.io/nvidia/pytorch", "registry.example/"]
    assert (admit(_pod(spec, image), spec) == []) is admitted


def test_the_default_is_stated_for_the_docs():
    assert team_images.default_sources(SPEC, SPEC.teams[0]) == [
        "<account>.dkr.ecr.us-east-2.amazonaws.com/research/",
        f"<account>.dkr.ecr.us-east-2.amazonaws.com/cdk-{BOOTSTRAP_QUALIFIER}-container-assets-<account>-us-east-2"]
    assert team_images.BOOTSTRAP_QUALIFIER == BOOTSTRAP_QUALIFIER


@pytest.mark.parametrize("entry", ["busybox", "nvcr.io/nvidia/pytorch:25.01", "nvcr.io/Nvidia/", "nvcr.io",
                                   "nvcr.io/a/*", f"{REGISTRY}/research/x@sha256:{'a' * 64}"])
def test_a_bad_image_source_is_one_clear_line(entry):
    data = yaml.safe_load((EXAMPLES / "default.yaml").read_text())
    data["teams"][0]["images"] = [entry]
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    (line,) = [str(p) for p in e.value.problems]
    assert line.startswith("teams[0] (research).images[0]:") and "a registry host and repository" in line, line
