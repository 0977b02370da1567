"""Checkpoint save and restore speed of two versions of the runtime, alternated in one run.

    python -m benchmarks.checkpoint_before_after [--quick] [--old-rev REV | --old PATH] [--new PATH]
                                                [--state-gib 0.3] [--rounds N] [--dir DIR] [--json FILE]

Each round runs one worker process per version (in alternating order: old-new, new-old, ...), so load
from anything else on the machine falls on both alike. A worker imports ``training`` from its tree only
(``PYTHONPATH``; it checks that every module of ``training`` and ``openpod_core`` it loaded came from there)
and, with the same model, state size and tiers, uses the
``Checkpointer`` API both versions share:

* save, ``--saves`` times after one unmeasured warm-up save (staging buffers allocated), with tiers
  memory (``/dev/shm``) + nvme (disk) + fsx (a shared directory on disk), every step to every tier:
  - blocking: ``save()``'s return value with eager staging (``overlap_staging=False``: the whole copy to host
    memory is in the call; overlapped staging moves part of it into the next step, same copy code);
  - durable on nvme: from the save call until the nvme tier's commit marker exists (polled every 2 ms);
  - durable in fsx: until the fsx tier's commit marker exists (the promoter's copy of the step);
  - peak memory: the process's peak resident set during the save and its promotion above its level before
    (Linux: ``VmHWM`` reset through ``/proc/self/clear_refs``, freed heap handed back first with
    ``malloc_trim``; proc(5)). The memory tier's files in ``/dev/shm`` are not in it (alike for both);
* restore, once per tier, each by a new ``Checkpointer`` whose only tier is that one, into a freshly
  initialised model and optimizer: ``restore()`` wall time, with the default verification (every file's
  hash checked against its marker, then DCP's load); the restored values are checked against the saved ones.

The old tree is ``git archive --old-rev`` (default ``ca277c7``: before issue 28's restricted unpickler,
``weights_only`` item loads and file-name checks) extracted into a temporary directory, or ``--old PATH``.
The new tree defaults to this checkout. Disk tiers are read back from the page cache (the files were just
written), alike for both versions. Reported: median [min-max] per version and the new/old ratio of medians;
"within noise" when the two ranges overlap.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SAVE_KEYS = ("blocking", "durable_nvme", "durable_fsx", "peak_rss")
RESTORE_TIERS = ("memory", "nvme", "fsx")
PACKAGES = ("training", "openpod_core")  # what the checkpoint code imports from this repository


# ----------------------------------------------------------------------------------------------- worker
def _mlp(width: int, layers: int):
    import torch

    return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])


def _width(state_gib: float, layers: int) -> int:
    """Layer width so that parameters + AdamW's two moments (3 x 4 bytes per parameter) are ``state_gib``."""
    return max(8, int(math.sqrt(state_gib * 2**30 / 12 / layers)))


class _Counter:
    """A registered component with plain (non-tensor) values: DCP writes them as pickled items."""

    def __init__(self, value: int = 0):
        self.value = value

    def state_dict(self) -> dict:
        return {"value": self.value, "name": "bench", "history": [1.5, 2.5, 3.5]}

    def load_state_dict(self, sd: dict) -> None:
        self.value = sd["value"]


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration, ValueError):
        return None


