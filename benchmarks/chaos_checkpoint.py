"""Checkpoint chaos runs (issue 24): random SIGKILL, per-rank copy failures, full disks per tier.

Each scenario runs ``python -m training run`` (tiny model, 2 ranks, FSDP2 so every rank writes its own part of
each step; memory + NVMe + FSx + S3 on a moto server; checkpoint every 5 steps, FSx every 2nd, S3 every 4th
by default, i.e. steps 10 and 20 in FSx, step 20 in S3) with a fault hook from training/faults.py, reruns the
same command where the fault ended the job, and compares the final ``state_sha256`` with an uninterrupted
run's. The SIGKILL trials kill the whole job at a random moment and rerun it, every other one without the
node's memory tier (a replaced node). A scenario passes when the job ends bit-identical to the baseline, or
refuses with one clear line. Prints a Markdown table (the one in docs/training.md, "Chaos runs").

Issue 38's families (benchmarks/_chaos_families.py) follow, each ``--trials`` times per variant with seeded
parameters, fsdp and ddp alternating: kills during the final flush, re-sealed steps, a throttled S3, wall-clock
steps. Their table (family x variant: trials, exact, equal-loss, refused, wrong, crash, notes) is printed after
the first and, with every trial, written to ``--json``. ``--dry-run`` prints the trial plan and runs nothing.

    .venv/bin/python -m benchmarks.chaos_checkpoint [--kills 4] [--seed 0] [--quick]
        [--families legacy,final,reseal,throttle,clock] [--trials 6] [--budget-min 0] [--json FILE] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file, too
from benchmarks import _chaos_families as fam  # noqa: E402
from benchmarks._chaos_families import env_with, free_port, kill_group  # noqa: E402
from training.cli import EXIT_NOT_DURABLE  # noqa: E402 - the result is printed, the last step is behind in a tier

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = {"final": "final flush", "reseal": "re-seal", "throttle": "throttled S3", "clock": "clock step"}


S3 = {"url": None}


def args_for(tmp: Path) -> list[str]:
    return [sys.executable, "-m", "training", "run", "--model", "tiny", "--steps", "20", "--checkpoint-every", "5",
            "--checkpoint-dir", str(tmp / "ck"), "--memory-dir", str(tmp / "shm"), "--nvme-dir", str(tmp / "nvme"),
            "--nproc-per-node", "2", "--parallelism", "fsdp", "--seed", "1", "--fsx-every", "2",
            "--s3-uri", f"s3://chaos/{tmp.name}", "--s3-endpoint-url", S3["url"]]




def run(tmp: Path, **faults: str) -> tuple[int, dict | None, str]:
    """The job's exit status, its result (printed also when it exits ``EXIT_NOT_DURABLE``) and its stderr."""
    r = subprocess.run(args_for(tmp), cwd=ROOT, env=env_with(**faults), capture_output=True, text=True, timeout=600)
    lines = [x for x in r.stdout.splitlines() if x.strip()]
    done = r.returncode in (0, EXIT_NOT_DURABLE) and lines
    return r.returncode, (json.loads(lines[-1]) if done else None), r.stderr


def verdict(rc: int, out: dict | None, want: str) -> str:
    """A run's outcome against the uninterrupted run's state hash ``want``. A tier that fails the last step on every
    try leaves it behind there, which the job says in one line and exits 4 for (issue 38 item 2): the state is
    still compared, and the exit is named."""
    if not out or out.get("state_sha256") != want:
        return f"DIFFERS (exit {rc})"
    return "bit-identical" + (", exit 4: the last step behind in a tier, said" if rc == EXIT_NOT_DURABLE else "")


