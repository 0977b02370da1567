"""Losing one data-parallel rank: full restart vs in-process restart vs torchft replica healing, side by side.

    python -m benchmarks.replica_healing [--quick] [--model small] [--fault-step 13] [--every 5]
                                         [--modes restart,in-process,in-process-no-spare,replica]
                                         [--hang-floor 8]  (modes restart-hang,in-process-hang)

Both jobs train the same model on 2 ranks with the same data plan and are hit by the
same fault: the worker of rank 1 is SIGKILLed while it holds before step ``fault_step``
(rank 0 is then inside that step's gradient all-reduce).

* restart - one job of 2 workers (``--fault-tolerance restart``, ``--max-restarts 1``):
  torchrun stops the survivor too, starts both workers again, they restore the newest
  checkpoint (node memory, every ``--every`` steps) and replay the steps after it;
* in-process - the same job with ``--restart in-process``: the launcher puts its warm standby
  worker in rank 1's place (``in-process-no-spare``: starts a new worker for it); rank 0 keeps
  its process, re-forms the process group with it, both
  restore the newest checkpoint and replay the steps after it;
* replica - 2 replica groups of 1 worker (``--fault-tolerance replica``) and a torchft
  Lighthouse: only the killed group restarts; the survivor keeps its process and waits
  at the quorum; the new worker heals from the survivor's live state and both go on.

* restart-hang, in-process-hang - the same two jobs, but rank 1 stops advancing before
  ``fault_step`` (alive, its sockets open; ``OPENPOD_HANG_AT``) instead of being killed: the
  launcher's watchdog declares the hang after ``--hang-floor`` seconds. torchrun's launcher
  kills both workers and restarts them; the in-process one kills rank 1 alone, rank 0 is
  released by the new generation and re-forms its process group. Timed from the hang.

Reported per mode, from the workers' step heartbeats: seconds from the kill to the
first step any restarted worker completes ("training again"), seconds to the first
step beyond the one in flight at the kill ("new progress"), committed steps thrown
away (replayed), whether the survivor kept its process, and whether the final state
hash equals an uninterrupted run's. Heartbeats are read where the launcher writes them, node-local in
the memory tier's file system (``<memory-dir>/.beats/<node>``, training/cli.py); pid files stay in
``<checkpoint-dir>/run/ft/<node>``.

Every process this benchmark starts runs in a process group of its own, and every group is SIGKILLed on
every way out - a finished run, an error, a timeout (``--timeout`` per wait), Ctrl-C or SIGTERM - so no
training process outlives it (:class:`Children`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._ports import free_port
from training.ft import clock

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TIMEOUT_S = 300.0  # each wait (--timeout)


class Children:
    """Every process group this benchmark starts (each child leads its own session); :meth:`kill_all` SIGKILLs
    each group - the launchers, their torchrun agents and workers - and reaps the leaders."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def popen(self, args: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(args, cwd=ROOT, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def run(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        p = self.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        out, err = p.communicate(timeout=TIMEOUT_S)
        return subprocess.CompletedProcess(args, p.returncode, out, err)

    def kill_all(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the group outlives its leader: kill it whether or not it exited
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()


CHILDREN = Children()


def env(**extra: str) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("OPENPOD_")}
    e.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    return e


def base_args(tmp: Path, a, nproc: int, extra=()) -> list[str]:
    return [PY, "-m", "training", "run", "--model", a.model, "--steps", str(a.steps), "--checkpoint-every",
            str(a.every), "--checkpoint-dir", str(tmp / "ck"), "--memory-dir", str(tmp / "shm"),
            "--data-dir", str(a.data), "--nproc-per-node", str(nproc), "--seed", "1", *extra]


def beats(beats_dir: Path) -> list[dict]:
    """Every rank's newest heartbeat under ``beats_dir`` (``<memory-dir>/.beats``: one directory per node)."""
    out = []
    for p in beats_dir.rglob("rank-*.json"):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            pass
    return out


def wait_for(cond, what: str, timeout: float | None = None) -> None:
    deadline = time.monotonic() + (TIMEOUT_S if timeout is None else timeout)
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def measure(fts: list[Path], t_kill: float, fault_step: int, quiet: float = 0.0) -> dict:
    """After the kill: when a worker first completes a step (no survivor can complete one alone - the
    all-reduce needs the lost rank - so any newer heartbeat is from after the recovery), and when every
    rank is past the step that was in flight. ``quiet``: seconds after ``t_kill`` in which no step can be
    recovered yet (a hang: the peer's completion of the step before it may land just after it)."""
    again = progress = None
    deadline = time.monotonic() + TIMEOUT_S
    while again is None or progress is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for the job to train again ({TIMEOUT_S:g} s)")
        now = [b for ft in fts for b in beats(ft)]
        newer = [b["time"] for b in now if b["time"] > t_kill + quiet]
        if again is None and newer:
            again = min(newer) - t_kill
        if progress is None and newer and len(now) >= 2 and min(b["step"] for b in now) > fault_step:
            progress = clock.now() - t_kill
        time.sleep(0.02)
    return {"training_again_s": again, "new_progress_s": progress}


