"""``openpod init DIR``: a platform team's own repository, with openpod as a pinned package (infra/cli/scaffold/).

Writes the spec (``openpod.yaml``, the bundled example), ``app.py`` (the CDK app on the installed package),
``cdk.json``, ``requirements.txt`` (the one pinned version), ``pytest.ini`` and ``tests/test_platform.py`` (the
platform's templates against reviewed snapshots), ``.github/workflows/platform.yaml`` (synth-only setup),
``package.json`` (the CDK CLI), ``.gitignore`` and ``README.md`` (set up, change, upgrade). DIR must not exist or
be empty; the files appear together (written beside it, then renamed into place) with the user's umask.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

import click

from infra.cli.common import fail

# file in infra/cli/scaffold -> where it goes in the new repository
FILES = {
    "openpod.yaml": "openpod.yaml",
    "app.py.tmpl": "app.py",
    "cdk.json": "cdk.json",
    "package.json": "package.json",
    "requirements.txt.tmpl": "requirements.txt",
    "pytest.ini.tmpl": "pytest.ini",
    "test_platform.py.tmpl": "tests/test_platform.py",
    "workflow.yaml": ".github/workflows/platform.yaml",
    "gitignore.tmpl": ".gitignore",
    "README.md.tmpl": "README.md",
}
VERSION_MARK = "@OPENPOD_VERSION@"


def openpod_version() -> str:
    try:
        return md.version("openpod")
    except md.PackageNotFoundError:   # pragma: no cover - a checkout without `pip install -e .`
        return "0.0.0"


def scaffold(dest: Path, version: str) -> list[str]:
    """Write the repository into ``dest`` (absent or empty); the relative paths written."""
    if dest.exists() and not dest.is_dir():
        fail(f"{dest}: exists and is not a directory; give a new or empty directory")
    if dest.is_dir() and any(dest.iterdir()):
        fail(f"{dest}: not empty; openpod init writes into a new or empty directory only")
    parent = dest.resolve().parent
    if not parent.is_dir():
        fail(f"{dest}: its parent directory {parent} does not exist")
    umask = os.umask(0)
    os.umask(umask)
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=parent))
    except OSError as e:
        fail(f"{dest}: cannot write in {parent}: {e.strerror or e}")
    try:
        os.chmod(stage, 0o777 & ~umask)
        root = resources.files("infra.cli.scaffold")
        for src, rel in FILES.items():
            text = root.joinpath(src).read_text(encoding="utf-8").replace(VERSION_MARK, version)
            out = stage / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
        if dest.is_dir():
            dest.rmdir()
        stage.rename(dest)
    except OSError as e:
        shutil.rmtree(stage, ignore_errors=True)
        fail(f"{dest}: cannot write: {e.strerror or e}")
    return list(FILES.values())


@click.command()
@click.argument("directory", type=click.Path(file_okay=True, dir_okay=True))
def init(directory: str) -> None:
    """Scaffold a platform team's repository in DIRECTORY (new or empty): spec, CDK app on the installed openpod,
    snapshot test, GitHub workflow, README with the upgrade path."""
    if directory == "":
        fail("DIRECTORY '' is empty; give the path of a new or empty directory")
    version = openpod_version()
    written = scaffold(Path(directory), version)
    click.echo(f"wrote {len(written)} files to {directory} (openpod {version}); next: see {directory}/README.md")
