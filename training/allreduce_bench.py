"""All-reduce bandwidth with torch.distributed, printed as nccl-tests' ``all_reduce_perf`` prints it.

Run under torchrun on each node of the pair (node_agent/pair_check.py renders the Job)::

    torchrun --nnodes 2 --nproc-per-node 8 ... -m training.allreduce_bench --backend nccl -b 8 -e 1G

Every rank all-reduces a buffer of ones (sum); a rank whose result is not the world size counts
as wrong. Bus bandwidth is nccl-tests' definition for all-reduce, ``algbw * 2(n-1)/n``
(NVIDIA/nccl-tests@v2.19.6:doc/PERFORMANCE.md:50-63). Rank 0 prints the table and the footer in
the layout of NVIDIA/nccl-tests@v2.19.6:src/util.cu:457 (size count type redop root),
497-510 (time algbw busbw #wrong, out-of-place then in-place) and 756-759, 777-778 (header,
"Out of bounds values", "Avg bus bandwidth"), so node_agent.deep_check.parse_all_reduce_perf reads
both tools. Only in-place is measured (torch's all_reduce is in place): the out-of-place columns
repeat it.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist


def _bytes(s: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    out, n = [], max(min_bytes, 4)
    while n <= max_bytes:
        out.append(n)
        n *= factor
    return out


def bus_bandwidth(nbytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (10^9 bytes) for an all-reduce of ``nbytes`` taking ``seconds``."""
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * 2 * (world - 1) / world


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="1G")
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup-iters", type=int, default=5)
    a = p.parse_args(argv)
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if a.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    out = print if rank == 0 else (lambda *_, **__: None)
    out(f"# openpod all-reduce check (torch.distributed {a.backend}): nranks {world}")
    out("#")
    out("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
        % ("", "", "", "", ""))
    out("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s"
        % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
           "time", "algbw", "busbw", "#wrong"))
    out("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s"
        % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""))
    total_wrong, busbws = 0, []
    for nbytes in sizes(_bytes(a.minbytes), _bytes(a.maxbytes)):
        count = nbytes // 4
        buf = torch.ones(count, dtype=torch.float32, device=device)
        for _ in range(a.warmup_iters):
            dist.all_reduce(buf)
        buf.fill_(1.0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(a.iters):
            if i == a.iters - 1:
                buf.fill_(1.0)  # the last iteration's result is checked
            dist.all_reduce(buf)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - t0) / a.iters
        wrong = torch.tensor([int((buf != world).sum())], device=device)
        dist.all_reduce(wrong)
        elapsed = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time, as nccl-tests reports
        algbw, busbw = bus_bandwidth(nbytes, float(elapsed), world)
        total_wrong += int(wrong)
        busbws.append(busbw)
        half = "  %7.2f  %6.2f  %6.2f  %6g" % (float(elapsed) * 1e6, algbw, busbw, int(wrong))
        out("%12li  %12li  %8s  %6s  %6i" % (nbytes, count, "float", "sum", -1) + half + half)
    out("# %-20s : %d %s" % ("Out of bounds values", total_wrong, "FAILED" if total_wrong else "OK"))
    out("# %-20s : %g " % ("Avg bus bandwidth", sum(busbws) / len(busbws)))
    out("#")
    dist.destroy_process_group()
    return 1 if total_wrong else 0


if __name__ == "__main__":
    from training.process_exit import run_and_exit

    run_and_exit(main)  # a gloo run: not the interpreter's teardown (training/process_exit.py)
