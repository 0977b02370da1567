"""In-process restart over many generations: a survivor's process stays flat, and a SIGTERM is never lost.

``OPENPOD_EXIT_AT=12@1`` makes rank 1 exit before step 12 in every incarnation, so the launcher replaces it
again and again and rank 0 - the same process throughout - re-forms its process group once a generation
(restore step 10, steps 10 and 11, the failure). Rank 0 logs its open fds and threads (Python's and the
kernel's, /proc/self/task) as it joins each generation; the test also counts the files under the job's
memory tier (``--memory-dir``, /dev/shm on a node) at each join. Before the fix each generation left one
more fd (the stack-dump file, opened again by each generation's runtime). 6 generations here (a few seconds
each); ``tools/inprocess_generations.py`` runs 20 and prints the table in docs/training.md.
"""

import json
import os
import re
import signal
import time

import pytest

from tests.training.conftest import cli_env, kill_group, spawn, train_args, wait_for

pytestmark = [pytest.mark.slow]

JOINED = re.compile(r"rank 0 joined the process group of generation (\d+) in [\d.]+s "
                    r"\(fds (\d+), threads (\d+) python (\d+) os\)")
GENERATIONS = 6


def shm_files(tmp_path) -> int:
    return sum(1 for p in (tmp_path / "shm").rglob("*") if p.is_file() and ".beats" not in p.parts)


def test_a_survivor_is_flat_in_fds_threads_and_shm_files_across_generations(tmp_path):
    log_path = tmp_path / "run.log"
    args = train_args(tmp_path, extra=["--restart", "in-process", "--max-restarts", str(GENERATIONS)])
    p = spawn(args, env=cli_env(OPENPOD_EXIT_AT="12@1"), log=log_path)
    seen: dict[int, tuple[int, ...]] = {}
    try:
        while p.poll() is None and len(seen) <= GENERATIONS:
            for m in JOINED.finditer(log_path.read_text()):
                g = int(m.group(1))
                if g not in seen:
                    seen[g] = (*map(int, m.group(2, 3, 4)), shm_files(tmp_path))
            time.sleep(0.05)
        p.communicate(timeout=120)
    finally:
        kill_group(p) if p.poll() is None else None
    log = log_path.read_text()
    assert f"--max-restarts {GENERATIONS} used up" in log, log[-3000:]
    assert sorted(seen) == list(range(GENERATIONS + 1)), (seen, log[-3000:])
    # Generation 0 joins before any runtime existed. A generation's peer server closes in the background (its
    # accept loop polls every 0.5 s), so one join may still see it (one more fd and thread): compare the lowest
    # figure of generations 4-6 with the lowest of 1-3 - a leak raises every later one.
    for i, what in enumerate(["open fds", "Python threads", "OS threads", "memory-tier files"]):
        early = min(seen[g][i] for g in (1, 2, 3))
        late = min(seen[g][i] for g in range(4, GENERATIONS + 1))
        assert late <= early, f"{what} grew from generations 1-3 to 4-{GENERATIONS}: {seen}"


def test_sigterm_between_generations_stops_the_job_after_the_next_generations_first_step(tmp_path):
    """The launcher gets SIGTERM while the survivor waits for the replacement (a fresh worker, still importing)
    to join generation 1. Both record it; the first step of generation 1 agrees on the stop, that step is
    written durably and the launcher exits 143 - as a SIGTERM in the middle of a generation does
    (test_sigterm.py). Before: the survivor's new runtime started with no request and the replacement died of
    the signal; the job ended as a failure.

    The workers are exec'd (the CUDA path's start): a forked replacement starts with everything imported and
    joins at once, leaving no time to signal between generations; this test is also the CPU suite's run of
    in-process restart with exec'd workers."""
    log_path = tmp_path / "run.log"
    args = train_args(tmp_path, extra=["--restart", "in-process", "--max-restarts", "2", "--spare-workers", "0",
                                       "--stop-timeout", "120"])
    p = spawn(args, env=cli_env(OPENPOD_EXIT_AT="12@1", OPENPOD_WORKER_START="exec"), log=log_path)
    try:
        wait_for(lambda: "re-forming the process group in generation 1" in log_path.read_text(),
                 "the survivor between generations", timeout=180, poll=0.02)
        time.sleep(0.5)  # the replacement's interpreter is up; it is importing torch
        os.kill(p.pid, signal.SIGTERM)
        out, _ = p.communicate(timeout=180)
    finally:
        kill_group(p) if p.poll() is None else None
    log = log_path.read_text()
    assert p.returncode == 143, f"exit {p.returncode}\n{log[-4000:]}"
    assert out.strip(), f"no result: the stop was not agreed and checkpointed\n{log[-4000:]}"
    result = json.loads(out.strip().splitlines()[-1])
    assert result["restart"]["generation"] == 1 and result["restored_step"] == 10, result
    assert result["preempted"]["step"] == 11 and result["preempted"]["durable"], result
    assert "stopped by SIGTERM at step 11" in log
    assert result["worker_start"] == "exec", result
