"""openpod's Checkpointer against torch's own ``dcp.async_save`` (two ways), side by side in one run.

    python -m benchmarks.checkpoint_vs_dcp [--quick] [--model medium | --state-gib 1|7] [--sharded]
                                           [--device auto|cpu|cuda] [--reps 3] [--dir DIR] [--runs 5]
                                           [--layout raw|torch-save]

All four save the same model + AdamW state while the same training loop keeps stepping, alternating, with model
and batch on the accelerator when there is one (``--device auto``): DCP's ``async_save`` with its
``DefaultStager`` (pinned memory on CUDA); torchtitan's pinned-copy mode, a pinned CPU copy of the state made
once and refilled per save, then written by ``dcp.async_save`` (below); and openpod's ``Checkpointer`` twice:
``openpod nvme`` writes the one disk tier DCP writes (like for like), ``openpod memory+nvme`` also keeps the
snapshot in a memory tier in ``/dev/shm`` (RAM the others do not hold; it makes restores from node memory
possible). The targets (issue 22) are for the like-for-like column. Also printed: openpod's staging buffer (the
stager's ``nbytes``; on CUDA the page-locked bytes) over the state's bytes, at most 1.05x. ``--runs N`` repeats
the whole comparison and ends with the median [min-max] over the runs of each run's ratios, with the load average
at each run's start; ``--layout`` picks openpod's checkpoint layout (raw, the default, or DCP's torch-save).
``--sharded`` wraps the model in FSDP2 (``fully_shard`` on a one-rank mesh: the state holds DTensors, as every
fsdp/hsdp job's does). ``--state-gib 1`` and ``7`` pick models of 1.3 and 7.1 GiB of state.
For each, per save (median and min-max of ``--reps``):

* blocking: the seconds the loop is held - the save call itself plus, before the
  next ``optimizer.step()``, the wait for staging to finish (DCP: ``staging_completion``;
  openpod: its optimizer pre-hook), since the update may not run over a copy in progress;
* time to durable: from the save call until the checkpoint is fsynced on the first
  durable tier (DCP: ``upload_completion`` of a ``FileSystemWriter(sync_files=True)``
  on disk, from a done-callback; openpod: the return of its ``nvme`` tier's commit - files, directory and
  marker fsynced - recorded in the writer's thread, before the memory tier's);
* peak host memory: the process's resident set plus the bytes this run holds in
  ``/dev/shm`` (tmpfs is RAM), sampled every 5 ms during the save, above the level
  before the stager / checkpointer existed, taken after freed heap memory was handed
  back to the OS (so staging copies kept between saves and snapshots kept in the memory
  tier count, and pages an earlier run freed do not hide them);
* step slowdown: median step time while the save is in flight against quiet steps;
* disk limit: the same disk's sequential write in the same run, between the saves: a file of the state's bytes
  written front to back in ``DISK_CHUNK`` pieces from one page-aligned host buffer, then fsynced, once buffered,
  once with ``O_DIRECT`` and once with ``O_DIRECT`` writes ``DEPTH`` at a time into a preallocated file (each
  printed), the fastest taken (the least any of the four can take to make the state durable there); printed with openpod nvme's time to durable over it (issue 38: within 1.2x);
  and the same writes again while the training loop steps on another thread (``disk limit beside the training
  loop``), the disk as any save made during training can have it on this machine, with each column's time to
  durable over that too; and openpod nvme's time to durable with the loop idle (the caller waits for the save,
  leaving it the CPU), over the same limit: the save's own CPU work apart from the loop's;
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

torchtitan's pinned-copy mode (pytorch/torchtitan@v0.1.0:torchtitan/components/checkpoint.py:654-671,
``async_mode = "async_with_pinned_mem"``): ``_create_cpu_state_dict(state, pin_memory=True)`` once, then per save
``_copy_state_dict(state, cpu_copy, non_blocking=True)`` on a side stream, waited for before the next optimizer
step (``maybe_wait_for_staging``), and the copy written in the background. torchtitan writes it with
``dcp.save`` in a checkpoint process; here ``dcp.async_save`` writes it on the thread executor through a stager
that hands the already-staged copy on unchanged (DCP's default stager would copy it once more). Later
torchtitan releases (v0.2.2, checkpoint.py:517-531) use DefaultStager(StagingOptions(True, True, True, True))
with the process executor instead, the DCP baseline's stager.
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
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict
from torch.distributed.checkpoint.staging import AsyncStager, DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful

from benchmarks.training_checkpoint import state_bytes, train_step
from benchmarks._disk_limit import disk_limit
from benchmarks._vs_dcp_report import HEADS, report, summarize
from training.checkpoint import Checkpointer
from training.config import MODELS, CheckpointConfig, ModelConfig, TierConfig

# --state-gib: model + AdamW state in fp32 (12 bytes per parameter)
STATES = {1: "xl",  # 1.32 GiB
          7: ModelConfig(vocab_size=8192, d_model=2048, n_layers=12, n_heads=16, seq_len=256)}  # 7.1 GiB


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


def on_commit(tier, done: dict) -> None:
    """Record in ``done[step]`` when ``tier``'s commit of a step returns (its files, directory and marker fsynced):
    the writer's own thread records it, as DCP's column records its ``upload_completion`` from a done-callback. (A
    thread polling for the marker every 2 ms ran beside openpod's saves only, taking the GIL from its writer 500
    times a second.)"""
    commit = tier.commit

    def timed(marker):
        commit(marker)
        done.setdefault(marker.step, time.perf_counter())

    tier.commit = timed


class TrainState(Stateful):
    """Model + optimizer for ``dcp.async_save``, as the DCP recipe wraps them: DCP calls ``state_dict()``."""

    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def state_dict(self) -> dict:
        msd, osd = get_state_dict(self.model, self.opt)
        return {"model": msd, "optim": osd}

    def load_state_dict(self, sd: dict) -> None:
        set_state_dict(self.model, self.opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])


def sync(model) -> None:
    """Wait for the device: a CUDA step's time is the time its kernels take, not their launch."""
    if next(model.parameters()).is_cuda:
        torch.cuda.synchronize()


