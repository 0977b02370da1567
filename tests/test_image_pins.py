"""The project's images against the facts register: every base image is pinned by a digest read from a cited
source (or listed as unverified), every downloaded tarball is checked against a cited checksum (or listed as
unverified), and the final stages' paths are the ones the pinned components install."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openpod_core.facts.register import value
from openpod_core.facts.unverified import UNVERIFIED

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILES = {"training": ROOT / "training" / "Dockerfile", "node_agent": ROOT / "node_agent" / "Dockerfile"}
UNVERIFIED_TEXT = " ".join(f"{what} {assumed}" for what, assumed in UNVERIFIED)
# Checksum build args and the facts that hold their values.
CHECKSUM_FACTS = {"EFA_INSTALLER_SHA256": "efa-installer.sha256"}


def args(text: str) -> dict[str, str]:
    """ARG defaults, the way `docker build` resolves them without --build-arg."""
    return dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))


def render(text: str, s: str) -> str:
    values = args(text)
    return re.sub(r"\$\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), s)


def base_images(text: str) -> list[str]:
    return [render(text, ref) for ref in re.findall(r"^FROM (\S+)", text, re.M)]


def runs(text: str) -> list[str]:
    """Each RUN instruction with its continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    return [line for line in joined.splitlines() if line.startswith("RUN ")]


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_every_base_image_is_pinned_by_digest_or_listed_unverified(name):
    text = DOCKERFILES[name].read_text()
    for ref in base_images(text):
        if "@sha256:" in ref:
            continue
        assert ref in UNVERIFIED_TEXT, (
            f"{name}: FROM {ref} has no digest and no entry in openpod_core.facts.unverified.UNVERIFIED")


def test_node_agent_base_is_the_digest_docker_library_publishes():
    text = DOCKERFILES["node_agent"].read_text()
    [ref] = base_images(text)
    image, digest = ref.split("@")
    assert image.endswith("/python:3.11-slim-bookworm")
    assert digest == value("image.python-3.11-slim-bookworm.index-digest")


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_every_downloaded_tarball_is_checked_against_a_cited_checksum(name):
    text = DOCKERFILES[name].read_text()
    for run in runs(text):
        for url in re.findall(r"https://\S+?\.tar\.gz", run):
            url = render(text, url).strip('"')
            checked = re.search(r'echo "\$\{(\w+)\}\s+\S+"\s*\|\s*sha256sum -c', run)
            if checked:
                assert args(text)[checked.group(1)] == value(CHECKSUM_FACTS[checked.group(1)]), url
            else:
                tarball = url.rsplit("/", 1)[-1]
                stem = re.sub(r"-[\d.]+\.tar\.gz$", "", tarball)
                assert f"{stem} tarball" in UNVERIFIED_TEXT, (
                    f"{name}: {url} is unpacked without a checksum and not listed unverified")


def test_the_efa_installer_checksum_is_for_the_pinned_version():
    text = DOCKERFILES["training"].read_text()
    assert args(text)["EFA_INSTALLER_VERSION"] == value("efa-installer.version")
    assert args(text)["EFA_INSTALLER_SHA256"] == value("efa-installer.sha256")


def test_final_stage_paths_are_the_ones_the_pinned_components_install():
    # The training image: libfabric from the EFA installer's prefix, the NCCL plugin from aws-ofi-nccl's prefix,
    # both on the runtime linker path of the final stage (facts: efa-installer.prefix,
    # aws-ofi-nccl.nccl-plugin-library).
    text = DOCKERFILES["training"].read_text()
    final = text[text.rindex("\nFROM "):]
    efa = value("efa-installer.prefix")
    assert f"--with-libfabric={efa} " in text
    ld_path = re.search(r"LD_LIBRARY_PATH=(\S+)", final).group(1).split(":")
    plugin = re.search(r"NCCL_NET_PLUGIN=(\S+)", final).group(1)
    assert plugin.rsplit("/", 1) == ["/opt/aws-ofi-nccl/lib", value("aws-ofi-nccl.nccl-plugin-library")]
    assert "/opt/aws-ofi-nccl/lib" in ld_path and f"{efa}/lib" in ld_path
    assert f"{efa}/bin" in re.search(r"PATH=(\S+)", final).group(1).split(":")
    # The node agent uses the host's EFA tools through its /host mount.
    agent = DOCKERFILES["node_agent"].read_text()
    assert f"/host{efa}/bin" in re.search(r'PATH="([^"]+)"', agent).group(1).split(":")


def test_aws_ofi_nccl_is_built_from_the_commit_its_release_tag_names():
    # No checksum of the release tarball is published (aws/aws-ofi-nccl at the tag has none), so the image clones
    # the tag and refuses to build unless HEAD is the commit the tag points at (fact aws-ofi-nccl.commit): a git
    # commit id is a hash of the tree, so a moved tag or a tampered mirror fails the build.
    text = DOCKERFILES["training"].read_text()
    a = args(text)
    assert a["AWS_OFI_NCCL_VERSION"] == value("aws-ofi-nccl.version")
    assert a["AWS_OFI_NCCL_COMMIT"] == value("aws-ofi-nccl.commit")
    assert re.fullmatch(r"[0-9a-f]{40}", a["AWS_OFI_NCCL_COMMIT"])
    [build] = [r for r in runs(text) if "aws-ofi-nccl" in r and "./configure" in r]
    assert "aws-ofi-nccl/releases/download" not in build
    clone = re.search(r"git clone .*?--branch \"?v\$\{AWS_OFI_NCCL_VERSION\}\"? \S*github\.com/aws/aws-ofi-nccl\S*",
                      build)
    assert clone, build
    check = re.search(r'test "\$\(git rev-parse HEAD\)" = "\$\{AWS_OFI_NCCL_COMMIT\}"', build)
    assert check and clone.end() < check.start() < build.index("./autogen.sh") < build.index("./configure"), build
    # configure adds -Werror when it finds a .git directory (configure.ac:242-245 at the tag) unless told not to.
    assert "--disable-werror" in build
    assert "aws-ofi-nccl tarball" not in UNVERIFIED_TEXT


def test_no_build_arg_can_change_part_of_a_digest_pinned_base_image():
    # `FROM image:${TAG}@digest` pulls the digest whatever --build-arg TAG says: overriding the tag would
    # silently build the pinned image under another name. Digest-pinned references are written out whole
    # (or come whole from one ARG, which an override replaces entirely: node_agent/Dockerfile's BASE).
    for name, path in DOCKERFILES.items():
        for ref in re.findall(r"^FROM (\S+)", path.read_text(), re.M):
            if "@" in ref:
                assert "${" not in ref, f"{name}: {ref}"
            elif ref.startswith("${"):
                assert re.fullmatch(r"\$\{\w+\}", ref) and "@sha256:" in render(path.read_text(), ref), f"{name}: {ref}"


def test_the_cuda_base_images_are_pinned_by_the_digests_in_the_facts_register():
    # Both stages of the training image, by digest: a moved tag cannot change what is built, and a digest the
    # registry does not hold fails the pull instead of fetching another image.
    text = DOCKERFILES["training"].read_text()
    refs = base_images(text)
    assert refs == [
        f"nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04@{value('image.cuda-12.8.1-cudnn-devel-ubuntu24.04.digest')}",
        f"nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04@{value('image.cuda-12.8.1-cudnn-runtime-ubuntu24.04.digest')}",
    ]
    assert "training image base images" not in UNVERIFIED_TEXT
