"""openpod's Checkpointer against torch's own ``dcp.async_save`` + ``DefaultStager``, side by side in one run.

    python -m benchmarks.checkpoint_vs_dcp [--quick] [--model medium] [--reps 3] [--dir DIR]

Both save the same model + AdamW state while the same training loop keeps stepping.
For each, per save (median of ``--reps``):

* blocking: the seconds the loop is held - the save call itself plus, before the
  next ``optimizer.step()``, the wait for staging to finish (DCP: ``staging_completion``;
  openpod: its optimizer pre-hook), since the update may not run over a copy in progress;
* time to durable: from the save call until the checkpoint is fsynced on the first
  durable tier (DCP: ``upload_completion`` of a ``FileSystemWriter(sync_files=True)``
  on disk; openpod: the commit marker of its ``nvme`` tier, before the memory tier's);
* peak host memory: the process's resident set plus the bytes this run holds in
  ``/dev/shm`` (tmpfs is RAM), sampled every 5 ms during the save, above the level
  before the stager / checkpointer existed, taken after freed heap memory was handed
  back to the OS (so staging copies kept between saves and snapshots kept in the memory
  tier count, and pages an earlier run freed do not hide them);
* step slowdown: median step time while the save is in flight against quiet steps;
* training time lost: per save, the step time above the quiet median summed over the steps
  that ran while the save was in flight - until every copy the save makes is done (DCP: its
  upload; openpod: also the memory tier's copy after the durable commit), so work moved after
  the durable point is counted too. A save that is quicker but busier shows a higher step
  slowdown over fewer steps; this row is what the training loop pays in all.

DCP configuration, torch 2.13.0 (the strongest a user would pick on this machine), used as
PyTorch's async checkpoint recipe shows (pytorch/tutorials
recipes_source/distributed_async_checkpoint_recipe.rst, checked 2026-11-23): the state is a
``Stateful`` whose ``state_dict()`` calls ``get_state_dict(model, optimizer)`` (what FSDP2
models need), which ``async_save`` calls before it returns (state_dict_saver.py:323), so its
blocking includes building the state dict as openpod's ``save`` does;
``async_save(..., async_stager=DefaultStager(StagingOptions(...)))`` with async staging in
the stager's own thread (torch/distributed/checkpoint/staging.py:179-186, 211-219) and the
thread executor (state_dict_saver.py:228, 343-347), returning ``AsyncSaveResponse``
(state_dict_saver.py:207-217, 360-380). Pinned memory and non-blocking copies need an
accelerator (staging.py:188-192) and are on only when CUDA is present; shared memory is
needed only by the process executor, so it is off (it would place the staged copy in
/dev/shm, counted here as memory anyway).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful

from benchmarks.training_checkpoint import build, state_bytes, train_step
from training.checkpoint import Checkpointer
from training.config import MODELS, CheckpointConfig, TierConfig


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def tree_bytes(root: Path) -> int:
    n = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                n += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return n


def release_freed() -> None:
    """Hand memory freed by earlier runs back to the OS (glibc keeps freed heap pages resident), so a level
    measured next is not lowered by pages the measured run would merely reuse."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


class MemorySampler:
    """Peak of (resident set + bytes under ``shm``) while running, every ``period`` seconds."""

    def __init__(self, shm: Path, period: float = 0.005):
        self.shm, self.period = shm, period
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def level(self) -> int:
        return rss_bytes() + tree_bytes(self.shm)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.level())
            self._stop.wait(self.period)

    def __enter__(self) -> "MemorySampler":
        self.peak = self.level()
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.level())


def wait_file(path: Path, done: dict, stop: threading.Event) -> None:
    while not stop.is_set():
        if path.exists():
            done["t"] = time.perf_counter()
            return
        stop.wait(0.002)


class TrainState(Stateful):
    """Model + optimizer for ``dcp.async_save``, as the DCP recipe wraps them: DCP calls ``state_dict()``."""

    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def state_dict(self) -> dict:
        msd, osd = get_state_dict(self.model, self.opt)
        return {"model": msd, "optim": osd}

    def load_state_dict(self, sd: dict) -> None:
        set_state_dict(self.model, self.opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])


def run_dcp(model, opt, batch, root: Path, shm: Path, reps: int) -> list[dict]:
    cuda = torch.cuda.is_available()
    release_freed()
    base = MemorySampler(shm).level()  # before the stager holds any copy
    stager = DefaultStager(StagingOptions(use_pinned_memory=cuda, use_shared_memory=False,
                                          use_async_staging=True, use_non_blocking_copy=cuda))
    out = []
    try:
        for r in range(reps + 1):  # the first save warms up (allocation, thread start) and is not counted
            sd = {"train": TrainState(model, opt)}  # state_dict() runs inside async_save, timed
            d = root / f"step_{r}"
            done: dict = {}
            with MemorySampler(shm) as mem:
                t0 = time.perf_counter()
                resp = dcp.async_save(sd, storage_writer=FileSystemWriter(d, sync_files=True, thread_count=1),
                                      async_stager=stager, no_dist=True)
                call = time.perf_counter() - t0
                resp.upload_completion.add_done_callback(lambda _f: done.setdefault("t", time.perf_counter()))
                steps = []
                waited = 0.0
                first = True
                while not resp.upload_completion.done():
                    s0 = time.perf_counter()
                    opt.zero_grad(set_to_none=True)
                    model.loss_sum(batch).backward()
                    if first:  # the update may not run over the staging copy in progress
                        w0 = time.perf_counter()
                        resp.staging_completion.result()
                        waited = time.perf_counter() - w0
                        first = False
                    opt.step()
                    steps.append(time.perf_counter() - s0)
                resp.upload_completion.result()
            if r:
                out.append({"blocking": call + waited, "durable": done["t"] - t0, "mem": mem.peak - base,
                            "steps": steps})
            shutil.rmtree(d, ignore_errors=True)
    finally:
        stager.close()
    return out


