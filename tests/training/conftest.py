"""Shared fixtures for the training runtime tests: a CLI runner and a moto S3 server.

Multi-process tests are marked ``slow`` and are in no xdist group: CI's three workers (``-n 3 --dist loadgroup``,
on 2 cores) may run any three of them side by side, so none may depend on having the machine to itself (each
waits on what it holds the run at - a hook file, a beat, a Lighthouse log line - rather than on a fixed time).
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


HEALTHY_HANG_FLOOR_S = 30  # the baseline's watchdog floor: a healthy run must never come near it


def cli_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENPOD_")}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    return env


def train_args(tmp: Path, *, steps: int = 20, every: int = 5, nproc: int = 2, seed: int = 1, extra=()) -> list[str]:
    return [PY, "-m", "training", "run", "--model", "tiny", "--steps", str(steps), "--checkpoint-every", str(every),
            "--checkpoint-dir", str(tmp / "ck"), "--memory-dir", str(tmp / "shm"), "--nproc-per-node", str(nproc),
            "--seed", str(seed), *extra]


def run_cli(args: list[str], *, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=env or cli_env(), capture_output=True, text=True, timeout=timeout)


def failure_text(r: subprocess.CompletedProcess) -> str:
    """What to show when a run fails: the first worker traceback (it is often long before the end) and the tail."""
    first = r.stderr.find("Traceback")
    head = r.stderr[max(0, first - 500):first + 4000] if first >= 0 else ""
    return f"exit {r.returncode}\n--- first traceback ---\n{head}\n--- tail ---\n{r.stderr[-2000:]}"


def last_json(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines, "no output"
    return json.loads(lines[-1])


def beat_steps(tmp: Path) -> dict[int, int]:
    """rank -> the step its heartbeat last reported, from every node's node-local heartbeat directory (the
    launcher puts them under the memory tier's root, ``--memory-dir``: ``tmp / "shm"`` in train_args)."""
    from training.ft.heartbeat import read_beats

    return {b.rank: b.step for d in (tmp / "shm" / ".beats").glob("*") for b in read_beats(d)}