def timed_step(model, opt, batch, before_update=None) -> float:
    s0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    model.loss_sum(batch).backward()
    if before_update is not None:
        before_update()
    opt.step()
    sync(model)
    return time.perf_counter() - s0


class Staged(AsyncStager):
    """Hands ``dcp.async_save`` a state that is already a staged copy (torchtitan's pinned copy), unchanged."""

    _synchronize_after_execute = False

    def stage(self, state_dict):
        return state_dict


def _save_loop(model, opt, batch, shm: Path, start, reps: int) -> list[dict]:
    """Per save: ``start()`` returns (response, seconds blocked in the call, wait before the first update)."""
    out = []
    for r in range(reps + 1):  # the first save warms up (allocation, thread start) and is not counted
        done: dict = {}
        with MemorySampler(shm) as mem:
            t0 = time.perf_counter()
            resp, call, wait_staged = start(r)
            resp.upload_completion.add_done_callback(lambda _f: done.setdefault("t", time.perf_counter()))
            steps, waited = [], [0.0]

            def before_update():  # the update may not run over the staging copy in progress
                w0 = time.perf_counter()
                wait_staged(resp)
                waited[0] += time.perf_counter() - w0

            while not resp.upload_completion.done():
                steps.append(timed_step(model, opt, batch, before_update if not steps else None))
            resp.upload_completion.result()
        if r:
            out.append({"blocking": call + waited[0], "durable": done["t"] - t0, "mem": mem.peak, "steps": steps})
    return out


# torch 2.13's async_save leaves a stager it was given open for the next save ("call close() after the last
# checkpoint", torch/distributed/checkpoint/state_dict_saver.py:238-240) and closes only one it made itself
# (:307-331). torch 2.11 closes the given one too: on the GPU machine (2.11.0+cu130, 2026-11-27) a DefaultStager's
# copy table was empty after one async_save (close() empties it, _state_dict_stager.py:262-275) and the next save
# through it raised KeyError: <class 'type'>. Before 2.13 the DCP column takes a new stager per save, as a user of
# that torch must; it says so once (facts: dcp.async-save-given-stager).
STAGER_KEPT_FROM = (2, 13)
_SAID: list[bool] = []


def dcp_keeps_given_stagers() -> bool:
    from training.cli import torch_release

    release = torch_release(torch.__version__)
    return release is None or release >= STAGER_KEPT_FROM


