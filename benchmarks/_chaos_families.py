"""Issue 38's chaos families for benchmarks/chaos_checkpoint.py: kills during the final flush, re-sealed steps, a
throttled S3 and wall-clock steps. Each family is a class of scenarios; a trial draws its parameters from a
generator seeded with (seed, variant, index), so a trial is reproduced alone. A trial's verdict: ``exact``
(``state_sha256`` and loss equal to the uninterrupted run's, and every check of its family held), ``refused``
(exit 4 with one line naming the tier behind, and the rerun that line asks for promotes it - allowed for the
final flush), ``wrong`` (another state, or a
check failed: a tier claimed durable that does not verify, a last step missing from a shared tier after exit 0)
or ``crash`` (any other exit, or a time-out). None of these families changes what is computed, so the
equal-loss class (a hash allowed to differ, docs/training.md) stays empty unless something is wrong."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._chaos_net import LagWatch, ThrottledProxy
from benchmarks._ports import free_port

ROOT = Path(__file__).resolve().parents[1]
LAST = {"base": 20, "lag": 40, "long": 60}
PROFILES = {  # steps, checkpoint every, FSx every n-th, S3 every n-th checkpoint
    "base": (20, 5, 2, 4),   # the legacy scenarios' job: FSx holds 10 and 20, S3 20
    "lag": (40, 2, 1, 1),    # every checkpoint due in FSx and S3: lag shows at once
    "long": (60, 5, 2, 4),   # ~7 s of steps: room for a clock step mid-run
}
LAG_BOUND_SAVES = 2  # CheckpointConfig.tier_lag_saves' default (training/config.py)

VARIANTS = {  # family -> [(variant key, what the row says)]
    "final flush": [("point", "kill point at the last step (before/after its commit, in its promotion), rerun "
                              "(1 in 3 without node memory)"),
                    ("sigkill", "SIGKILL at a random moment in the first 40% of the time from the last step's memory "
                                "commit to the job's exit (as timed in the uninterrupted run: the copies), rerun (1 "
                                "in 3 without node memory)")],
    "re-seal": [("damaged", "the last step's FSx or S3 copy damaged after the job ended, rerun"),
                ("resave", "the last step damaged in every tier: the rerun saves it again over its sealed "
                           "FSx and S3 copies")],
    "throttled S3": [("proxy", "S3 behind a 100-200 KB/s link (TCP proxy)"),
                     ("slowput", "every S3 copy 1-3 s longer (OPENPOD_FAULT_SLOW_PUT)")],
    "clock step": [("forward", "wall clock +600 s mid-run"), ("backward", "wall clock -600 s mid-run")],
}
FAMILY_PROFILE = {"final flush": "base", "re-seal": "base", "throttled S3": "lag", "clock step": "long"}


@dataclass
class Trial:
    family: str
    variant: str
    index: int
    parallelism: str
    params: dict

    @property
    def name(self) -> str:
        return f"{self.variant}-{self.index}-{self.parallelism}"


@dataclass
class Outcome:
    verdict: str
    notes: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)


def plan(seed: int, trials: int, families: list[str], first_variant_only: bool = False) -> list[Trial]:
    """Round-robin over the variants (a time budget cut short still covers each), fsdp and ddp alternating."""
    out = []
    for i in range(trials):
        for fam in families:
            for key, _ in VARIANTS[fam][:1] if first_variant_only else VARIANTS[fam]:
                rng = random.Random(f"{seed}:{key}:{i}")
                out.append(Trial(fam, key, i, ("fsdp", "ddp")[i % 2], draw(key, rng)))
    return out


def draw(key: str, rng: random.Random) -> dict:
    if key == "point":
        return {"point": rng.choice(["before_commit", "after_commit", "during_promote"]),
                "rank": rng.choice([None, 0, 1]), "lose_memory": rng.random() < 1 / 3}
    if key == "sigkill":
        return {"at": round(rng.uniform(0.0, 0.4), 2), "lose_memory": rng.random() < 1 / 3}
    if key == "damaged":  # S3's listing check is sizes (hashes at each download; S3 checks its own bytes): no flip
        tier = rng.choice(["fsx", "s3"])
        return {"tier": tier, "rank": rng.choice([0, 1]), "file": rng.choice(["__0_0.distcp", ".metadata"]),
                "how": rng.choice(["flip", "truncate", "delete"] if tier == "fsx" else ["truncate", "delete"])}
    if key == "resave":
        return {"rank": rng.choice([0, 1]), "how": {t: rng.choice(["flip", "truncate", "delete"])
                                                    for t in ("memory", "nvme", "fsx", "s3")},
                "restore_from": rng.choice(["fsx", "s3"])}
    if key == "proxy":
        return {"kb_per_s": rng.choice([100, 150, 200])}
    if key == "slowput":
        return {"seconds": rng.choice([1.0, 2.0, 3.0])}
    if key in ("forward", "backward"):
        return {"seconds": 600.0 if key == "forward" else -600.0, "after_s": round(rng.uniform(0.0, 1.5), 2),
                "hang_floor": rng.choice([300, 120])}
    raise ValueError(key)


# ----------------------------------------------------------------------------------------------- running jobs
def env_with(pythonpath: str = str(ROOT), **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENPOD_", "CHAOS_"))}
    env.update(PYTHONPATH=pythonpath, OMP_NUM_THREADS="1", AWS_ACCESS_KEY_ID="chaos", AWS_SECRET_ACCESS_KEY="chaos",
               AWS_DEFAULT_REGION="us-east-1", **extra)
    return env


def job_args(tmp: Path, profile: str, par: str, endpoint: str, extra: tuple = ()) -> list[str]:
    steps, every, fsx_every, s3_every = PROFILES[profile]
    return [sys.executable, "-m", "training", "run", "--model", "tiny", "--steps", str(steps),
            "--checkpoint-every", str(every), "--checkpoint-dir", str(tmp / "ck"), "--memory-dir", str(tmp / "shm"),
            "--nvme-dir", str(tmp / "nvme"), "--nproc-per-node", "2", "--parallelism", par, "--seed", "1",
            "--fsx-every", str(fsx_every), "--s3-every", str(s3_every), "--s3-uri", f"s3://chaos/{tmp.name}",
            "--s3-endpoint-url", endpoint, *extra]


@dataclass
class Job:
    rc: int | str  # "timeout" when it had to be killed
    out: dict | None
    err: str
    seconds: float


def launch(tmp: Path, args: list[str], env: dict, tag: str) -> tuple[subprocess.Popen, float]:
    tmp.mkdir(parents=True, exist_ok=True)
    with open(tmp / f"{tag}.out", "w") as o, open(tmp / f"{tag}.err", "w") as e:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=o, stderr=e, start_new_session=True), time.monotonic()


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def collect(tmp: Path, p: subprocess.Popen, t0: float, tag: str, timeout: float = 480) -> Job:
    try:
        rc: int | str = p.wait(timeout=max(1.0, timeout - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        kill_group(p)
        rc = "timeout"
    lines = [x for x in (tmp / f"{tag}.out").read_text().splitlines() if x.strip()]
    out = None
    if rc in (0, 4) and lines:
        try:
            out = json.loads(lines[-1])
        except ValueError:
            out = None
    return Job(rc, out, (tmp / f"{tag}.err").read_text(), time.monotonic() - t0)


def run_job(tmp: Path, args: list[str], env: dict, tag: str) -> Job:
    p, t0 = launch(tmp, args, env, tag)
    return collect(tmp, p, t0, tag)


def wait_for(pred, p: subprocess.Popen, timeout: float = 300) -> bool:
    """Poll ``pred`` every 20 ms until it holds (True) or the job ends or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        if pred():
            return True
        time.sleep(0.02)
    return False


