"""ContainerImage: a Dockerfile in the repository built into ECR at deploy time (synth needs no Docker)."""

from __future__ import annotations

from typing import Sequence

from aws_cdk import IgnoreMode
from aws_cdk import aws_ecr_assets as ecr_assets
from constructs import Construct

PLATFORMS = {
    "x86_64": ecr_assets.Platform.LINUX_AMD64,
    "arm64": ecr_assets.Platform.LINUX_ARM64,
}


class ContainerImage(Construct):
    """One ``DockerImageAsset`` per CPU architecture in ``architectures``.

    The build context is ``directory`` (the repository root, so images can
    install the project's own packages) trimmed by its ``.dockerignore``;
    ``file`` is the Dockerfile relative to it. ``image_uri(arch)`` gives the
    ECR URI to run.
    """

    def __init__(self, scope: Construct, id: str, *, directory: str, file: str,
                 architectures: Sequence[str] = ("x86_64",)) -> None:
        super().__init__(scope, id)
        unknown = sorted(set(architectures) - set(PLATFORMS))
        if unknown or not architectures:
            raise ValueError(f"ContainerImage: architectures must be a non-empty subset of {sorted(PLATFORMS)}, "
                             f"got {list(architectures)}")
        self.assets: dict[str, ecr_assets.DockerImageAsset] = {}
        for arch in sorted(set(architectures)):
            self.assets[arch] = ecr_assets.DockerImageAsset(
                self, arch.replace("_", "-"), directory=directory, file=file, platform=PLATFORMS[arch],
                ignore_mode=IgnoreMode.DOCKER,
            )

    def image_uri(self, arch: str) -> str:
        try:
            return self.assets[arch].image_uri
        except KeyError:
            raise ValueError(f"ContainerImage.image_uri: no image built for {arch!r}; "
                             f"built: {sorted(self.assets)}") from None
