"""The training image against the facts register: NCCL must load the EFA plugin the image really installs."""

from __future__ import annotations

import re
from pathlib import Path

from openpod_core.facts.register import value

DOCKERFILE = Path(__file__).resolve().parents[2] / "training" / "Dockerfile"


def final_stage(text: str) -> str:
    """The Dockerfile text from its last FROM on (what the image runs with)."""
    return text[text.rindex("\nFROM ") :]


def dockerfile_args(text: str) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)", text, re.M))


def env_value(stage: str, name: str) -> str:
    m = re.search(rf"\b{name}=(\S+)", stage)
    assert m, f"{name} is not set in the final stage"
    return m.group(1)


def test_pinned_versions_match_the_facts_register():
    args = dockerfile_args(DOCKERFILE.read_text())
    assert args["AWS_OFI_NCCL_VERSION"] == value("aws-ofi-nccl.version")
    assert args["NCCL_VERSION"] == value("nccl.version")


def test_nccl_net_plugin_names_the_library_the_pinned_aws_ofi_nccl_installs():
    # NCCL dlopen()s NCCL_NET_PLUGIN as given and, when that fails, only logs at INFO and falls back to its
    # own transports (facts: nccl.net-plugin-env): a wrong name silently runs without EFA.
    stage = final_stage(DOCKERFILE.read_text())
    plugin = env_value(stage, "NCCL_NET_PLUGIN")
    assert plugin == f"/opt/aws-ofi-nccl/lib/{value('aws-ofi-nccl.nccl-plugin-library')}"
    # ... and that directory is the one the build stage installs into and the final stage copies.
    assert "--prefix=/opt/aws-ofi-nccl" in DOCKERFILE.read_text()
    assert "COPY --from=build /opt/aws-ofi-nccl /opt/aws-ofi-nccl" in stage


def test_every_pinned_libnccl_install_may_change_the_base_image_hold():
    # The CUDA base images hold libnccl2 (facts: cuda-image.nccl-held); apt-get -y refuses to change a held
    # package without --allow-change-held-packages.
    text = DOCKERFILE.read_text()
    runs = [r for r in re.split(r"\n(?=RUN )", text) if r.startswith("RUN ") and "libnccl2=" in r]
    assert len(runs) == 2, "expected one pinned NCCL install per stage"
    for run in runs:
        assert "--allow-change-held-packages" in run, run