def memory_has(tmp: Path, step: int) -> bool:
    return any((tmp / "shm").glob(f"*/step_{step:09d}/rank_00000.commit.json"))


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("error:")]


# ----------------------------------------------------------------------------------------------- checks
def world(par: str) -> int:
    return 2 if par == "fsdp" else 1  # replicated (DDP) state: rank 0's part is the step in shared tiers


def verify(ctx, tmp: Path, par: str, step: int) -> dict[str, str | None]:
    """Each shared tier's own verification of ``step`` (None: verifies), read directly."""
    from training.checkpoint.storage import DirTier, S3Tier

    return {"fsx": DirTier("fsx", tmp / "ck", fsync=False).verify_step(step, world(par)),
            "s3": S3Tier(f"s3://chaos/{tmp.name}", endpoint_url=ctx.s3).verify_step(step, world(par))}


def newest_complete(ctx, tmp: Path, par: str) -> dict[str, int | None]:
    from training.checkpoint.storage import DirTier, S3Tier

    tiers = {"fsx": DirTier("fsx", tmp / "ck", fsync=False),
             "s3": S3Tier(f"s3://chaos/{tmp.name}", endpoint_url=ctx.s3)}
    return {k: max(t.complete_steps(world(par)), default=None) for k, t in tiers.items()}