def _reset_peak() -> int | None:
    """Hand freed heap back, reset the peak resident set; the resident KiB now (None: not Linux)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except (OSError, AttributeError):
        return None
    return _status_kib("VmRSS")


def _wait_file(path: Path, done: dict, key: str, stop: threading.Event) -> None:
    while not stop.is_set():
        if path.exists():
            done[key] = time.perf_counter()
            return
        stop.wait(0.002)


def _build(width: int, layers: int, seed: int):
    import torch

    torch.manual_seed(seed)
    model = _mlp(width, layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model(torch.randn(4, width)).square().mean().backward()
    opt.step()  # the optimizer state exists
    opt.zero_grad(set_to_none=True)
    return model, opt


def worker(a) -> dict:
    """One version's measurements (this process imports ``training`` from ``a.tree``)."""
    import torch

    from training.checkpoint import Checkpointer
    from training.config import CheckpointConfig, TierConfig

    tree = Path(a.tree).resolve()
    _check_origin(tree)

    torch.set_num_threads(1)
    base, shm = Path(a.dir), Path(a.shm)
    width = _width(a.state_gib, a.layers)
    model, opt = _build(width, a.layers, seed=0)
    tiers = {"memory": TierConfig("memory", str(shm / "mem"), keep=1),
             "nvme": TierConfig("nvme", str(base / "nvme"), keep=1),
             "fsx": TierConfig("fsx", str(base / "fsx"), keep=1)}

    def config(kinds) -> CheckpointConfig:
        return CheckpointConfig(every=1, peer_replication=False, write_threads=1, overlap_staging=False,
                                source_attempts=1, tiers=[tiers[k] for k in kinds])

    ck = Checkpointer(config(RESTORE_TIERS), rank=0, world_size=1, local_world_size=1, node_id="bench",
                      scratch_dir=base / "scratch")
    ck.register("counter", _Counter(7))
    nbytes = sum(t.numel() * t.element_size() for t in _tensors(ck.state(model, opt)))
    saves: dict[str, list[float]] = {k: [] for k in SAVE_KEYS}
    try:
        for step in range(1, a.saves + 2):
            done: dict = {}
            stop = threading.Event()
            watchers = [threading.Thread(target=_wait_file, args=(ck.tiers[i].marker_path(step, 0), done, k, stop),
                                         daemon=True) for i, k in ((1, "nvme"), (2, "fsx"))]
            for w in watchers:
                w.start()
            rss0 = _reset_peak()
            t0 = time.perf_counter()
            blocking = ck.save(step, model, opt)
            ck.flush()
            peak = _status_kib("VmHWM")
            for w in watchers:
                w.join(30.0)
            stop.set()
            if set(done) != {"nvme", "fsx"} or ck.stats.failures:
                raise SystemExit(f"step {step} did not reach every tier: {ck.stats}")
            if step > 1:  # step 1 allocates the staging buffers
                saves["blocking"].append(blocking)
                saves["durable_nvme"].append(done["nvme"] - t0)
                saves["durable_fsx"].append(done["fsx"] - t0)
                if rss0 is not None and peak is not None:
                    saves["peak_rss"].append((peak - rss0) * 1024)
    finally:
        ck.close()
    last = a.saves + 1
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    restores: dict[str, float] = {}
    for kind in RESTORE_TIERS:
        fresh, fresh_opt = _build(width, a.layers, seed=1 + len(restores))
        rc = Checkpointer(config([kind]), rank=0, world_size=1, local_world_size=1, node_id="bench",
                          scratch_dir=base / f"scratch-{kind}")
        counter = _Counter()
        rc.register("counter", counter)
        t0 = time.perf_counter()
        info = rc.restore(fresh, fresh_opt)
        restores[kind] = time.perf_counter() - t0
        rc.close()
        if info is None or info.step != last or kind not in info.source or counter.value != 7:
            raise SystemExit(f"restore from {kind}: got {info}")
        sd = fresh.state_dict()
        if not all(torch.equal(sd[k], v) for k, v in saved.items()):
            raise SystemExit(f"restore from {kind}: the model differs from the saved one")
    _check_origin(tree)  # modules imported lazily too
    return {"tree": str(tree), "torch": torch.__version__, "state_bytes": nbytes, "width": width,
            "saves": saves, "restores": restores}


def _check_origin(tree: Path) -> None:
    """Every loaded module of this repository's packages comes from ``tree`` (not the editable install's)."""
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] in PACKAGES and getattr(mod, "__file__", None):
            if tree not in Path(mod.__file__).resolve().parents:
                raise SystemExit(f"worker for {tree} imported {name} from {mod.__file__}")


