"""openpod installed as a package (``pip install 'openpod[cdk]==X'``) in a platform team's own repository.

Synthesis needs one thing the installed package does not lay out as a checkout does: the Docker build context of
the training and node agent images (their Dockerfiles ``COPY pyproject.toml README.md openpod_core infra training
node_agent`` from the repository root; ``.dockerignore``). :func:`image_context` writes that context from the
installed distribution: its packages' files as installed (the wheel carries the Dockerfiles and
``training/constraints.txt`` as package data) and a ``pyproject.toml`` / ``README.md`` made from its metadata, so
``pip install ".[agent]"`` in the image installs the same version with the same requirements. The copy is
deterministic (same installed version, same files, same image asset hash), so a team's template snapshot
changes only when openpod (or the spec) does.

The generated app (``openpod init``: :mod:`infra.cli.init`) calls it; in an openpod checkout the checkout itself
is the context (``infra.app.stacks.REPO_ROOT``).
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import shutil
from pathlib import Path

DIST = "openpod"
# The packages the images' Dockerfiles copy (training/Dockerfile, node_agent/Dockerfile; .dockerignore).
IMAGE_PACKAGES = ("openpod_core", "infra", "node_agent", "training")
# The packages the wheel holds (pyproject.toml [tool.setuptools.packages.find]).
ALL_PACKAGES = ("openpod_core", "infra", "platform_constructs", "node_agent", "training", "observability")
SKIP = re.compile(r"(^|/)(__pycache__|[^/]*\.pyc)(/|$)")


def _package_dir(name: str) -> Path:
    import importlib

    return Path(importlib.import_module(name).__file__).resolve().parent


def _toml_str(s: str) -> str:
    return json.dumps(s)   # a JSON string is a valid TOML basic string


def pyproject(dist: md.Distribution) -> str:
    """A buildable ``pyproject.toml`` for the installed distribution: name, version, Python and requirements
    (``Requires-Dist``, extras by their ``extra == 'x'`` marker) as its metadata says."""
    meta = dist.metadata
    deps: list[str] = []
    extras: dict[str, list[str]] = {e: [] for e in meta.get_all("Provides-Extra") or []}
    for req in dist.requires or []:
        m = re.search(r";\s*extra\s*==\s*['\"]([^'\"]+)['\"]\s*$", req)
        (extras.setdefault(m.group(1), []) if m else deps).append(req[:m.start()].strip() if m else req)
    lines = ["[build-system]", 'requires = ["setuptools>=68"]', 'build-backend = "setuptools.build_meta"', "",
             "[project]", f"name = {_toml_str(meta['Name'])}", f"version = {_toml_str(meta['Version'])}",
             'readme = "README.md"']
    if meta.get("Requires-Python"):
        lines.append(f"requires-python = {_toml_str(meta['Requires-Python'])}")
    lines.append("dependencies = [" + ", ".join(map(_toml_str, deps)) + "]")
    lines += ["", "[project.optional-dependencies]"]
    lines += [f"{e} = [" + ", ".join(map(_toml_str, reqs)) + "]" for e, reqs in extras.items()]
    lines += ["", "[tool.setuptools.packages.find]",
              "include = [" + ", ".join(_toml_str(f"{p}*") for p in IMAGE_PACKAGES) + "]", "",
              "[tool.setuptools.package-data]", '"*" = ["*.yaml", "*.json", "*.md", "*.csv", "*.tmpl"]', ""]
    return "\n".join(lines)


def image_context(dest: Path) -> Path:
    """Write the images' build context for the installed openpod into ``dest`` (replaced whole) and return it."""
    dist = md.distribution(DIST)
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in IMAGE_PACKAGES:
        src = _package_dir(name)
        for f in sorted(src.rglob("*")):
            rel = f.relative_to(src)
            if f.is_file() and not SKIP.search(rel.as_posix()):
                out = tmp / name / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(f.read_bytes())
    (tmp / "pyproject.toml").write_text(pyproject(dist))
    (tmp / "README.md").write_text(f"openpod {dist.version}: the image build context `openpod init`'s app writes "
                                   "from the installed package.\n")
    (tmp / ".dockerignore").write_text("**/__pycache__\n**/*.pyc\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest
