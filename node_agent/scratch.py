"""Job scratch on the node: the per-job directories of the node-local checkpoint tiers, and their cleanup.

Training pods mount ``<root>/<team>/<job>`` of each root in ``openpod_core.labels.JOB_SCRATCH_ROOTS``
(host memory, NVMe) as hostPaths, so node-local snapshots outlive the pods. Nothing in
Kubernetes removes a hostPath directory, so the agent does: a job directory goes once
no container on the node mounts it and nothing in it changed for the time to live.
Both conditions must hold; a directory that cannot be judged is kept.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("node_agent.scratch")


@dataclass(frozen=True)
class JobDir:
    path: Path          # as the agent sees it (under its mount of the root)
    team: str
    job: str
    newest_mtime: float
    nbytes: int

    @property
    def key(self) -> str:
        return f"{self.team}/{self.job}"


def _tree(path: Path) -> tuple[float, int]:
    """Newest mtime and total size of a directory tree (entries vanishing meanwhile are skipped)."""
    newest, total = 0.0, 0
    for dirpath, _, filenames in os.walk(path):  # each directory is visited once, as dirpath
        for p in [dirpath, *(os.path.join(dirpath, f) for f in filenames)]:
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            newest = max(newest, st.st_mtime)
            if p != dirpath:
                total += st.st_size
    return newest, total


def job_dirs(root: Path) -> list[JobDir]:
    """The ``<team>/<job>`` directories under ``root``."""
    out = []
    for team in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        for job in sorted(p for p in team.iterdir() if p.is_dir()):
            newest, nbytes = _tree(job)
            out.append(JobDir(job, team.name, job.name, newest, nbytes))
    return out


def mounted_jobs(proc: Path) -> set[str]:
    """``team/job`` of every job scratch directory some process on the node has mounted.

    Reads the ``root`` field (the 4th) of each ``/proc/<pid>/mountinfo`` line: for a
    hostPath volume it is the directory's path inside the file system it lives on,
    e.g. ``/openpod/research/llama-p5`` for ``/dev/shm/openpod/research/llama-p5``.
    """
    found: set[str] = set()
    for pid in proc.iterdir():
        if not pid.name.isdigit():
            continue
        try:
            text = (pid / "mountinfo").read_text()
        except OSError:  # the process exited, or we may not read it
            continue
        for line in text.splitlines():
            fields = line.split()
            if len(fields) < 5:
                continue
            parts = fields[3].strip("/").split("/")
            if "openpod" in parts:
                i = parts.index("openpod")
                if len(parts) >= i + 3:
                    found.add(f"{parts[i + 1]}/{parts[i + 2]}")
    return found


@dataclass(frozen=True)
class Removed:
    path: Path
    nbytes: int
    idle_hours: float


def sweep(roots: list[Path], proc: Path, *, ttl_seconds: float, now: float | None = None) -> list[Removed]:
    """Remove job directories under ``roots`` that nothing mounts and that were idle for ``ttl_seconds``."""
    now = time.time() if now is None else now
    candidates = [d for root in roots for d in job_dirs(root) if now - d.newest_mtime >= ttl_seconds]
    if not candidates:
        return []
    if not proc.is_dir():
        raise FileNotFoundError(f"cannot read {proc} to see which job directories are mounted; keeping them all")
    in_use = mounted_jobs(proc)
    removed = []
    for d in candidates:
        idle = now - d.newest_mtime
        if d.key in in_use:
            continue
        shutil.rmtree(d.path, ignore_errors=True)
        if d.path.exists():
            log.warning("could not remove job scratch %s", d.path)
            continue
        log.info("removed job scratch %s (%d bytes, idle %.1f h, not mounted)", d.path, d.nbytes, idle / 3600)
        removed.append(Removed(d.path, d.nbytes, idle / 3600))
        try:
            d.path.parent.rmdir()  # the team directory, once empty
        except OSError:
            pass
    return removed