def run_dcp(model, opt, batch, root: Path, shm: Path, reps: int) -> list[dict]:
    cuda = next(model.parameters()).is_cuda
    release_freed()
    base = MemorySampler(shm).level()  # before the stager holds any copy
    host0 = host_allocated()
    def new_stager():
        return DefaultStager(StagingOptions(use_pinned_memory=cuda, use_shared_memory=False,
                                            use_async_staging=True, use_non_blocking_copy=cuda))

    stagers = [new_stager()]
    keep = dcp_keeps_given_stagers()
    if not keep and not _SAID:
        _SAID.append(True)
        print(f"note: torch {torch.__version__}'s async_save closes the stager it is given: the DCP column makes "
              f"a new one per save (its staging copy is allocated again each time)")

    def start(r):
        if r and not keep:
            stagers.append(new_stager())  # the last one was closed by async_save
        sd = {"train": TrainState(model, opt)}  # state_dict() runs inside async_save, timed
        t0 = time.perf_counter()
        resp = dcp.async_save(sd, storage_writer=FileSystemWriter(root / f"step_{r}", sync_files=True,
                                                                  thread_count=1),
                              async_stager=stagers[-1], no_dist=True)
        return resp, time.perf_counter() - t0, lambda resp: resp.staging_completion.result()

    try:
        out = _save_loop(model, opt, batch, shm, start, reps)
        pinned = host_allocated() - host0  # the stager's cached pinned copy (CUDA)
    finally:
        for stager in stagers:
            stager.close()
        shutil.rmtree(root, ignore_errors=True)
    return [dict(o, mem=o["mem"] - base, pinned=pinned) for o in out]


def run_titan(model, opt, batch, root: Path, shm: Path, reps: int) -> list[dict]:
    """torchtitan's pinned-copy mode (see the module docstring)."""
    cuda = next(model.parameters()).is_cuda
    release_freed()
    base = MemorySampler(shm).level()
    host0 = host_allocated()
    stream = torch.cuda.Stream() if cuda else None
    cpu: dict = {}

    def start(r):
        t0 = time.perf_counter()
        msd, osd = get_state_dict(model, opt)
        state = {"train": {"model": msd, "optim": osd}}
        if "copy" not in cpu:  # made once, on the first save (torchtitan: cpu_offload_state_dict is None)
            cpu["copy"] = _create_cpu_state_dict(state, pin_memory=cuda, share_memory=False)
        if cuda:  # the copy overlaps the next forward/backward on a side stream
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                _copy_state_dict(state, cpu["copy"], non_blocking=True)
        else:
            _copy_state_dict(state, cpu["copy"])
        later = SimpleNamespace(upload_completion=Future())

        def wait_staged(_resp):  # maybe_wait_for_staging, before the next optimizer step; then the write starts
            if cuda:
                stream.synchronize()
            resp = dcp.async_save(cpu["copy"], storage_writer=FileSystemWriter(
                root / f"step_{r}", sync_files=True, thread_count=1), async_stager=Staged(), no_dist=True)
            # a stager that returns the state itself gets the upload future back (state_dict_saver.py:384-395)
            upload = getattr(resp, "upload_completion", resp)
            upload.add_done_callback(lambda f: later.upload_completion.set_result(f.result()))

        return later, time.perf_counter() - t0, wait_staged

    try:
        out = _save_loop(model, opt, batch, shm, start, reps)
        pinned = host_allocated() - host0  # the pinned copy, per tensor from the caching host allocator (CUDA)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [dict(o, mem=o["mem"] - base, pinned=pinned) for o in out]


def pinned_bytes(ck: Checkpointer, before: int) -> int:
    """Page-locked host bytes the checkpointer holds (CUDA): its staging buffer when CUDA reports it pinned (it is
    registered in place), plus what the caching host allocator grew by since ``before`` (``host_allocated()``)."""
    flat = ck.stager._flat
    registered = flat.numel() if flat is not None and flat.numel() and flat.is_pinned() else 0
    return registered + max(0, host_allocated() - before)


def host_allocated() -> int:
    """Bytes the CUDA caching host allocator (``pin_memory=True``) holds now; 0 without CUDA."""
    if not torch.cuda.is_available() or not hasattr(torch.cuda, "host_memory_stats"):
        return 0
    return torch.cuda.host_memory_stats().get("allocated_bytes.current", 0)


