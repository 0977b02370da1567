"""Goodput at scale: a discrete-event simulation of a long training job under a published failure model.

    python -m benchmarks.goodput_at_scale [--quick] [--days 30] [--seeds 5] [--mtbf-hours H]
                                          [--sync-minutes K] [--write-docs]

A job of N accelerators (8 per node) trains for ``--days`` of wall-clock time. Interruptions
arrive as a Poisson process at N / MTBF per accelerator, each drawn from the root-cause mix
Meta published for the Llama 3 405B pre-training (466 interruptions in 54 days on 16,384
H100s; arXiv:2407.21783, section 3.3.4, Table 5). Every interruption costs what the chosen
strategy pays for it: detection, waiting for a node, restart, restore and the work since the
last usable checkpoint; failures also strike during recovery and during a checkpoint write.

Recovery costs come from this repository's own measurements (``docs/training.md``,
``docs/node-agent.md``) and code defaults, scaled by bytes where they are rates; what no
benchmark here measures (restart of a job at scale, node replacement, in-process recovery at
scale) is an estimate and labelled so in ``PARAMETERS`` and in the report. The closed form
of Young (1974) / Daly (2006) is computed next to the simulation for the synchronous strategy,
where its assumptions hold; ``tests/test_goodput_at_scale.py`` checks the two agree.

``--write-docs`` rewrites the table in ``docs/goodput.md`` and the plot ``docs/goodput-at-scale.png``.
Seeded: the same arguments print the same figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from openpod_core import instance_types

CHECKED = "2026-11-23"
LLAMA3 = "Llama 3 Herd of Models, arXiv:2407.21783"
GIB = 1024 ** 3


@dataclass(frozen=True)
class Param:
    """One input of the model: its value, unit, what kind of figure it is, and where it comes from.

    kind: ``published`` (a paper or vendor document), ``measured`` (a benchmark of this repository),
    ``code`` (a default in this repository's code), ``derived`` (computed from the others), ``estimate``.
    """

    value: float
    unit: str
    kind: str
    source: str


P5 = instance_types.get("p5.48xlarge")

PARAMETERS: dict[str, Param] = {
    # the failure model
    "interruptions": Param(466, "interruptions", "published", f"{LLAMA3}, §3.3.4: 466 job interruptions "
                           "(47 planned, 419 unexpected) in a 54-day snapshot"),
    "observed_days": Param(54, "days", "published", f"{LLAMA3}, §3.3.4"),
    "observed_accelerators": Param(16384, "H100 GPUs", "published", f"{LLAMA3}, §3.3.4"),
    # the workload: Llama 3 405B on H100 nodes
    "model_params": Param(405e9, "parameters", "published", f"{LLAMA3}: the 405B model"),
    "state_bytes_per_param": Param(14, "bytes", "estimate", "bf16 weights (2) + fp32 master weights (4) + "
                                   "two fp32 AdamW moments (8)"),
    "accelerators_per_node": Param(P5.accelerator_count, "GPUs", "code",
                                   "openpod_core/instance_types.py: p5.48xlarge"),
    "replica_accelerators": Param(128, "GPUs", "published", f"{LLAMA3}, Table 4: TP 8 x PP 16 for 405B"),
    "step_seconds": Param(6.0, "s", "estimate", f"{LLAMA3}: 16M-token batch x 6 x 405e9 FLOP / (16,384 GPUs x "
                          "~400 TFLOP/s, Table 4) = 5.9 s; held constant over N (weak scaling)"),
    # detection
    "detect_crash_s": Param(0.3, "s", "measured", "docs/node-agent.md: node agent marks the node within 100 ms "
                            "(p99, 1000 faults) + torchrun --monitor-interval=0.2 (training/cli.py)"),
    "detect_hang_s": Param(300.0, "s", "code", "training/cli.py: the launcher's hang watchdog, --hang-floor "
                           "300 s (or 10x the median step time, longer); the process-group timeout (1800 s, "
                           "training/config.py) is only the fallback"),
    # checkpoint costs measured on this repository's benchmark (xl model, 1.32 GiB of state)
    "bench_state_bytes": Param(1.32 * GIB, "bytes", "measured", "docs/training.md: xl model + AdamW state"),
    "sync_write_s": Param(1.251, "s", "measured", "docs/training.md: torch.save + fsync of 1.32 GiB (1.06 GiB/s "
                          "per writer)"),
    "async_block_s": Param(0.0071, "s", "measured", "docs/training.md: blocking time of an async save with "
                           "overlapped staging (7.1 ms; step time unchanged within noise)"),
    "async_save_s": Param(15.0, "s", "measured", "docs/training.md: background save + buddy replication of "
                          "1.32 GiB (sets the sustainable interval)"),
    "peer_restore_s": Param(4.6, "s", "measured", "docs/training.md: restore of 1.32 GiB from buddy memory "
                            "(fetch, sha256, DCP load)"),
    "disk_restore_s": Param(9.2, "s", "measured", "docs/training.md: restore of 1.32 GiB from a cold local "
                            "disk; the per-reader rate of a shared-storage restore"),
    "shared_storage_gbps": Param(200.0, "GB/s", "estimate", "aggregate bandwidth of the shared file system: "
                                 "FSx for Lustre PERSISTENT_2 at 1000 MB/s per TiB (infra/spec/storage.py allows "
                                 "125-1000) x 200 TiB"),
    # scheduling and nodes
    "restart_base_s": Param(90.0, "s", "estimate", "JobSet recreates the pods, Kueue re-admits, containers "
                            "start (image cached), torchrun rendezvous; not measured at scale here"),
    "restart_per_node_s": Param(0.05, "s/node", "estimate", "rendezvous and NCCL communicator set-up growing with "
                                "the node count (2048 nodes: +102 s)"),
    "node_repair_s": Param(15 * 60.0, "s", "estimate", "drain + reboot or Auto Scaling replacement + EKS join + "
                           "deep check (DCGM level 2 ~2 min, NCCL all-reduce, EFA loopback: docs/node-agent.md)"),
    "spare_promote_s": Param(10.0, "s", "code", "node_agent/config.py: controller poll_seconds = 10; a spare "
                             "is untainted on the next pass"),
    "spare_overflow": Param(1e-3, "probability", "estimate", "hot spares per job: the fewest with P(more node "
                            "losses than spares within one repair time) < 0.1%"),
    # in-process recovery: built (training/ft/inprocess.py), measured only on loopback here
    "inprocess_reinit_s": Param(20.0, "s", "estimate", "training/ft/inprocess.py re-forms the process group "
                                "inside the surviving processes within seconds on loopback (docs/training.md, "
                                "'In-process restart'); at 2,048 nodes (NCCL communicators, store fan-in) not "
                                "measured here (HyperPod checkpointless training reports minutes)"),
    "watchdog_s": Param(300.0, "s", "code", "training/cli.py: --hang-floor 300 s, the launcher's step-heartbeat "
                        "watchdog that the in-process restart also uses (bound = max(floor, 10x the median step "
                        "time)); a lower floor is an option the job sets, not the default"),
}
# Plausible range of each estimate (low, high, why): the sensitivity table runs the model at each end, one at a
# time, for the strategies whose headline rests on them.
SENSITIVITY: dict[str, tuple[float, float, str]] = {
    "state_bytes_per_param": (12.0, 16.0, "bf16 master weights (12) .. fp32 grads kept too (16)"),
    "step_seconds": (4.0, 12.0, "faster kernels, or a smaller batch / slower network"),
    "shared_storage_gbps": (50.0, 500.0, "a 50 TiB file system .. a larger one or S3 with many prefixes"),
    "restart_base_s": (60.0, 300.0, "image cached, warm pool .. image pull, Kueue queueing, slow rendezvous"),
    "restart_per_node_s": (0.01, 0.2, "a scalable rendezvous .. NCCL bootstrap of 2,048 nodes at 400 s"),
    "node_repair_s": (600.0, 3600.0, "a reboot that heals .. Auto Scaling replacement with a long deep check"),
    "spare_overflow": (1e-4, 1e-2, "more spares held .. fewer"),
    "inprocess_reinit_s": (10.0, 120.0, "seconds (the goal) .. minutes (HyperPod checkpointless reports minutes)"),
}
SENSITIVE_STRATEGIES = ("+ hot spares", "+ in-process recovery")
# Root causes of the 466 interruptions. Counts from Table 5 of the Llama 3 paper (the 419 unexpected ones;
# they sum to 419; the paper prints 30.1% next to 148 although 148/419 = 35.3%, we use the counts) plus the
# 47 planned ones (§3.3.4). ``effect``: node = the node leaves the job until repaired or a spare replaces it;
# process = the node stays, processes restart; planned = announced, a checkpoint is taken first.
# ``detection``: crash = a process dies (noticed at once); hang = a collective stops (noticed by a timeout).
# Both columns are our classification, not the paper's.
FAULTS: tuple[tuple[str, str, int, str, str], ...] = (
    # component, paper category, count, effect, detection
    ("Faulty GPU", "GPU", 148, "node", "crash"),
    ("GPU HBM3 memory", "GPU", 72, "node", "crash"),
    ("Software bug", "Dependency", 54, "process", "crash"),
    ("Network switch/cable", "Network", 35, "node", "hang"),
    ("Host maintenance", "Unplanned maintenance", 32, "node", "crash"),
    ("GPU SRAM memory", "GPU", 19, "node", "crash"),
    ("GPU system processor", "GPU", 17, "node", "crash"),
    ("NIC", "Host", 7, "node", "hang"),
    ("NCCL watchdog timeouts", "Unknown", 7, "process", "hang"),
    ("Silent data corruption", "GPU", 6, "node", "hang"),
    ("GPU thermal interface + sensor", "GPU", 6, "node", "crash"),
    ("SSD", "Host", 3, "node", "crash"),
    ("Power supply", "Host", 3, "node", "crash"),
    ("Server chassis", "Host", 2, "node", "crash"),
    ("IO expansion board", "Host", 2, "node", "crash"),
    ("Dependency", "Dependency", 2, "process", "crash"),
    ("CPU", "Host", 2, "node", "crash"),
    ("System memory", "Host", 2, "node", "crash"),
    ("Planned maintenance", "Planned", 47, "planned", "crash"),
)
SIZES = (1024, 16384, 102400)
BUCKETS = ("productive", "checkpoint_blocking", "restore", "replayed", "rescheduling", "hung", "spares")


def p(name: str) -> float:
    return PARAMETERS[name].value


def mtbf_hours_per_accelerator() -> float:
    """Mean hours between interruptions per accelerator in the Llama 3 run (≈45,600 h, 5.2 years)."""
    return p("observed_days") * 24 * p("observed_accelerators") / p("interruptions")


@dataclass(frozen=True)
class Fault:
    effect: str        # node | process | planned
    detection: str     # crash | hang


@dataclass(frozen=True)
class Costs:
    """What one strategy pays, for one job size. All times in seconds of wall clock."""

    name: str
    mode: str                    # sync | async | inprocess
    interval: float              # seconds of training between checkpoint starts
    ckpt_block: float            # the training loop stops this long per checkpoint
    ckpt_lag: float = 0.0        # async: a checkpoint is usable this long after it started
    detect_crash: float = 0.0
    detect_hang: float = 0.0
    restart: float = 0.0
    restore: float = 0.0
    node_repair: float = 0.0     # a lost node is back (repaired or replaced) after this long
    spares: int = 0              # hot spare nodes held for the job
    spare_promote: float = 0.0
    step: float = 0.0            # inprocess: at most the step in flight is lost


@dataclass
class Result:
    seconds: dict[str, float]
    interruptions: int
    wall: float
    paid_ratio: float            # (job + spare accelerators) / job accelerators

    @property
    def goodput(self) -> float:
        return self.seconds["productive"] / (self.wall * self.paid_ratio)


def fault_mix(faults=FAULTS) -> tuple[list[Fault], list[int]]:
    return [Fault(f[3], f[4]) for f in faults], [f[2] for f in faults]


def simulate(costs: Costs, *, accelerators: int, mtbf_hours: float, days: float, seed: int,
             faults=FAULTS, per_node: int | None = None) -> Result:
    """Run one job for ``days`` of wall clock; return where the time went.

    Seconds are accounted like ``training/goodput.py``'s ledger: work later lost to a failure moves
    from ``productive`` to ``replayed``; waiting for detection of a hang is ``hung``; crash detection,
    waiting for a node and the restart are ``rescheduling``.
    """
    rng = random.Random(seed)
    in_flight = random.Random(seed + 7919)   # separate stream: every strategy sees the same failures
    kinds, weights = fault_mix(faults)
    per_node = per_node or int(p("accelerators_per_node"))
    rate = accelerators / (mtbf_hours * 3600.0)
    horizon = days * 86400.0
    sec = dict.fromkeys(BUCKETS, 0.0)
    t = 0.0
    work = 0.0                 # seconds of progress made (at full speed)
    committed = 0.0            # progress a restore would return to
    ck_start_work, ck_done_at = 0.0, math.inf   # async: the newest checkpoint and when it is usable
    since_ck = 0.0             # progress since the last checkpoint started
    repairs: list[float] = []  # times at which nodes in repair come back into the spare pool
    spares = costs.spares
    node_ready_at = 0.0        # the job misses a node until then
    n_fail = 0
    next_fail = rng.expovariate(rate)

    def fail_now() -> Fault:
        nonlocal next_fail, n_fail
        n_fail += 1
        next_fail = t + rng.expovariate(rate)
        return rng.choices(kinds, weights)[0]

    fault: Fault | None = None
    while t < horizon:
        if fault is None:
            # ---- training: run until the next checkpoint starts, a failure, or the end
            to_ck = max(0.0, costs.interval - since_ck)
            end = min(t + to_ck, next_fail, horizon)
            dt = end - t
            t, work, since_ck = end, work + dt, since_ck + dt
            sec["productive"] += dt
            if costs.mode == "async" and ck_done_at <= t:
                committed = ck_start_work
            if t >= horizon:
                break
            if t == next_fail:
                fault = fail_now()
                continue
            # ---- a checkpoint starts
            block_end = min(t + costs.ckpt_block, next_fail, horizon)
            sec["checkpoint_blocking"] += block_end - t
            t = block_end
            if t == next_fail:
                fault = fail_now()
                continue
            since_ck = 0.0
            if costs.mode == "sync":
                committed = work
            else:
                if ck_done_at <= t:
                    committed = ck_start_work
                ck_start_work, ck_done_at = work, t + costs.ckpt_lag
            continue

        # ---- a fault: account lost work, then recover (a new failure restarts the recovery)
        if costs.mode == "async" and ck_done_at <= t:
            committed = ck_start_work
        if fault.effect == "planned":
            committed = work                      # announced: a checkpoint is taken first
        elif costs.mode == "inprocess":
            committed = max(committed, work - in_flight.uniform(0.0, costs.step))
        lost = work - committed
        sec["productive"] -= lost
        sec["replayed"] += lost
        work = committed
        since_ck = 0.0
        ck_start_work, ck_done_at = committed, math.inf

        phases: list[tuple[str, float]] = []
        if fault.effect == "planned":
            phases.append(("checkpoint_blocking", costs.ckpt_block))
        else:
            if fault.detection == "hang":
                phases.append(("hung", costs.detect_hang))
            else:
                phases.append(("rescheduling", costs.detect_crash))
        if fault.effect == "node":
            if costs.spares:
                repairs.append(t + costs.node_repair)
                repairs.sort()
                while repairs and repairs[0] <= t:
                    repairs.pop(0)
                    spares += 1
                if spares > 0:
                    spares -= 1
                    ready = t + costs.spare_promote
                else:                              # pool empty: the first node back from repair
                    ready = max(t + costs.spare_promote, repairs.pop(0))
            else:
                ready = t + costs.node_repair
            node_ready_at = max(node_ready_at, ready)
        waited = sum(d for _, d in phases)
        if node_ready_at > t + waited:             # the job still misses a node (also after a later fault)
            phases.append(("rescheduling", node_ready_at - t - waited))
        phases.append(("rescheduling", costs.restart))
        phases.append(("restore", costs.restore))
        fault = None
        for bucket, dur in phases:
            end = min(t + dur, next_fail, horizon)
            sec[bucket] += end - t
            t = end
            if t == next_fail:
                fault = fail_now()
                break
            if t >= horizon:
                break
    paid = (accelerators + costs.spares * per_node) / accelerators
    sec["spares"] = horizon * (paid - 1.0)
    return Result(sec, n_fail, horizon, paid)


# ---------------------------------------------------------------- closed forms

def young_interval(ckpt: float, mtbf: float) -> float:
    """Young (1974): the checkpoint interval that minimises lost time, sqrt(2 C M)."""
    return math.sqrt(2.0 * ckpt * mtbf)


def daly_goodput(interval: float, ckpt: float, restart: float, mtbf: float) -> float:
    """Daly (2006), exact for exponential failures that also strike checkpoints and restarts:
    expected wall time per ``interval`` of work is M e^(R/M) (e^((τ+C)/M) - 1)."""
    return interval / (mtbf * math.exp(restart / mtbf) * (math.exp((interval + ckpt) / mtbf) - 1.0))


# ---------------------------------------------------------------- strategies

def state_bytes() -> float:
    return p("model_params") * p("state_bytes_per_param")


def job_mtbf_s(accelerators: int, mtbf_hours: float) -> float:
    return mtbf_hours * 3600.0 / accelerators


def spares_needed(accelerators: int, mtbf_hours: float, repair_s: float) -> int:
    """Fewest spares with P(more node losses than spares within one repair time) below ``spare_overflow``."""
    node_share = sum(f[2] for f in FAULTS if f[3] == "node") / sum(f[2] for f in FAULTS)
    lam = repair_s / job_mtbf_s(accelerators, mtbf_hours) * node_share
    k, term, cdf = 0, math.exp(-lam), math.exp(-lam)
    while 1.0 - cdf >= p("spare_overflow"):
        k += 1
        term *= lam / k
        cdf += term
    return max(1, k)


def strategies(accelerators: int, mtbf_hours: float, sync_minutes: float = 30.0) -> list[Costs]:
    """The strategies compared, with their costs at this job size (see PARAMETERS for each figure)."""
    total = state_bytes()
    shard = total / accelerators                          # fully sharded state: bytes per rank
    nodes = accelerators / p("accelerators_per_node")
    per_byte = lambda name: p(name) / p("bench_state_bytes")   # noqa: E731 - seconds per byte, measured
    shared_bw = p("shared_storage_gbps") * 1e9
    sync_ckpt = max(shard * per_byte("sync_write_s"), total / shared_bw)
    shared_restore = max(shard * per_byte("disk_restore_s"), total / shared_bw)
    peer_restore = shard * per_byte("peer_restore_s")
    async_lag = shard * per_byte("async_save_s")
    step = p("step_seconds")
    async_interval = max(step, math.ceil(async_lag / step) * step)
    restart = p("restart_base_s") + p("restart_per_node_s") * nodes
    mtbf = job_mtbf_s(accelerators, mtbf_hours)
    common = dict(detect_crash=p("detect_crash_s"), detect_hang=p("detect_hang_s"), restart=restart,
                  node_repair=p("node_repair_s"), spare_promote=p("spare_promote_s"))
    spares = spares_needed(accelerators, mtbf_hours, p("node_repair_s"))
    sync = Costs(f"sync to shared storage every {sync_minutes:g} min", "sync", sync_minutes * 60.0, sync_ckpt,
                 restore=shared_restore, **common)
    young = dataclasses.replace(sync, name="sync to shared storage, Young interval",
                                interval=young_interval(sync_ckpt, mtbf))
    tiered = Costs("async tiered + peer recovery", "async", async_interval, p("async_block_s"), async_lag,
                   restore=peer_restore, **common)
    sync_spare = dataclasses.replace(sync, name=f"sync every {sync_minutes:g} min + hot spares", spares=spares)
    spare = dataclasses.replace(tiered, name="+ hot spares", spares=spares)
    inproc = dataclasses.replace(
        spare, name="+ in-process recovery & peer healing (re-init estimated)", mode="inprocess",
        detect_hang=p("watchdog_s"), restart=p("inprocess_reinit_s"), step=step)
    return [sync, young, sync_spare, tiered, spare, inproc]


def sensitivity(accelerators: int = 16384, *, days: float = 30.0, seeds: int = 5,
                mtbf_hours: float | None = None) -> list[dict]:
    """Goodput of ``SENSITIVE_STRATEGIES`` with each estimate of ``SENSITIVITY`` at its low and high end (the
    others at their defaults)."""
    mtbf_hours = mtbf_hours or mtbf_hours_per_accelerator()

    def goodputs() -> dict[str, float]:
        out = {}
        for c in strategies(accelerators, mtbf_hours):
            if c.name.startswith(SENSITIVE_STRATEGIES):
                out[c.name] = statistics.fmean(
                    simulate(c, accelerators=accelerators, mtbf_hours=mtbf_hours, days=days, seed=s).goodput
                    for s in range(seeds))
        return out

    base = goodputs()
    rows = []
    for name, (low, high, why) in SENSITIVITY.items():
        kept = PARAMETERS[name]
        try:
            ends = []
            for v in (low, high):
                PARAMETERS[name] = dataclasses.replace(kept, value=v)
                ends.append(goodputs())
        finally:
            PARAMETERS[name] = kept
        rows.append({"parameter": name, "default": kept.value, "low": low, "high": high, "why": why,
                     "base": base, "at_low": ends[0], "at_high": ends[1]})
    return rows


def sensitivity_table(rows: list[dict]) -> str:
    names = list(rows[0]["base"])
    out = ["| estimate | default | low .. high | why that range | "
           + " | ".join(f"{n}: at low / at high" for n in names) + " |",
           "|---|---:|---|---|" + "---:|" * len(names)]
    for r in rows:
        cells = " | ".join(f"{r['at_low'][n]:.2%} / {r['at_high'][n]:.2%}" for n in names)
        out.append(f"| `{r['parameter']}` | {r['default']:.4g} | {r['low']:.4g} .. {r['high']:.4g} | {r['why']} | "
                   f"{cells} |")
    out.append("| (all at default) | | | | " + " | ".join(f"{rows[0]['base'][n]:.2%}" for n in names) + " |")
    return "\n".join(out)


def measured_here() -> str:
    """Which inputs this repository measures, which are code defaults, published, or estimates."""
    kinds = {}
    for name, prm in PARAMETERS.items():
        kinds.setdefault(prm.kind, []).append(f"`{name}`")
    order = ("measured", "code", "published", "derived", "estimate")
    return "\n".join(f"- **{k}**: {', '.join(kinds[k])}" for k in order if k in kinds)


def run(sizes=SIZES, *, days: float = 30.0, seeds: int = 5, mtbf_hours: float | None = None,
        sync_minutes: float = 30.0) -> list[dict]:
    mtbf_hours = mtbf_hours or mtbf_hours_per_accelerator()
    rows = []
    for n in sizes:
        for c in strategies(n, mtbf_hours, sync_minutes):
            results = [simulate(c, accelerators=n, mtbf_hours=mtbf_hours, days=days, seed=s) for s in range(seeds)]
            goodputs = [r.goodput for r in results]
            paid = results[0].wall * results[0].paid_ratio * len(results)
            row = {"accelerators": n, "strategy": c.name, "costs": c,
                   "goodput": statistics.fmean(goodputs),
                   "goodput_sd": statistics.stdev(goodputs) if len(goodputs) > 1 else 0.0,
                   "interruptions_per_day": statistics.fmean(r.interruptions for r in results) / days,
                   "share": {b: sum(r.seconds[b] for r in results) / paid for b in BUCKETS}}
            if c.mode == "sync":
                row["daly"] = daly_goodput(c.interval, c.ckpt_block,
                                           _mean_recovery(c), job_mtbf_s(n, mtbf_hours))
            rows.append(row)
    return rows


def _mean_recovery(c: Costs) -> float:
    """Mean recovery time over the fault mix, for the closed form (which knows one restart cost R)."""
    tot = sum(f[2] for f in FAULTS)
    r = 0.0
    for _, _, count, effect, detection in FAULTS:
        d = 0.0 if effect == "planned" else (c.detect_hang if detection == "hang" else c.detect_crash)
        wait = c.node_repair if effect == "node" and not c.spares else (c.spare_promote if effect == "node" else 0)
        r += count / tot * (d + wait + c.restart + c.restore)
    return r


# ---------------------------------------------------------------- report

def table(rows: list[dict]) -> str:
    out = ["| accelerators | strategy | goodput | ± sd | Young/Daly | ckpt blocking | restore | replayed | "
           "rescheduling | hung | spares | interval | interruptions/day |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s, c = r["share"], r["costs"]
        daly = f"{r['daly']:.2%}" if "daly" in r else "-"
        out.append(f"| {r['accelerators']:,} | {r['strategy']} | **{r['goodput']:.2%}** | {r['goodput_sd']:.2%} | "
                   f"{daly} | {s['checkpoint_blocking']:.2%} | {s['restore']:.2%} | {s['replayed']:.2%} | "
                   f"{s['rescheduling']:.2%} | {s['hung']:.2%} | {s['spares']:.2%} | {_dur(c.interval)} | "
                   f"{r['interruptions_per_day']:.1f} |")
    return "\n".join(out)


def costs_table(rows: list[dict]) -> str:
    out = ["| accelerators | strategy | ckpt blocking | usable after | restart | restore | spare nodes |",
           "|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        c = r["costs"]
        out.append(f"| {r['accelerators']:,} | {c.name} | {_dur(c.ckpt_block)} | "
                   f"{_dur(c.ckpt_lag) if c.mode != 'sync' else _dur(c.ckpt_block)} | {_dur(c.restart)} | "
                   f"{_dur(c.restore)} | {c.spares} |")
    return "\n".join(out)


def params_table() -> str:
    out = ["| parameter | value | unit | kind | source |", "|---|---:|---|---|---|"]
    for k, v in PARAMETERS.items():
        val = f"{v.value:.4g}" if v.value < 1e6 else f"{v.value:.3e}"
        out.append(f"| `{k}` | {val} | {v.unit} | {v.kind} | {v.source} |")
    return "\n".join(out)


def faults_table() -> str:
    tot = sum(f[2] for f in FAULTS)
    out = ["| root cause | paper category | count | share | effect (ours) | detection (ours) |",
           "|---|---|---:|---:|---|---|"]
    out += [f"| {a} | {b} | {n} | {n / tot:.1%} | {e} | {d} |" for a, b, n, e, d in FAULTS]
    return "\n".join(out)


def _dur(s: float) -> str:
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 120:
        return f"{s:.1f} s"
    return f"{s / 60:.1f} min"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["strategy"] for r in rows))
    sizes = sorted({r["accelerators"] for r in rows})
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 1.2]})
    for name in names:
        pts = [r for r in rows if r["strategy"] == name]
        ax.errorbar([r["accelerators"] for r in pts], [100 * r["goodput"] for r in pts],
                    yerr=[100 * r["goodput_sd"] for r in pts], marker="o", capsize=3,
                    linestyle="--" if "estimate" in name else "-", label=name)
    ax.axhline(97, color="grey", linewidth=0.8, linestyle=":")
    ax.text(sizes[0], 97.3, "97% goal", color="grey", fontsize=8)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.set_xlabel("accelerators in the job")
    ax.set_ylabel("goodput (% of paid accelerator time)")
    ax.set_title("Goodput under the Llama 3 failure rate")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    mid = sorted(sizes)[len(sizes) // 2]
    pts = [r for r in rows if r["accelerators"] == mid]
    losses = [b for b in BUCKETS if b != "productive"]
    left = [0.0] * len(pts)
    for b in losses:
        vals = [100 * r["share"][b] for r in pts]
        bx.barh(range(len(pts)), vals, left=left, label=b)
        left = [a + v for a, v in zip(left, vals)]
    bx.set_yticks(range(len(pts)), [r["strategy"] for r in pts], fontsize=7)
    bx.invert_yaxis()
    bx.set_xlabel("% of paid accelerator time lost")
    bx.set_title(f"Where the time goes at {mid:,} accelerators")
    bx.legend(fontsize=7)
    bx.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_docs(rows: list[dict], docs: Path, *, days: float, seeds: int) -> None:
    page = docs / "goodput.md"
    text = page.read_text()
    blocks = {"table": table(rows), "costs": costs_table(rows), "params": params_table(), "faults": faults_table(),
              "sensitivity": sensitivity_table(sensitivity(days=days, seeds=seeds)), "kinds": measured_here(),
              "run": f"`python -m benchmarks.goodput_at_scale --days {days:g} --seeds {seeds} --write-docs`; "
                     f"per-accelerator MTBF {mtbf_hours_per_accelerator():,.0f} h."}
    for key, body in blocks.items():
        start, end = f"<!-- goodput:{key} -->", f"<!-- /goodput:{key} -->"
        a, b = text.index(start) + len(start), text.index(end)
        text = text[:a] + "\n" + body + "\n" + text[b:]
    page.write_text(text)
    plot(rows, docs / "goodput-at-scale.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 days, 2 seeds")
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--mtbf-hours", type=float, default=None,
                    help=f"per-accelerator MTBF (default: the Llama 3 run's, {mtbf_hours_per_accelerator():,.0f} h)")
    ap.add_argument("--sync-minutes", type=float, default=30.0, help="interval of the synchronous strategy")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a parameter for a sensitivity run, e.g. --set restart_per_node_s=0.01")
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/goodput.md's tables and the plot")
    a = ap.parse_args(argv)
    for item in a.set:
        name, _, value = item.partition("=")
        try:
            PARAMETERS[name] = dataclasses.replace(PARAMETERS[name], value=float(value), kind="override")
        except KeyError:
            print(f"error: --set {item}: unknown parameter; known: {', '.join(PARAMETERS)}", file=sys.stderr)
            return 2
        except ValueError:
            print(f"error: --set {item}: the value must be a number", file=sys.stderr)
            return 2
    if a.set and a.write_docs:
        print("error: --write-docs: the docs show the default parameters; drop --set", file=sys.stderr)
        return 2
    if a.quick:
        a.days, a.seeds = 10.0, 2
    for flag, v in (("--days", a.days), ("--seeds", a.seeds), ("--mtbf-hours", a.mtbf_hours or 1),
                    ("--sync-minutes", a.sync_minutes)):
        if v <= 0:
            print(f"error: {flag}: must be positive, got {v}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    rows = run(days=a.days, seeds=a.seeds, mtbf_hours=a.mtbf_hours, sync_minutes=a.sync_minutes)
    print(table(rows))
    print(f"\n{len(rows)} runs x {a.seeds} seeds x {a.days:g} days simulated in {time.perf_counter() - t0:.1f} s")
    if a.write_docs:
        write_docs(rows, Path(__file__).resolve().parent.parent / "docs", days=a.days, seeds=a.seeds)
        print("wrote docs/goodput.md and docs/goodput-at-scale.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