def judge(job: Job, base: dict, o: Outcome, *, may_refuse: bool = False) -> str:
    """The verdict of a job's end state against the uninterrupted run (``base``), its reasons into ``o.notes``."""
    if job.rc == "timeout":
        o.notes.append("timed out")
        return "crash"
    if job.rc == 4 and job.out is not None:
        lines = error_lines(job.err)
        behind = job.out["checkpoints"].get("tiers_behind", {})
        if may_refuse and len(lines) == 1 and behind and all(k in lines[0] for k in behind):
            o.notes.append(f"exit 4: {', '.join(sorted(behind))} behind")
            return "refused"
        o.notes.append(f"exit 4: {lines[:1]}" if not may_refuse else f"exit 4 without one line naming the tier: {lines}")
        return "wrong"
    if job.rc != 0 or job.out is None:
        tail = job.err.strip().splitlines()[-1:] or [""]
        o.notes.append(f"exit {job.rc}: {tail[0][:160]}")
        return "crash"
    if job.out["state_sha256"] == base["state_sha256"] and job.out["loss"] == base["loss"]:
        return "exact"
    if job.out["loss"] == base["loss"]:
        o.notes.append("hash differs at equal loss (no documented cause here)")
        return "wrong"
    o.notes.append(f"loss {job.out['loss']} != {base['loss']}")
    return "wrong"


def durable_everywhere(ctx, tmp: Path, par: str, step: int, job: Job, o: Outcome) -> bool:
    """Exit 0 means the last step verifies in FSx and S3 and the result says so; else notes say what did not."""
    ok = True
    claimed = job.out["checkpoints"].get("durable", {})
    for kind, why in verify(ctx, tmp, par, step).items():
        if why is not None:
            o.notes.append(f"step {step} in {kind} does not verify: {why[:120]}")
            ok = False
        if claimed.get(kind) != step:
            o.notes.append(f"result says durable {kind}={claimed.get(kind)}")
            ok = False
    return ok


def _follow_advice(ctx, tmp, trial, args, job: Job, o: Outcome, tag: str) -> Job:
    """Exit 4 says "rerun the same command to promote it": do so once, and judge what that rerun leaves."""
    if job.rc == 4:
        again = run_job(tmp, args, env_with(), tag)
        o.notes.append(f"exit 4, rerun as told: exit {again.rc}")
        return again
    return job