def run_openpod(model, opt, batch, root: Path, shm: Path, reps: int, memory_tier: bool = True,
                layout: str = "raw", loop: bool = True) -> list[dict]:
    """openpod's ``Checkpointer``: a memory tier (``/dev/shm``) then ``nvme`` (``memory_tier``), or ``nvme`` alone -
    the one tier DCP writes to, like for like. ``loop``: the training loop steps while the save runs; without it
    the caller waits for the save (``flush``), leaving the CPU to the save - the host of a GPU job, whose loop
    mostly waits on the GPU, with vCPUs to spare (a p5.48xlarge has 24 per GPU, fact
    ``ec2.describe-instance-types.recorded``)."""
    tiers = [TierConfig("nvme", str(root / "nvme"), keep=1)]
    if memory_tier:
        tiers.insert(0, TierConfig("memory", str(shm / "mem"), keep=1))
    cfg = CheckpointConfig(every=1, peer_replication=False, write_threads=1, tiers=tiers, layout=layout)
    cuda = next(model.parameters()).is_cuda
    release_freed()
    base = MemorySampler(shm).level()  # before the checkpointer holds any buffer or memory-tier snapshot
    host0 = host_allocated()
    ck = Checkpointer(cfg, rank=0, world_size=1, local_world_size=1, node_id="bench", scratch_dir=root / "scratch")
    nvme = next(t for t in ck.tiers if t.kind == "nvme")
    done: dict = {}
    on_commit(nvme, done)
    out = []
    try:
        for r in range(reps + 1):
            step = r + 1
            with MemorySampler(shm) as mem:
                t0 = time.perf_counter()
                call = ck.save(step, model, opt)
                ck.take_waited()
                steps = []
                while loop and ck.busy():  # until written everywhere (memory tier included), not only durable
                    steps.append(timed_step(model, opt, batch))  # its optimizer step waits for overlapped staging
                ck.flush()
            if step not in done or not nvme.marker_path(step, 0).exists():
                raise RuntimeError(f"openpod save of step {step} never reached the nvme tier: {ck.stats}")
            if r:
                out.append({"blocking": call + ck.take_waited(), "durable": done[step] - t0, "mem": mem.peak - base,
                            "steps": steps, "staged": ck.stager.nbytes,
                            "pinned": pinned_bytes(ck, host0) if cuda else 0})
    finally:
        ck.close()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(shm / "mem", ignore_errors=True)
    return out


def rotation(keys: list[str], i: int) -> list[str]:
    """The order of the measurements in round ``i``: ``keys`` rotated by ``i``, so each comes first, second, ...
    equally often. What one save or write leaves the disk doing (this project's virtual disk writes the next
    state 0.1-0.25x slower right after the disk limit's three writes, docs/training.md, 2026-11-29) then falls on
    every column alike, not always on the one behind the same neighbour."""
    i %= len(keys)
    return keys[i:] + keys[:i]


def quiet_steps(model, opt, batch, n: int) -> list[float]:
    return [timed_step(model, opt, batch) for _ in range(n)]


def build_model(model: str | ModelConfig, threads: int, device: torch.device, sharded: bool):
    """The benchmark's model and AdamW on ``device``; FSDP2 over a one-rank mesh when ``sharded``."""
    from training.model import GPT

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = GPT(MODELS[model] if isinstance(model, str) else model).to(device)
    if sharded:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device.type, (1,))
        for blk in net.blocks:
            fully_shard(blk, mesh=mesh)
        fully_shard(net, mesh=mesh)
    return net, torch.optim.AdamW(net.parameters(), lr=1e-4)