def run_restart(tmp: Path, a, restart: str = "process", spares: int = 1) -> dict:
    go = tmp / "go"
    log = open(tmp / "restart.err", "w")
    extra = ["--max-restarts", "1", "--restart", restart] + (["--spare-workers", str(spares)]
                                                             if restart == "in-process" else [])
    p = CHILDREN.popen(base_args(tmp, a, 2, extra), stdout=subprocess.PIPE, stderr=log, text=True,
                       env=env(OPENPOD_HOOK_WAIT=f"{a.fault_step}@2@{go}"))
    ft, hb = tmp / "ck" / "run" / "ft", tmp / "shm" / ".beats"
    wait_for(lambda: {b["rank"]: b["step"] for b in beats(hb)} == {0: a.fault_step, 1: a.fault_step},
             "both ranks at the fault step")
    time.sleep(0.5)
    pid_files = sorted(ft.rglob("pid-*"))
    survivor = int(next(f for f in pid_files if f.name == "pid-0").read_text())
    t_kill = clock.now()  # the beats' clock (training/ft/clock.py: the node's boot clock)
    os.kill(int(next(f for f in pid_files if f.name == "pid-1").read_text()), signal.SIGKILL)
    go.touch()
    m = measure([hb], t_kill, a.fault_step)
    out, _ = p.communicate(timeout=TIMEOUT_S)
    r = json.loads(out.strip().splitlines()[-1])
    if restart == "in-process":
        return {"mode": f"in-process restart, {spares} warm spare(s) (survivor re-forms its process group, "
                        f"checkpoint)", **m,
                "committed_steps_lost": a.fault_step - r["restored_step"], "restored_from": r["restored_from"],
                "survivor_kept_process": r["pid"] == survivor, "state_sha256": r["state_sha256"]}
    return {"mode": "restart (torchrun + checkpoint)", **m,
            "committed_steps_lost": a.fault_step - r["restored_step"], "restored_from": r["restored_from"],
            "survivor_kept_process": survivor in {int(f.read_text()) for f in ft.rglob("pid-*")},
            "state_sha256": r["state_sha256"]}


def run_hang(tmp: Path, a, restart: str) -> dict:
    marker = tmp / "hung"
    extra = ["--max-restarts", "1", "--restart", restart, "--hang-floor", str(a.hang_floor), "--hang-multiple", "5"]
    p = CHILDREN.popen(base_args(tmp, a, 2, extra), stdout=subprocess.PIPE, stderr=open(tmp / "hang.err", "w"),
                       text=True, env=env(OPENPOD_HANG_AT=f"{a.fault_step}@1@{marker}"))
    ft, hb = tmp / "ck" / "run" / "ft", tmp / "shm" / ".beats"
    wait_for(lambda: {b["rank"] for b in beats(hb)} == {0, 1}, "both ranks' heartbeats")
    pid_files = sorted(ft.rglob("pid-*"))
    survivor = int(next(f for f in pid_files if f.name == "pid-0").read_text())
    wait_for(marker.exists, "the hang")
    t_hang = marker.stat().st_mtime
    m = measure([hb], t_hang, a.fault_step, quiet=a.hang_floor / 2)
    out, _ = p.communicate(timeout=TIMEOUT_S)
    r = json.loads(out.strip().splitlines()[-1])
    kept = r["pid"] == survivor if restart == "in-process" else \
        survivor in {int(f.read_text()) for f in ft.rglob("pid-*")}
    return {"mode": f"{restart} restart, rank 1 hung (watchdog floor {a.hang_floor:g} s)", **m,
            "committed_steps_lost": a.fault_step - r["restored_step"], "restored_from": r["restored_from"],
            "survivor_kept_process": kept, "state_sha256": r["state_sha256"]}


def run_restart_hang(tmp: Path, a) -> dict:
    return run_hang(tmp, a, "process")


def run_in_process_hang(tmp: Path, a) -> dict:
    return run_hang(tmp, a, "in-process")


def run_in_process(tmp: Path, a) -> dict:
    return run_restart(tmp, a, "in-process", spares=1)


def run_in_process_no_spare(tmp: Path, a) -> dict:
    return run_restart(tmp, a, "in-process", spares=0)