# ----------------------------------------------------------------------------------------------- families
def final_flush(ctx, t: Trial) -> Outcome:
    """The job is killed after its last step's memory commit began and before every shared tier had it; the
    rerun restores it and must promote it to FSx and S3 before it exits 0 (or exit 4 naming the tier)."""
    tmp, o, last = ctx.tmp(t), Outcome(""), LAST["base"]
    args = job_args(tmp, "base", t.parallelism, ctx.s3)
    if t.variant == "point":
        spec = f"{t.params['point']}@{last}" + ("" if t.params["rank"] is None else f"@{t.params['rank']}")
        first = run_job(tmp, args, env_with(OPENPOD_KILL_AT=spec), "run1")
        fired = first.rc != 0
    else:
        p, t0 = launch(tmp, args, env_with(), "run1")
        flush = ctx.flush_seconds("base", t.parallelism)
        if wait_for(lambda: memory_has(tmp, last), p):
            time.sleep(t.params["at"] * flush)
            o.data["kill_after_s"] = round(t.params["at"] * flush, 2)
        fired = p.poll() is None
        kill_group(p)
    if not fired:
        o.notes.append("the job ended before the kill")
    o.data["before_rerun"] = newest_complete(ctx, tmp, t.parallelism)
    if t.params["lose_memory"]:
        shutil.rmtree(tmp / "shm", ignore_errors=True)
    job = run_job(tmp, args, env_with(), "run2")
    if job.out:
        o.data.update(restored=f"{job.out['restored_step']}@{(job.out['restored_from'] or 'fresh').split(':')[0]}",
                      promoted_last_step=job.out["checkpoints"].get("promoted_last_step"))
    o.verdict = judge(job, ctx.base("base", t.parallelism), o, may_refuse=True)
    if o.verdict == "refused":  # the line says "rerun the same command": no fault lasts here, so that must promote
        again = run_job(tmp, args, env_with(), "run3")
        if judge(again, ctx.base("base", t.parallelism), o) == "exact" and durable_everywhere(
                ctx, tmp, t.parallelism, last, again, o):
            o.notes.append("the rerun as told promoted it")
        else:
            o.notes.append(f"the rerun as told: exit {again.rc}")
            o.verdict = "wrong"
    elif o.verdict == "exact" and not durable_everywhere(ctx, tmp, t.parallelism, last, job, o):
        o.verdict = "wrong"
    return o


def _damage_file(path: Path, how: str, rng: random.Random) -> None:
    """Damage a file without touching another tier's copy (a hard link would share the bytes): write anew."""
    data = bytearray(path.read_bytes())
    if how == "delete":
        path.unlink()
        return
    if how == "flip":
        i = rng.randrange(len(data))
        data[i] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    tmp = path.with_name(path.name + ".chaos")
    tmp.write_bytes(bytes(data))
    os.replace(tmp, path)


def _damage_s3(ctx, tmp: Path, step: int, rank: int, name: str, how: str, rng: random.Random) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=ctx.s3, aws_access_key_id="chaos", aws_secret_access_key="chaos",
                      region_name="us-east-1")
    prefix = f"{tmp.name}/step_{step:09d}/rank_{rank:05d}/"
    keys = [x["Key"] for x in s3.list_objects_v2(Bucket="chaos", Prefix=prefix).get("Contents", [])]
    key = next((k for k in keys if k.endswith("/" + name)), None) or sorted(keys)[-1]
    if how == "delete":
        s3.delete_object(Bucket="chaos", Key=key)
        return
    data = bytearray(s3.get_object(Bucket="chaos", Key=key)["Body"].read())
    if how == "flip":
        data[rng.randrange(len(data))] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    s3.put_object(Bucket="chaos", Key=key, Body=bytes(data))


def _damage_dir_tier(root: Path, step: int, rank: int, name: str, how: str, rng: random.Random) -> None:
    for d in [root] + [p for p in root.glob("*") if p.is_dir()]:  # shared roots, or node roots below
        snap = d / f"step_{step:09d}" / f"rank_{rank:05d}"
        if snap.is_dir():
            f = snap / name if (snap / name).exists() else sorted(snap.iterdir())[0]
            _damage_file(f, how, rng)


