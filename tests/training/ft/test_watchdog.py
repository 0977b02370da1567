import os
import subprocess
import sys
import time
from pathlib import Path

from training.ft.watchdog import Watchdog

ROOT = Path(__file__).resolve().parents[3]

WORKER = """
import sys, time
from training.ft.heartbeat import Heartbeat
from training.ft.watchdog import install_stack_dump
d, rank = sys.argv[1], int(sys.argv[2])
install_stack_dump(d, rank)
hb = Heartbeat(d, rank)
for step in range(3):
    hb.beat(step); time.sleep(0.05)
def stuck_in_collective():
    time.sleep(3600)  # fault hook: this rank stops advancing
stuck_in_collective()
"""


def test_watchdog_fires_dumps_stacks_and_kills(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(r)],
                              env={**os.environ, "PYTHONPATH": str(ROOT)}) for r in (0, 1)]
    try:
        wd = Watchdog(tmp_path, floor_s=0.5, multiple=2.0, dump_wait_s=0.5)
        start = time.time()
        fired = False
        while time.time() - start < 20:
            if wd.check([p.pid for p in procs]):
                fired = True
                break
            time.sleep(0.1)
        assert fired
        for p in procs:
            assert p.wait(timeout=5) != 0
        for r in (0, 1):
            assert "stuck_in_collective" in (tmp_path / f"stacks-rank-{r}.txt").read_text()
    finally:
        for p in procs:
            p.kill()


BEATING = """
import sys, time
from training.ft.heartbeat import Heartbeat
hb = Heartbeat(sys.argv[1], int(sys.argv[2]))
for step in range(60):
    hb.begin(step); hb.beat(step + 1); time.sleep(0.05)
"""


def test_a_forward_wall_clock_step_does_not_kill_workers(tmp_path, monkeypatch):
    """Issue 38, failed on the old code: beats carried wall-clock times and the watchdog compared them with its own
    wall clock, so a 600 s forward step of the wall clock (NTP, a resumed VM) made every rank look quiet for 600 s
    and the watchdog killed every worker. Beats and watchdog read the node's boot clock (one clock for every
    process on the node); the watchdog's wall clock is stepped here and the worker keeps beating."""
    p = subprocess.Popen([sys.executable, "-c", BEATING, str(tmp_path), "0"],
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wd = Watchdog(tmp_path, floor_s=5.0, multiple=2.0, dump_wait_s=0.1)
        deadline = time.monotonic() + 20
        while not wd.beats() and time.monotonic() < deadline:
            time.sleep(0.05)
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 600.0)
        for _ in range(10):
            assert not wd.check([p.pid]), f"quiet for {wd.quiet():.0f}s"
            assert wd.quiet() < 5.0
            time.sleep(0.05)
        assert p.poll() is None  # not killed
    finally:
        p.kill()
        p.wait()


def test_the_watchdog_line_says_what_happens_next(tmp_path, capfd):
    """Issue 38, failed on the old code: with the default --max-restarts 0 the line said "restarting the workers"
    while the job then failed. A hung worker (here: a stale beat, its pid the supervised process) is killed and the
    line says the job stops."""
    import json

    from training import cli
    from training.ft import clock
    from training.ft.heartbeat import Beat

    (tmp_path / "rank-0.json").write_text(json.dumps(Beat(0, 3, clock.now() - 100, 0.1).__dict__))
    cmd = [sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
           "time.sleep(60)", str(tmp_path / "pid-0")]
    rc, _ = cli._supervise(cmd, dict(os.environ), tmp_path, floor_s=1.0, multiple=2.0)
    assert rc != 0
    line = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("watchdog: ")]
    assert len(line) == 1 and line[0].endswith("stopping the job: --max-restarts 0 allows no restart (rerun to "
                                               "resume)"), line
