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