def killed_run(tmp: Path, delay: float) -> None:
    p = subprocess.Popen(args_for(tmp), cwd=ROOT, env=env_with(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(delay)
    kill_group(p)


SCENARIOS = {
    "rank 1's FSx copy of step 10 fails once": {"OPENPOD_FAULT_PUT": "fsx@10@1@1"},
    "rank 1's FSx copy of step 20 fails (every try)": {"OPENPOD_FAULT_PUT": "fsx@20@1"},
    "rank 1's S3 upload of step 20 fails once": {"OPENPOD_FAULT_PUT": "s3@20@1@1"},
    "rank 0's S3 upload of step 20 fails (every try)": {"OPENPOD_FAULT_PUT": "s3@20@0"},
    "memory tier full at step 10 (all ranks)": {"OPENPOD_FAULT_ENOSPC": "memory@10"},
    "memory tier full on rank 1 at every step": {"OPENPOD_FAULT_ENOSPC": "memory@*@1"},
    "NVMe full at step 10": {"OPENPOD_FAULT_ENOSPC": "nvme@10"},
    "FSx full at every step on rank 1": {"OPENPOD_FAULT_ENOSPC": "fsx@*@1"},
}


def legacy(a, d: str, rng: random.Random) -> list[tuple]:
    """The issue 24 scenarios and random SIGKILLs (the first table in docs/training.md)."""
    scenarios = dict(list(SCENARIOS.items())[:1]) if a.quick else SCENARIOS
    kills = 1 if a.quick else a.kills
    rows = []
    t0 = time.perf_counter()
    base_rc, base, err = run(Path(d, "baseline"))
    wall = time.perf_counter() - t0
    assert base_rc == 0, err[-2000:]
    want = base["state_sha256"]
    for name, faults in scenarios.items():
        tmp = Path(d, name.replace(" ", "_").replace("'", ""))
        t0 = time.perf_counter()
        rc, out, err = run(tmp, **faults)
        ck = (out or {}).get("checkpoints", {})
        rows.append((name, verdict(rc, out, want), ck.get("failed", "-"), json.dumps(ck.get("promote_failed", {})),
                     json.dumps(ck.get("durable", {})), f"{time.perf_counter() - t0:.0f}"))
    for i in range(kills):
        tmp = Path(d, f"kill{i}")
        delay = rng.uniform(0.4, 0.95) * wall  # start-up is about a third of a run
        t0 = time.perf_counter()
        killed_run(tmp, delay)
        lost = i % 2 == 1
        if lost:  # the node is replaced: its memory tier is gone
            shutil.rmtree(tmp / "shm", ignore_errors=True)
        rc, out, err = run(tmp)
        if out:
            outcome = verdict(rc, out, want)
            extra = f"resumed from step {out['restored_step']} ({(out['restored_from'] or 'fresh').split(':')[0]})"
        else:
            last = err.strip().splitlines()[-1] if err.strip() else ""
            outcome = f"refused: {last}" if rc == 3 else f"FAILED (exit {rc})"
            extra = ""
        rows.append((f"SIGKILL of the job after {delay:.1f} s, rerun{' without its memory tier' if lost else ''}",
                     outcome, "-", "-", extra,
                     f"{time.perf_counter() - t0:.0f}"))
    return rows


class Context:
    """What the family trials share: the S3 server, the uninterrupted runs (one per job profile and
    parallelism, run when first needed), the baseline's export and the clock hook."""

    def __init__(self, d: str, moto_port: int, seed: int):
        from benchmarks._chaos_net import clock_hook_dir

        self.d, self.moto_port, self.seed = Path(d), moto_port, seed
        self.s3 = f"http://127.0.0.1:{moto_port}"
        self.hook = clock_hook_dir(self.d)
        self.baselines: dict[tuple[str, str], dict] = {}
        self.baseline_lag: dict[str, dict] = {}
        self._exports: dict[str, Path] = {}

    def tmp(self, t: fam.Trial) -> Path:
        return self.d / t.name

    def base(self, profile: str, par: str) -> dict:
        if (profile, par) not in self.baselines:
            from benchmarks._chaos_net import LagWatch

            tmp = self.d / f"baseline-{profile}-{par}"
            watch = LagWatch(tmp, fam.world(par), f"s3://chaos/{tmp.name}", self.s3)
            p, t0 = fam.launch(tmp, fam.job_args(tmp, profile, par, self.s3), env_with(), "run")
            watch.start()
            fam.wait_for(lambda: fam.memory_has(tmp, fam.LAST[profile]), p)
            committed = time.monotonic()
            job = fam.collect(tmp, p, t0, "run")
            watch.stop()
            assert job.rc == 0 and job.out, job.err[-2000:]
            self.baselines[profile, par] = dict(job.out, seconds=round(job.seconds, 1),
                                                flush_seconds=round(t0 + job.seconds - committed, 2))
            if profile == "lag":
                self.baseline_lag[par] = watch.summary()
        return self.baselines[profile, par]

    def flush_seconds(self, profile: str, par: str) -> float:
        """From the last step's memory commit to the exit, in the uninterrupted run."""
        return self.base(profile, par)["flush_seconds"]

    def export(self, par: str) -> Path:
        if par not in self._exports:
            from training.checkpoint.export import export

            self.base("base", par)
            out = self.d / f"baseline-export-{par}.safetensors"
            export(str(self.d / f"baseline-base-{par}" / "ck"), out, step=fam.LAST["base"])
            self._exports[par] = out
        return self._exports[par]


COLUMNS = ("trials", "exact", "equal-loss", "refused", "wrong", "crash")


def family_table(results: list[tuple[fam.Trial, fam.Outcome]], ctx: Context | None) -> list[dict]:
    rows = []
    for family, variants in fam.VARIANTS.items():
        for key, text in variants:
            mine = [(t, o) for t, o in results if t.variant == key]
            if not mine:
                continue
            row = {"family": family, "variant": text, "trials": len(mine),
                   **{c: sum(o.verdict == c for _, o in mine) for c in COLUMNS[1:]}}
            notes = sorted({n for _, o in mine for n in o.notes})
            if family == "throttled S3":
                import statistics as st

                lag = [o.data["lag"] for _, o in mine if "lag" in o.data]
                f = [x["fsx"]["max"] for x in lag]
                s = [x["s3"]["max"] for x in lag]
                fm = [x["fsx"]["median"] for x in lag]
                sm = [x["s3"]["median"] for x in lag]
                unthrottled = (ctx.baseline_lag if ctx else {}).values()
                notes.insert(0, f"lag in steps behind memory, per trial max (median): FSx {max(f, default=0)} "
                                f"({st.median(fm) if fm else 0}), S3 {max(s, default=0)} "
                                f"({st.median(sm) if sm else 0}); unthrottled S3 "
                                f"{max((u['s3']['max'] for u in unthrottled), default='-')}")
            elif family in ("final flush", "re-seal"):
                where = sorted({o.data.get("restored", "?") for _, o in mine})
                notes.insert(0, "restored " + ", ".join(where))
            row["notes"] = "; ".join(notes)
            rows.append(row)
    return rows


def print_family_table(rows: list[dict]) -> None:
    print("| family | variant | " + " | ".join(COLUMNS) + " | notes |")
    print("|---|---|" + "---|" * len(COLUMNS) + "---|")
    for r in rows:
        print(f"| {r['family']} | {r['variant']} | " + " | ".join(str(r[c]) for c in COLUMNS) + f" | {r['notes']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=4, help="random-SIGKILL trials")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="the first scenario, one SIGKILL trial and one trial of each family (make bench)")
    ap.add_argument("--families", default="legacy," + ",".join(FAMILIES),
                    help=f"comma-separated: legacy (the issue 24 scenarios), {', '.join(FAMILIES)}")
    ap.add_argument("--trials", type=int, default=6, help="trials per variant of each family")
    ap.add_argument("--budget-min", type=float, default=0.0,
                    help="start no further family trial after this many minutes (0: no limit)")
    ap.add_argument("--json", default=None, help="write every trial and the table here")
    ap.add_argument("--dry-run", action="store_true", help="print the trial plan and exit")
    a = ap.parse_args()
    chosen = [f.strip() for f in a.families.split(",") if f.strip()]
    unknown = [f for f in chosen if f != "legacy" and f not in FAMILIES]
    if unknown or a.trials < 1:
        ap.error(f"--families: unknown {', '.join(unknown)}; allowed: legacy, {', '.join(FAMILIES)}" if unknown
                 else f"--trials: must be >= 1, got {a.trials}")
    trials = fam.plan(a.seed, 1 if a.quick else a.trials, [FAMILIES[f] for f in chosen if f in FAMILIES],
                      first_variant_only=a.quick)
    if a.dry_run:
        for t in trials:
            print(f"{t.family:13} {t.variant:9} #{t.index} {t.parallelism:4} {json.dumps(t.params, sort_keys=True)}")
        return
    rng = random.Random(a.seed)
    for k, v in env_with().items():  # this process reads the tiers too (the jobs' credentials, moto's)
        if k.startswith("AWS_"):
            os.environ[k] = v
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    S3["url"] = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=S3["url"], aws_access_key_id="chaos", aws_secret_access_key="chaos",
                 region_name="us-east-1").create_bucket(Bucket="chaos")
    started, load = time.monotonic(), [os.getloadavg()]
    rows, results, ctx = [], [], None
    with tempfile.TemporaryDirectory(prefix="openpod-chaos-") as d:
        if "legacy" in chosen:
            rows = legacy(a, d, rng)
        ctx = Context(d, port, a.seed)
        for t in trials:
            if a.budget_min and time.monotonic() - started > a.budget_min * 60:
                print(f"budget spent: {len(results)} of {len(trials)} trials run", file=sys.stderr)
                break
            t0 = time.monotonic()
            try:
                o = fam.RUNNERS[t.family](ctx, t)
            except Exception as e:  # noqa: BLE001 - the harness's own failure is a crash of the trial, said so
                o = fam.Outcome("crash", [f"harness: {type(e).__name__}: {str(e)[:160]}"])
            o.data.update(seconds_total=round(time.monotonic() - t0, 1), load=os.getloadavg()[0])
            results.append((t, o))
            print(f"{t.family} {t.name}: {o.verdict} {'; '.join(o.notes)}", file=sys.stderr, flush=True)
        load.append(os.getloadavg())
    server.stop()
    if rows:
        print("| scenario | outcome | saves failed | copies failed | newest complete step / resume | s |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
        print()
    table = family_table(results, ctx)
    if table:
        print_family_table(table)
    if a.json:
        doc = {"seed": a.seed, "load_before": load[0], "load_after": load[-1],
               "minutes": round((time.monotonic() - started) / 60, 1), "legacy": rows, "table": table,
               "baselines": {f"{k[0]}/{k[1]}": v for k, v in (ctx.baselines if ctx else {}).items()},
               "baseline_lag": ctx.baseline_lag if ctx else {},
               "trials": [{"family": t.family, "variant": t.variant, "index": t.index, "parallelism": t.parallelism,
                           "params": t.params, "verdict": o.verdict, "notes": o.notes, "data": o.data}
                          for t, o in results]}
        tmp = Path(a.json).with_name(Path(a.json).name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str))
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