def run_openpod(model, opt, batch, root: Path, shm: Path, reps: int) -> list[dict]:
    cfg = CheckpointConfig(every=1, peer_replication=False, write_threads=1,
                           tiers=[TierConfig("memory", str(shm / "mem"), keep=1),
                                  TierConfig("nvme", str(root / "nvme"), keep=1)])
    release_freed()
    base = MemorySampler(shm).level()  # before the checkpointer holds any buffer or memory-tier snapshot
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="bench", scratch_dir=root / "scratch")
    nvme = ck.tiers[1]
    out = []
    try:
        for r in range(reps + 1):
            step = r + 1
            done: dict = {}
            stop = threading.Event()
            watcher = threading.Thread(target=wait_file, args=(nvme.marker_path(step, 0), done, stop), daemon=True)
            watcher.start()
            with MemorySampler(shm) as mem:
                t0 = time.perf_counter()
                call = ck.save(step, model, opt)
                ck.take_waited()
                steps = []
                while ck.busy():  # until written everywhere (memory tier included), not only durable
                    s0 = time.perf_counter()
                    train_step(model, opt, batch)  # its optimizer step waits for overlapped staging
                    steps.append(time.perf_counter() - s0)
                ck.flush()
                watcher.join(5.0)
                stop.set()
            if "t" not in done:
                raise RuntimeError(f"openpod save of step {step} never reached the nvme tier: {ck.stats}")
            if r:
                out.append({"blocking": call + ck.take_waited(), "durable": done["t"] - t0, "mem": mem.peak - base,
                            "steps": steps})
    finally:
        ck.close()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(shm / "mem", ignore_errors=True)
    return out


def quiet_steps(model, opt, batch, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        train_step(model, opt, batch)
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a ~40 MB state and 6 repetitions (for `make bench`)")
    ap.add_argument("--model", default=None, choices=sorted(MODELS))
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--dir", default=None, help="disk directory for both durable tiers")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the training loop")
    a = ap.parse_args(argv)
    model_name = a.model or ("small" if a.quick else "medium")
    # Small states save in tens of ms, where one scheduler hiccup on a shared machine is as large as the figure
    # measured (get_state_dict alone took 5-40 ms here): the quick run takes more saves to get a median.
    reps = a.reps or (6 if a.quick else 3)
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    base = Path(a.dir or tempfile.mkdtemp(prefix="vs-dcp-", dir=out))
    shm = Path(tempfile.mkdtemp(prefix="openpod-vsdcp-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        model, opt = build(model_name, a.threads)
        c = MODELS[model_name]
        batch = torch.randint(c.vocab_size, (1, 33 if a.quick else 65))
        train_step(model, opt, batch)  # optimizer state exists
        nbytes = state_bytes({"m": model.state_dict(), "o": opt.state_dict()})
        print(f"model {model_name}: model + AdamW state {nbytes / 2**30:.3f} GiB; torch {torch.__version__}, "
              f"threads {a.threads}; {reps} saves each (medians), after one warm-up save")
        quiet = quiet_steps(model, opt, batch, 5)
        # Alternate the two, so machine noise hits both alike.
        d_runs, o_runs = [], []
        for i in range(reps):
            d_runs += run_dcp(model, opt, batch, base / f"dcp{i}", shm, 1)
            o_runs += run_openpod(model, opt, batch, base / f"openpod{i}", shm, 1)
            quiet += quiet_steps(model, opt, batch, 3)
        q = statistics.median(quiet)

        def med(runs, k):
            return statistics.median(r[k] for r in runs)

        def slow(runs):
            busy = [s for r in runs for s in r["steps"]]
            return (statistics.median(busy) / q - 1) if busy else 0.0

        def lost(runs):
            return statistics.median(sum(r["steps"]) - q * len(r["steps"]) for r in runs)

        rows = [("blocking (save call + staging wait)", "blocking", 1e3, "ms"),
                ("time to durable (fsynced on disk)", "durable", 1e3, "ms"),
                ("peak host memory incl. /dev/shm", "mem", 1 / 2**20, "MiB")]
        print()
        print(f"{'':38s}{'dcp.async_save':>16s}{'openpod':>12s}{'openpod/DCP':>13s}")
        for label, k, scale, unit in rows:
            dv, ov = med(d_runs, k), med(o_runs, k)
            print(f"{label:38s}{dv * scale:13.1f} {unit:3s}{ov * scale:9.1f} {unit:3s}{ov / dv if dv else float('nan'):12.2f}x")
        print(f"{'step slowdown while the save runs':38s}{100 * slow(d_runs):14.1f} %{100 * slow(o_runs):10.1f} %")
        dl, ol = lost(d_runs), lost(o_runs)
        print(f"{'training time lost per save':38s}{dl * 1e3:13.1f} ms {ol * 1e3:8.1f} ms "
              f"{ol / dl if dl > 0 else float('nan'):11.2f}x")
        print(f"(median quiet step {q * 1e3:.1f} ms; state {nbytes / 2**20:.0f} MiB; targets: time to durable "
              f"<= 1.0x DCP's, blocking <= DCP's)")
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