def _tensors_equal(a: Path, b: Path) -> bool:
    import torch
    from safetensors.torch import load_file

    x, y = load_file(str(a)), load_file(str(b))
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def reseal(ctx, t: Trial) -> Outcome:
    """A step sealed in FSx/S3 is copied there again; the result's ``durable`` must list only what verifies,
    a restore from that tier must get the step and export must accept it."""
    from training.checkpoint.export import ExportError, export

    tmp, o, last, p = ctx.tmp(t), Outcome(""), LAST["base"], t.params
    rng = random.Random(f"{ctx.seed}:{t.name}:damage")
    base = ctx.base("base", t.parallelism)
    args = job_args(tmp, "base", t.parallelism, ctx.s3)
    first = run_job(tmp, args, env_with(), "run1")
    if judge(first, base, o) != "exact":
        o.verdict = "crash" if first.rc != 0 else "wrong"
        return o
    rank = p["rank"] if t.parallelism == "fsdp" else 0
    if t.variant == "damaged":
        if p["tier"] == "fsx":
            _damage_dir_tier(tmp / "ck", last, rank, p["file"], p["how"], rng)
        else:
            _damage_s3(ctx, tmp, last, rank, p["file"], p["how"], rng)
    else:
        for kind in ("memory", "nvme"):
            root = tmp / ("shm" if kind == "memory" else "nvme")
            for r in range(2):  # every rank's node copy: no tier holds a sound step 20 but the ones damaged
                _damage_dir_tier(root, last, r, "__0_0.distcp", p["how"][kind], rng)
        _damage_dir_tier(tmp / "ck", last, rank, "__0_0.distcp", p["how"]["fsx"], rng)
        _damage_s3(ctx, tmp, last, rank, "__0_0.distcp", p["how"]["s3"], rng)
    o.data["damaged_verifies"] = verify(ctx, tmp, t.parallelism, last)
    job = _follow_advice(ctx, tmp, t, args, run_job(tmp, args, env_with(), "run2"), o, "run2b")
    if job.out:
        o.data["restored"] = f"{job.out['restored_step']}@{(job.out['restored_from'] or 'fresh').split(':')[0]}"
    o.verdict = judge(job, base, o)
    if o.verdict != "exact":
        return o
    if not durable_everywhere(ctx, tmp, t.parallelism, last, job, o):
        o.verdict = "wrong"
    for kind, src in (("fsx", str(tmp / "ck")), ("s3", f"s3://chaos/{tmp.name}")):
        out = tmp / f"export-{kind}.safetensors"
        try:
            export(src, out, step=last, endpoint_url=ctx.s3)
        except (ExportError, OSError) as e:
            o.notes.append(f"export from {kind} refused: {e}")
            o.verdict = "wrong"
            continue
        if not _tensors_equal(out, ctx.export(t.parallelism)):
            o.notes.append(f"export from {kind} differs from the uninterrupted run's")
            o.verdict = "wrong"
    src = p["tier"] if t.variant == "damaged" else p["restore_from"]
    shutil.rmtree(tmp / "shm", ignore_errors=True)
    shutil.rmtree(tmp / "nvme", ignore_errors=True)
    if src == "s3":  # FSx lost too: the restore must come from S3
        hidden = tmp / "fsx-hidden"
        hidden.mkdir()
        for d in (tmp / "ck").glob("step_*"):
            d.rename(hidden / d.name)
    again = run_job(tmp, args, env_with(), "run3")
    got = (again.out or {}).get("restored_from") or ""
    o.data["restore_check"] = {"from": got.split(":")[0], "step": (again.out or {}).get("restored_step"),
                               "rc": again.rc}
    if not (again.out and got.startswith(src) and again.out["restored_step"] == last
            and again.out["state_sha256"] == base["state_sha256"]):
        o.notes.append(f"restore with {src} alone: exit {again.rc}, from {got or '-'} step "
                       f"{(again.out or {}).get('restored_step')}")
        o.verdict = "wrong"
    elif again.rc == 4:  # the state came back exact; FSx, emptied by hand, is reported behind
        o.notes.append(f"restore from {src} alone exact; exit 4: {error_lines(again.err)[:1]}")
    return o


