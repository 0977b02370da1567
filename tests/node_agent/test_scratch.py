"""Cleanup of per-job node-local checkpoint directories: only unmounted and idle ones go."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from openpod_core import labels as L
from infra.governance import job_launcher
from node_agent import deploy, scratch
from node_agent.config import AgentConfig
from node_agent.detector import Detector
from node_agent.kube import InMemoryCluster
from tests.node_agent.conftest import fixture_text

HOUR = 3600.0


def make_job(root: Path, team: str, job: str, *, idle_hours: float, now: float, nbytes: int = 1000) -> Path:
    """A job directory laid out like the training runtime's node-local tier, last touched ``idle_hours`` ago."""
    d = root / team / job
    snap = d / "ip-10-1-2-3" / "step_000000020" / "rank_00000"
    snap.mkdir(parents=True)
    (snap / "__0_0.distcp").write_bytes(b"x" * nbytes)
    t = now - idle_hours * HOUR
    for p in sorted(d.rglob("*"), reverse=True) + [d]:
        os.utime(p, (t, t))
    return d


def fake_proc(tmp: Path, mountinfo: dict[str, str]) -> Path:
    proc = tmp / "proc"
    for pid, text in mountinfo.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "mountinfo").write_text(text)
    (proc / "self").mkdir(parents=True)  # not a pid: ignored
    return proc


def test_mounted_jobs_come_from_the_recorded_mountinfo_of_a_training_pod(tmp_path):
    proc = fake_proc(tmp_path, {"1": "22 1 259:1 / / rw - xfs /dev/nvme0n1p1 rw\n",
                                "4242": fixture_text("host", "mountinfo-training-pod.txt")})
    assert scratch.mounted_jobs(proc) == {"research/llama-p5"}


def test_sweep_removes_only_idle_unmounted_job_directories(tmp_path):
    now = time.time()
    memory, nvme = tmp_path / "shm-openpod", tmp_path / "nvme-openpod"
    gone = make_job(memory, "research", "old-run", idle_hours=30, now=now, nbytes=4096)
    gone_nvme = make_job(nvme, "research", "old-run", idle_hours=30, now=now)
    recent = make_job(memory, "research", "paused-run", idle_hours=2, now=now)
    running = make_job(memory, "research", "llama-p5", idle_hours=30, now=now)  # idle but mounted
    other_team = make_job(nvme, "platform", "sweep", idle_hours=48, now=now)
    touched = make_job(memory, "platform", "long-run", idle_hours=30, now=now)
    (touched / "ip-10-1-2-3" / "step_000000040").mkdir()  # a new checkpoint a moment ago
    proc = fake_proc(tmp_path, {"4242": fixture_text("host", "mountinfo-training-pod.txt")})

    removed = scratch.sweep([memory, nvme, tmp_path / "missing-root"], proc, ttl_seconds=24 * HOUR, now=now)

    assert sorted(r.path for r in removed) == sorted([gone, gone_nvme, other_team])
    assert {r.path: r.nbytes for r in removed}[gone] == 4096
    assert all(r.idle_hours >= 29.9 for r in removed)
    assert not gone.exists() and not other_team.exists() and not (nvme / "platform").exists()
    assert recent.exists() and running.exists() and touched.exists()


def test_without_a_readable_proc_nothing_idle_is_removed(tmp_path):
    now = time.time()
    root = tmp_path / "shm-openpod"
    make_job(root, "research", "fresh", idle_hours=1, now=now)
    assert scratch.sweep([root], tmp_path / "no-proc", ttl_seconds=24 * HOUR, now=now) == []  # nothing idle
    make_job(root, "research", "older", idle_hours=40, now=now)
    with pytest.raises(FileNotFoundError, match="keeping them all"):
        scratch.sweep([root], tmp_path / "no-proc", ttl_seconds=24 * HOUR, now=now)
    assert (root / "research" / "older").exists()


def test_detector_sweeps_its_configured_roots_and_counts_what_it_freed(tmp_path):
    now = time.time()
    cfg = AgentConfig.model_validate({"scratch": {"mount_prefix": str(tmp_path / "host-scratch"), "ttl_hours": 1},
                                      "host": {"proc_root": str(fake_proc(tmp_path, {}))}})
    root = Path(cfg.scratch.mount_prefix + L.HOST_MEMORY_TIER)
    make_job(root, "research", "done", idle_hours=3, now=now, nbytes=512)
    det = Detector(InMemoryCluster(), "node-1", None, config=cfg)
    assert det.sweep_scratch() == []
    assert not (root / "research" / "done").exists()
    assert det.metrics.scratch_removed._value.get() == 1
    assert det.metrics.scratch_removed_bytes._value.get() == 512


def test_daemonset_mounts_the_roots_training_pods_use():
    pod = deploy.detector_daemonset("img", "amd64")["spec"]["template"]["spec"]
    vols = {v["name"]: v["hostPath"] for v in pod["volumes"] if v["name"].startswith("job-scratch")}
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert sorted(v["path"] for v in vols.values()) == sorted(L.JOB_SCRATCH_ROOTS)
    for name, v in vols.items():
        assert mounts[name]["mountPath"] == "/host-scratch" + v["path"] and not mounts[name]["readOnly"]
    assert job_launcher.MEMORY_DIR not in L.JOB_SCRATCH_ROOTS  # the pod sees its own directory elsewhere