def init_one_rank(device: torch.device) -> None:
    """A one-rank process group for FSDP2 (async_save wants a CPU backend next to NCCL: state_dict_saver.py:300-305)."""
    import torch.distributed as dist

    dist.init_process_group("cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo", store=dist.HashStore(),
                            rank=0, world_size=1)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a ~40 MB state and 6 repetitions (for `make bench`)")
    ap.add_argument("--model", default=None, choices=sorted(MODELS))
    ap.add_argument("--state-gib", type=int, default=None, choices=sorted(STATES),
                    help="a model of about this much model + AdamW state (1: xl, 1.3 GiB; 7: 7.1 GiB)")
    ap.add_argument("--sharded", action="store_true", help="FSDP2 (fully_shard on a one-rank mesh): DTensor state")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                    help="where model and batch live [auto: cuda when there is one]")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--dir", default=None, help="disk directory for the durable tiers")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the training loop")
    ap.add_argument("--runs", type=int, default=1, help="whole comparisons in a row, then a summary of their ratios")
    ap.add_argument("--layout", default="raw", choices=["raw", "torch-save"], help="openpod's checkpoint layout")
    a = ap.parse_args(argv)
    if a.model and a.state_gib:
        ap.error("--model and --state-gib pick the same thing: give one")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device")
    device = torch.device("cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    model_name = a.model or (STATES[a.state_gib] if a.state_gib else ("small" if a.quick else "medium"))
    # Small states save in tens of ms, where one scheduler hiccup on a shared machine is as large as the figure
    # measured (get_state_dict alone took 5-40 ms here): the quick run takes more saves to get a median.
    reps = a.reps or (6 if a.quick else 3)
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    base = Path(a.dir or tempfile.mkdtemp(prefix="vs-dcp-", dir=out))
    shm = Path(tempfile.mkdtemp(prefix="openpod-vsdcp-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        if device.type == "cuda":
            torch.cuda.set_device(0)
        if a.sharded:
            init_one_rank(device)
        model, opt = build_model(model_name, a.threads, device, a.sharded)
        c = MODELS[model_name] if isinstance(model_name, str) else model_name
        batch = torch.randint(c.vocab_size, (1, min(33 if a.quick else 65, c.seq_len + 1)), device=device)
        train_step(model, opt, batch)  # optimizer state exists
        nbytes = state_bytes({"m": model.state_dict(), "o": opt.state_dict()})
        name = model_name if isinstance(model_name, str) else f"{a.state_gib} GiB"
        where = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
        print(f"model {name}{' (FSDP2)' if a.sharded else ''} on {device.type} ({where}): model + AdamW state "
              f"{nbytes / 2**30:.3f} GiB; torch {torch.__version__}, threads {a.threads}; {reps} saves each "
              f"(median [min-max]), after one warm-up save")
        outs, loads = [], []
        for k in range(a.runs):
            loads.append(os.getloadavg()[0])
            if a.runs > 1:
                print(f"\nrun {k + 1} of {a.runs} (load average {loads[-1]:.2f}); openpod layout {a.layout}")
            quiet = quiet_steps(model, opt, batch, 5)
            runs: dict[str, list[dict]] = {h: [] for h in HEADS}
            disk: list[dict] = []
            idle: list[dict] = []  # openpod nvme with the loop idle: what the save takes with a vCPU of its own
            measure = {
                "disk": lambda i: disk.extend(disk_limit(base / f"disk{i}", nbytes,
                                                         beside=lambda: timed_step(model, opt, batch))),
                "dcp": lambda i: runs["dcp"].extend(run_dcp(model, opt, batch, base / f"dcp{i}", shm, 1)),
                "titan": lambda i: runs["titan"].extend(run_titan(model, opt, batch, base / f"titan{i}", shm, 1)),
                "openpod_nvme": lambda i: runs["openpod_nvme"].extend(run_openpod(
                    model, opt, batch, base / f"opnvme{i}", shm, 1, memory_tier=False, layout=a.layout)),
                "openpod": lambda i: runs["openpod"].extend(run_openpod(
                    model, opt, batch, base / f"openpod{i}", shm, 1, layout=a.layout)),
                "idle": lambda i: idle.extend(run_openpod(model, opt, batch, base / f"opidle{i}", shm, 1,
                                                          memory_tier=False, layout=a.layout, loop=False)),
            }
            for i in range(reps):
                for key in rotation(list(measure), k * reps + i):
                    measure[key](i)
                quiet += quiet_steps(model, opt, batch, 3)
            outs.append(report(runs, statistics.median(quiet), nbytes, cuda=device.type == "cuda", disk=disk,
                               idle=idle))
        if a.runs > 1:
            outs[-1]["summary"] = summarize(outs, loads)
        return outs[-1]
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    from training.process_exit import run_and_exit

    def _run() -> int:
        main()  # the report is printed; the dict it returns is for callers in Python
        return 0

    run_and_exit(_run)  # a gloo group on CPU: not the interpreter's teardown (training/process_exit.py)