def _tensors(obj):
    """The tensors of a nested state. Not benchmarks.training_checkpoint._tensors: importing that module loads this
    checkout's ``training`` package, which in the old tree's worker is the code under test's rival."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


# ----------------------------------------------------------------------------------------------- driver
def old_tree(rev: str, into: Path) -> Path:
    """``rev`` of this repository extracted into ``into`` (``git archive``; no worktree is registered)."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, *PACKAGES], check=True,
                                 capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", b"") or b""
        raise SystemExit(f"cannot extract {rev} from {ROOT} (needs a git checkout holding it; or pass --old PATH): "
                         f"{err.decode(errors='replace').strip() or e}") from None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_worker(tree: Path, a, work: Path, shm: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    for d in (work, shm):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--tree", str(tree), "--dir", str(work),
           "--shm", str(shm), "--state-gib", str(a.state_gib), "--layers", str(a.layers), "--saves", str(a.saves)]
    try:
        p = subprocess.run(cmd, env=env, cwd=str(work), capture_output=True, text=True, timeout=a.timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    if p.returncode:
        raise SystemExit(f"worker for {tree} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _spread(v: list[float], scale: float) -> str:
    return f"{statistics.median(v) * scale:.0f} [{min(v) * scale:.0f}-{max(v) * scale:.0f}]"


def summary(old: list[float], new: list[float], scale: float = 1e3, difference: bool = False) -> str:
    """Median [min-max] of each (times ``scale``), the new/old ratio of medians (``difference``: new - old), and
    whether the ranges overlap."""
    if not old or not new:
        return f"{'not measured here':>44s}"
    mo, mn = statistics.median(old), statistics.median(new)
    if min(len(old), len(new)) < 2:
        verdict = "one sample: no verdict"
    elif min(new) <= max(old) and min(old) <= max(new):
        verdict = "within noise"
    else:
        verdict = "slower" if mn > mo else "faster"
    ratio = f"{(mn - mo) * scale:+9.0f}" if difference else f"{mn / mo:9.2f}" if mo > 0 else f"{'-':>9s}"
    return f"{_spread(old, scale):>22s}{_spread(new, scale):>22s}{ratio}  {verdict}"


def main(argv=None) -> dict | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds of 2 saves, a 0.1 GiB state unless --state-gib")
    ap.add_argument("--old", default=None, help="a tree of the old code (default: --old-rev extracted)")
    ap.add_argument("--old-rev", default="ca277c7", help="the old code's commit (default: ca277c7)")
    ap.add_argument("--new", default=str(ROOT), help="a tree of the new code (default: this checkout)")
    ap.add_argument("--state-gib", type=float, default=None, help="parameters + AdamW state (default 1, quick 0.1)")
    ap.add_argument("--layers", type=int, default=24, help="Linear layers of the model (tensors in the state)")
    ap.add_argument("--rounds", type=int, default=None, help="worker pairs (default 5, quick 3)")
    ap.add_argument("--saves", type=int, default=None, help="measured saves per worker (default 3, quick 2)")
    ap.add_argument("--dir", default=None, help="disk directory for the nvme and fsx tiers (default: benchmarks/out)")
    ap.add_argument("--json", default=None, help="also write every sample to this file")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per worker")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    ap.add_argument("--shm", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.state_gib = a.state_gib if a.state_gib is not None else (0.1 if a.quick else 1.0)
    a.rounds = a.rounds or (3 if a.quick else 5)
    a.saves = a.saves or (2 if a.quick else 3)
    if a.worker:
        # the script's own directory first on sys.path would not matter, but nothing but the tree may supply code
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
        print(json.dumps(worker(a)))
        return None

    out = Path(a.dir) if a.dir else HERE / "out"
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="before-after-", dir=out))
    shm_root = Path(tempfile.mkdtemp(prefix="openpod-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    trees = {"old": Path(a.old).resolve() if a.old else None, "new": Path(a.new).resolve()}
    samples: dict = {v: {"saves": {k: [] for k in SAVE_KEYS}, "restores": {k: [] for k in RESTORE_TIERS}}
                     for v in trees}
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    info = {}
    try:
        if trees["old"] is None:
            trees["old"] = old_tree(a.old_rev, base / f"tree-{a.old_rev}")
        for r in range(a.rounds):
            for v in (("old", "new") if r % 2 == 0 else ("new", "old")):
                got = run_worker(trees[v], a, base / f"{v}-{r}", shm_root / f"{v}-{r}")
                info[v] = got
                for k in SAVE_KEYS:
                    samples[v]["saves"][k] += got["saves"][k]
                for k in RESTORE_TIERS:
                    samples[v]["restores"][k].append(got["restores"][k])
                print(f"round {r + 1}/{a.rounds} {v}: blocking "
                      f"{statistics.median(got['saves']['blocking']) * 1e3:.0f} ms, restores "
                      + ", ".join(f"{k} {got['restores'][k] * 1e3:.0f} ms" for k in RESTORE_TIERS), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(shm_root, ignore_errors=True)
    load1 = os.getloadavg()
    n = info["new"]
    print()
    print(f"old {trees['old'] if a.old else a.old_rev} vs new {trees['new']}; torch {n['torch']}, "
          f"{os.cpu_count()} CPUs; state {n['state_bytes'] / 2**30:.2f} GiB ({a.layers} Linear layers of "
          f"{n['width']} + AdamW); {a.rounds} rounds x {a.saves} saves; "
          f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; "
          f"{time.perf_counter() - t_start:.0f} s")
    print(f"{'ms, median [min-max]':24s}{'old':>22s}{'new':>22s}{'new/old':>9s}")
    for k in SAVE_KEYS[:-1]:
        print(f"{'save ' + k:24s}{summary(samples['old']['saves'][k], samples['new']['saves'][k])}")
    print(f"{'save peak memory, MiB':24s}"
          f"{summary(samples['old']['saves']['peak_rss'], samples['new']['saves']['peak_rss'], 2**-20, True)}"
          "  (new - old, not a ratio)")
    for k in RESTORE_TIERS:
        print(f"{'restore from ' + k:24s}{summary(samples['old']['restores'][k], samples['new']['restores'][k])}")
    result = {"old": str(a.old or a.old_rev), "new": str(trees["new"]), "state_bytes": n["state_bytes"],
              "load": [load0, load1], "samples": samples}
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
