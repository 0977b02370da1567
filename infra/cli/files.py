"""Where the CLI writes: an ``--out`` checked before anything is written, and files written atomically with the
user's umask (:mod:`openpod_core.files`), a failure said in one line."""

from __future__ import annotations

from pathlib import Path

from infra.cli.common import fail
from openpod_core.files import write_text_atomic


def out_dir_or_exit(out: str, option: str = "--out") -> Path:
    """``out`` as a directory to write into (made if missing), or exit 2 naming the option."""
    if not out.strip():
        fail(f"{option} '' is empty; give the directory to write into, e.g. {option} out/")
    path = Path(out)
    if path.exists() and not path.is_dir():
        fail(f"{option} {out}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"{option} {out}: cannot write: cannot create the directory: {e.strerror or e}")
    return path


def write_text_or_exit(path: str | Path, option: str, text: str) -> None:
    """Write one file atomically, or exit 2 naming ``option`` and why."""
    if not str(path).strip() or Path(path).name in ("", ".", ".."):
        fail(f"{option} {str(path)!r}: give a file path, e.g. {option} openpod.schema.json")
    path = Path(path)
    if path.is_dir():
        fail(f"{option} {path}: is a directory; give a file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    except OSError as e:
        fail(f"{option} {path}: cannot write: {e.strerror or e}")