def wait_for(cond, what: str, timeout: float = 120.0, poll: float = 0.05) -> None:
    """Poll ``cond`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def spawn(args: list[str], *, env: dict, log: Path) -> subprocess.Popen:
    """Start a CLI in its own process group (kill the group to simulate losing the node)."""
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True,
                            start_new_session=True)


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)


def _forked_rank(rank: int, fn, *args) -> None:
    import atexit

    import torch

    atexit._clear()  # the test process's exit hooks (pytest's) are not the rank's: its exit runs only its own
    torch.set_num_threads(1)  # no OpenMP region in a forked child of a process that ran one (GNU OpenMP's pool)
    faulthandler.enable(all_threads=True)  # a rank stuck past the deadline is aborted: its threads' stacks to stderr
    fn(rank, *args)


def fork_ranks(fn, args: tuple, nprocs: int) -> None:
    """``torch.multiprocessing.spawn(fn, args, nprocs)``, the ranks forked from this test process rather than
    spawned: a spawned rank is a new interpreter that imports torch, the runtime and the test module again (~4 s of
    CPU each on the 2-core CI machine), a forked one has them already. Each rank computes on one thread and leaves
    (exit_without_teardown) running only the exit hooks it registered, as a spawned one would."""
    import torch.distributed as dist
    import torch.multiprocessing as mp

    assert not dist.is_initialized(), "a forked rank would inherit this process's default process group"
    ctx = mp.start_processes(_forked_rank, args=(fn, *args), nprocs=nprocs, join=False, start_method="fork")
    deadline = time.monotonic() + FORKED_RANKS_TIMEOUT_S
    while not ctx.join(timeout=1.0):  # raises as spawn does when a rank fails
        if time.monotonic() > deadline:  # a stuck rank fails its test instead of hanging the suite
            # SIGABRT first: faulthandler writes every thread's stack to the captured stderr before the rank dies
            # (one such hang, in test_sharded.py under a load of ~6, left nothing to read)
            for p in ctx.processes:  # one at a time: their dumps do not interleave
                if p.is_alive():
                    os.kill(p.pid, signal.SIGABRT)
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join(10)
            raise AssertionError(f"forked ranks of {fn.__name__} still running after {FORKED_RANKS_TIMEOUT_S} s "
                                 "(their stacks: the captured stderr)")


FORKED_RANKS_TIMEOUT_S = 300  # the slowest forked-rank test takes ~4 s alone, ~10 s on a loaded 2-core machine


@dataclass(frozen=True)
class SharedRun:
    """A run several tests read: its result line, its stderr and its directory (``train_args``' layout)."""

    result: dict
    stderr: str
    dir: Path


def shared_run(name: str, tmp_path_factory, worker_id: str, args, **env: str) -> SharedRun:
    """Run ``args(directory)`` (with ``env`` added to its environment) once per test run and share it: under xdist
    the first worker to need it runs it (holding a lock in the run's shared temporary folder) and the others read
    its record there. Readers must not write into ``dir`` (copy it first)."""
    def run() -> SharedRun:
        d = tmp_path_factory.mktemp(name)
        r = run_cli(args(d), env=cli_env(**env))
        assert r.returncode == 0, failure_text(r)
        return SharedRun(last_json(r.stdout), r.stderr, d)

    if worker_id == "master":
        return run()
    import fcntl

    shared = tmp_path_factory.getbasetemp().parent   # pytest-N/, one per run, common to its workers
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = shared / f"{name}.json"
        if not record.exists():
            done = run()
            record.write_text(json.dumps({"result": done.result, "stderr": done.stderr, "dir": str(done.dir)}))
        got = json.loads(record.read_text())
        return SharedRun(got["result"], got["stderr"], Path(got["dir"]))


@pytest.fixture(scope="session")
def baseline_run(tmp_path_factory, worker_id) -> SharedRun:
    """An uninterrupted 2-worker DDP run (tiny, 20 steps, checkpoint every 5, seed 1): the reference for exact
    resume, and itself the healthy run other tests look at (test_hang: no watchdog trip with a hang floor of 30 s,
    heartbeats node-local; test_sigterm: no preemption reported). Its workers are exec'd, as on a CUDA build, where
    the runs compared with it fork theirs (training/agent.py): bit-identical either way."""
    return shared_run("baseline", tmp_path_factory, worker_id,
                      lambda d: train_args(d, extra=["--hang-floor", str(HEALTHY_HANG_FLOOR_S)]),
                      OPENPOD_WORKER_START="exec")


@pytest.fixture(scope="session")
def baseline(baseline_run) -> dict:
    """The result line of :func:`baseline_run`."""
    return baseline_run.result


@pytest.fixture(scope="session")
def fsdp_baseline(tmp_path_factory, worker_id) -> SharedRun:
    """An uninterrupted 2-rank FSDP2 run (tiny, 20 steps, checkpoint every 5, seed 1): the reference of the sharded
    resume, reshard and export tests. Its workers are exec'd, as :func:`baseline_run`'s."""
    return shared_run("fsdp-baseline", tmp_path_factory, worker_id,
                      lambda d: train_args(d, extra=["--parallelism", "fsdp"]), OPENPOD_WORKER_START="exec")


@pytest.fixture(scope="session")
def moto_s3():
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    url = f"http://127.0.0.1:{port}"
    old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    yield url
    server.stop()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def bucket_name(nodeid: str) -> str:
    """A bucket of its own for each test, parametrized ones too: readable prefix, a hash of the whole node id (S3:
    3-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit)."""
    import hashlib

    slug = re.sub(r"[^a-z0-9-]+", "-", nodeid.rsplit("::", 1)[-1].lower().replace("_", "-"))[:40].strip("-")
    return f"ckpt-{slug}-{hashlib.sha256(nodeid.encode()).hexdigest()[:10]}"


@pytest.fixture
def bucket(moto_s3, request) -> str:
    import boto3

    name = bucket_name(request.node.nodeid)
    boto3.client("s3", endpoint_url=moto_s3).create_bucket(Bucket=name)
    return name