def run_replica(tmp: Path, a) -> dict:
    port = free_port()
    CHILDREN.popen([str(Path(PY).parent / "torchft_lighthouse"), "--bind", f"[::]:{port}", "--min_replicas", "2",
                    "--heartbeat_timeout_ms", str(a.heartbeat_ms)], stdout=open(tmp / "lh.log", "w"),
                   stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    go = tmp / "go"
    procs = []
    for i in (0, 1):
        extra = ["--fault-tolerance", "replica", "--replica-id", str(i), "--replicas", "2", "--lighthouse", url,
                 "--max-restarts", "1"]
        e = env(OPENPOD_HOOK_WAIT=f"{a.fault_step}@1@{go}") if i == 1 else env()
        procs.append(CHILDREN.popen(base_args(tmp, a, 1, extra), stdout=subprocess.PIPE,
                                    stderr=open(tmp / f"r{i}.err", "w"), text=True, env=e))
    fts = [tmp / "ck" / f"replica-{i}" / "run" / "ft" for i in (0, 1)]
    hbs = [tmp / "shm" / f"replica-{i}" / ".beats" for i in (0, 1)]  # --memory-dir per group (training/cli.py)
    wait_for(lambda: [max((b["step"] for b in beats(h)), default=-1) for h in hbs] == [a.fault_step] * 2,
             "both replicas at the fault step")
    time.sleep(0.5)
    pid0, pid1 = (int(next(f.rglob("pid-0")).read_text()) for f in fts)
    t_kill = clock.now()  # the beats' clock (training/ft/clock.py: the node's boot clock)
    os.kill(pid1, signal.SIGKILL)
    go.touch()
    m = measure(hbs, t_kill, a.fault_step)
    outs = [json.loads(p.communicate(timeout=TIMEOUT_S)[0].strip().splitlines()[-1]) for p in procs]
    CHILDREN.kill_all()  # the Lighthouse
    r0, r1 = outs
    assert r0["state_sha256"] == r1["state_sha256"]
    return {"mode": "replica (torchft healing)", **m,
            "committed_steps_lost": a.fault_step - r1["restored_step"], "restored_from": r1["restored_from"],
            "survivor_kept_process": r0["fault_tolerance"]["pid"] == pid0,
            "heal_transfer_s": r1["fault_tolerance"]["healed"]["seconds"], "state_sha256": r0["state_sha256"]}


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv=None) -> None:
    global TIMEOUT_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny model, 16 steps")
    ap.add_argument("--model", default="small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--fault-step", type=int, default=13)
    ap.add_argument("--heartbeat-ms", type=int, default=2000, help="the Lighthouse's --heartbeat_timeout_ms")
    ap.add_argument("--modes", default="restart,in-process,in-process-no-spare,replica",
                    help="comma-separated, in this order (also: restart-hang, in-process-hang)")
    ap.add_argument("--hang-floor", type=float, default=8.0, help="the watchdog's floor in the *-hang modes")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds each wait may take")
    a = ap.parse_args(argv)
    all_modes = ("restart", "in-process", "in-process-no-spare", "replica", "restart-hang", "in-process-hang")
    if set(a.modes.split(",")) - set(all_modes):
        ap.error(f"--modes: choose from {', '.join(all_modes)}")
    if a.quick:
        a.model, a.steps = "tiny", 16
    if not 0 < a.fault_step < a.steps:
        ap.error("--fault-step must be inside the run")
    TIMEOUT_S = a.timeout
    work = Path(tempfile.mkdtemp(prefix="replica-healing-"))
    a.data = work / "data"
    old_term = signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so the finally below runs
    try:
        ref = CHILDREN.run(base_args(work / "ref", a, 2), env=env())
        if ref.returncode:
            raise RuntimeError(ref.stderr[-3000:])
        want = json.loads(ref.stdout.strip().splitlines()[-1])["state_sha256"]
        rows = []
        modes = {"restart": run_restart, "in-process": run_in_process, "in-process-no-spare": run_in_process_no_spare,
                 "replica": run_replica, "restart-hang": run_restart_hang, "in-process-hang": run_in_process_hang}
        for name in a.modes.split(","):
            fn = modes[name]
            d = work / name
            d.mkdir()
            r = fn(d, a)
            r["final_state_matches_uninterrupted"] = r.pop("state_sha256") == want
            rows.append(r)
            CHILDREN.kill_all()  # a mode's stragglers never overlap the next mode
    finally:
        CHILDREN.kill_all()
        signal.signal(signal.SIGTERM, old_term)
        shutil.rmtree(work, ignore_errors=True)
    print(f"model {a.model}, 2 ranks, checkpoint every {a.every} steps (node memory), fault before step "
          f"{a.fault_step}, Lighthouse heartbeat timeout {a.heartbeat_ms} ms")
    print("| mode | kill -> a restarted worker completes a step (s) | kill -> first step past the fault (s) | "
          "committed steps replayed | survivor kept its process | final state = uninterrupted |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['training_again_s']:.2f} | {r['new_progress_s']:.2f} | "
              f"{r['committed_steps_lost']} | {r['survivor_kept_process']} | "
              f"{r['final_state_matches_uninterrupted']} |")
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