def throttled(ctx, t: Trial) -> Outcome:
    """S3 slowed; FSx must keep up (within the lag bound) and the end state be exact and durable in both."""
    tmp, o, last = ctx.tmp(t), Outcome(""), LAST["lag"]
    proxy = ThrottledProxy(ctx.moto_port, t.params["kb_per_s"] * 1000) if t.variant == "proxy" else None
    env = env_with() if proxy else env_with(OPENPOD_FAULT_SLOW_PUT=f"s3@{t.params['seconds']}")
    args = job_args(tmp, "lag", t.parallelism, proxy.url if proxy else ctx.s3)
    watch = LagWatch(tmp, world(t.parallelism), f"s3://chaos/{tmp.name}", ctx.s3)
    try:
        p, t0 = launch(tmp, args, env, "run1")
        watch.start()
        job = collect(tmp, p, t0, "run1")
        watch.stop()
    finally:
        if proxy:
            proxy.close()
    o.data["lag"] = watch.summary()
    o.data["seconds"] = round(job.seconds, 1)
    o.verdict = judge(job, ctx.base("lag", t.parallelism), o)
    if o.verdict == "exact" and not durable_everywhere(ctx, tmp, t.parallelism, last, job, o):
        o.verdict = "wrong"
    bound_steps = LAG_BOUND_SAVES * PROFILES["lag"][1] * PROFILES["lag"][2]
    if o.data["lag"]["fsx"]["max"] > bound_steps:
        o.notes.append(f"FSx {o.data['lag']['fsx']['max']} steps behind (bound {bound_steps})")
    return o


def clock_step(ctx, t: Trial) -> Outcome:
    """The wall clock steps mid-run in every process of the job: no watchdog kill, exact, the step recorded."""
    tmp, o = ctx.tmp(t), Outcome("")
    trigger = tmp / "clock-stepped"
    env = env_with(pythonpath=f"{ctx.hook}{os.pathsep}{ROOT}", CHAOS_CLOCK_STEP=f"{trigger}@{t.params['seconds']}")
    args = job_args(tmp, "long", t.parallelism, ctx.s3, ("--hang-floor", str(t.params["hang_floor"])))
    p, t0 = launch(tmp, args, env, "run1")
    if wait_for(lambda: memory_has(tmp, 5), p):
        time.sleep(t.params["after_s"])
    stepped = p.poll() is None
    trigger.touch()
    job = collect(tmp, p, t0, "run1")
    if not stepped:
        o.notes.append("the job ended before the step")
    o.verdict = judge(job, ctx.base("long", t.parallelism), o)
    if "watchdog:" in job.err:
        o.notes.append("watchdog: " + job.err.split("watchdog:", 1)[1].splitlines()[0][:120])
        o.verdict = "wrong" if o.verdict == "exact" else o.verdict
    try:
        seen = json.loads((tmp / "ck" / "run" / "goodput.json").read_text()).get("wall_clock_step_s")
    except (OSError, ValueError):
        seen = None
    o.data["ledger_wall_clock_step_s"] = seen
    if stepped and (seen is None or abs(seen - t.params["seconds"]) > 5):
        o.notes.append(f"the step is not in the ledger (wall_clock_step_s {seen})")
        o.verdict = "wrong" if o.verdict == "exact" else o.verdict
    if stepped and "the wall clock stepped" not in job.err:
        o.notes.append("no log line for the step")
    return o


RUNNERS = {"final flush": final_flush, "re-seal": reseal, "throttled S3": throttled, "clock step": clock_step}
