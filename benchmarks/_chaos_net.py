"""Stand-ins the chaos families need beside the job (benchmarks/_chaos_families.py): a bandwidth-throttled S3
(a TCP proxy in front of the moto server), a wall-clock step seen by every Python process of a job (no root, no
``date -s``), and a poller measuring how far each shared tier is behind node memory while a job runs."""

from __future__ import annotations

import re
import socket
import statistics
import threading
import time
from pathlib import Path


class ThrottledProxy:
    """127.0.0.1:``port`` forwards to 127.0.0.1:``target``; what clients send (the uploads) passes at ``rate``
    bytes/s in all, shared by every connection (one link to S3 for the node); replies pass unthrottled."""

    def __init__(self, target: int, rate: float):
        self.target, self.rate = target, float(rate)
        self._lock = threading.Lock()
        self._free_at = time.monotonic()
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            for a, b, slow in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pipe, args=(a, b, slow), daemon=True).start()

    def _take(self, n: int) -> None:
        with self._lock:  # the bytes queued before these go first
            now = time.monotonic()
            self._free_at = max(now, self._free_at) + n / self.rate
            done = self._free_at
        time.sleep(max(0.0, done - now))

    def _pipe(self, src: socket.socket, dst: socket.socket, slow: bool) -> None:
        try:
            while True:
                data = src.recv(8192)
                if not data:
                    break
                if slow:
                    self._take(len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._srv.close()


# Imported by every Python process of a job whose PYTHONPATH starts with its folder (site.py imports
# sitecustomize from sys.path): once the file named by CHAOS_CLOCK_STEP ("path@seconds") exists, time.time()
# reads that many seconds off - the wall clock stepped (NTP, a resumed VM) at one moment for the whole node.
# The boot and monotonic clocks do not move, as in a real step. No thread (forked workers keep it working).
CLOCK_HOOK = '''\
import os as _os
import time as _time

_spec = _os.environ.get("CHAOS_CLOCK_STEP", "")
if _spec:
    _path, _secs = _spec.rsplit("@", 1)
    _real, _mono, _state = _time.time, _time.monotonic, {"off": 0.0, "next": 0.0}

    def _stepped_time():
        if not _state["off"] and _mono() >= _state["next"]:
            _state["next"] = _mono() + 0.05
            if _os.path.exists(_path):
                _state["off"] = float(_secs)
        return _real() + _state["off"]

    _time.time = _stepped_time
'''


def clock_hook_dir(parent: Path) -> Path:
    """A folder holding the wall-clock-step hook (put it first on PYTHONPATH, set CHAOS_CLOCK_STEP)."""
    d = parent / "clock-hook"
    d.mkdir(parents=True, exist_ok=True)
    (d / "sitecustomize.py").write_text(CLOCK_HOOK)
    return d


def _newest(steps) -> int:
    return max(steps, default=0)


class LagWatch(threading.Thread):
    """Samples, every ``period`` s while a job runs, the newest step in node memory (rank 0's part) and the newest
    complete step in FSx and S3 (read directly, not through any proxy), and the job's exported
    ``openpod_checkpoint_tier_lag_saves``. ``lags()``: per tier, the samples of memory minus tier, in steps."""

    GAUGE = re.compile(r'openpod_checkpoint_tier_lag_saves\{tier="(\w+)"\} ([0-9.]+)')

    def __init__(self, tmp: Path, world: int, s3_uri: str, s3_endpoint: str, period: float = 0.3):
        super().__init__(daemon=True)
        self.tmp, self.world, self.s3_uri, self.endpoint, self.period = tmp, world, s3_uri, s3_endpoint, period
        self.samples: list[tuple[int, int, int]] = []  # (memory, fsx, s3) newest steps
        self.gauge_max: dict[str, float] = {}
        self._halt = threading.Event()

    def _memory(self) -> int:
        best = 0
        for node in (self.tmp / "shm").glob("*"):
            if node.is_dir() and not node.name.startswith(".") and node.name != "data-cache":
                for marker in node.glob("step_*/rank_00000.commit.json"):
                    best = max(best, int(marker.parent.name.split("_")[1]))
        return best

    def run(self) -> None:
        from training.checkpoint.storage import DirTier, S3Tier

        s3 = S3Tier(self.s3_uri, endpoint_url=self.endpoint)
        fsx = None
        while not self._halt.wait(self.period):
            try:
                mem = self._memory()
                if fsx is None and (self.tmp / "ck").is_dir():
                    fsx = DirTier("fsx", self.tmp / "ck")
                f = _newest(fsx.complete_steps(self.world)) if fsx else 0
                s = _newest(s3.complete_steps(self.world))
                prom = self.tmp / "ck" / "run" / "metrics.prom"
                if prom.exists():
                    for kind, v in self.GAUGE.findall(prom.read_text()):
                        self.gauge_max[kind] = max(self.gauge_max.get(kind, 0.0), float(v))
            except Exception:  # noqa: BLE001 - a listing racing retention: skip this sample
                continue
            if mem:
                self.samples.append((mem, f, s))

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def lags(self) -> dict[str, list[int]]:
        return {"fsx": [m - f for m, f, _ in self.samples], "s3": [m - s for m, _, s in self.samples]}

    def summary(self) -> dict:
        out = {}
        for kind, xs in self.lags().items():
            out[kind] = {"max": max(xs, default=0), "median": statistics.median(xs) if xs else 0}
        out["gauge_max_saves"] = dict(self.gauge_max)
        out["samples"] = len(self.samples)
        return out
