"""``python -m training run``: train the reference model with torchrun semantics, resuming on its own.

The command builds a :class:`~training.config.RunConfig`, writes the data set if needed, starts
``training.agent`` (torchrun, forking the ranks from an agent that has imported torch where it can; one agent per
node, several agents on several hosts form one elastic job through the c10d rendezvous) and, when the job ends,
prints one JSON object - ``step``, ``loss``, ``state_sha256`` and more - as the last line of its standard output.
Everything else goes to standard error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from training import nccl_env
from training.config import LAYOUTS, MODELS, CheckpointConfig, DataConfig, FaultToleranceConfig, RunConfig, TierConfig
from training.storage_utils import write_json_atomic

EXIT_USAGE = 2
EXIT_STOPPED = 143  # 128 + SIGTERM: stopped early on request, the job is not finished
EXIT_NOT_DURABLE = 4  # the steps ran, but the last checkpoint is not in every shared tier (--allow-tier-behind)
PARALLELISMS = ("ddp", "fsdp", "hsdp")
FAULT_TOLERANCE = ("restart", "replica")
RESTART = ("process", "in-process")


# The oldest torch the launcher has run on: the GPU machine's CUDA build (2.11.0+cu130; docs/training.md, "GPU
# suite"). CI tests the pin in pyproject.toml (torch==2.13.0).
MIN_TORCH = (2, 11)
# torchrun takes --shutdown-timeout from torch 2.13 (facts: torchrun.shutdown-timeout); an older torchrun rejects
# the flag with its usage text and gives the workers a fixed grace after SIGTERM (facts: torchrun.fixed-grace).
SHUTDOWN_TIMEOUT_TORCH = (2, 13)
FIXED_GRACE_S = 30


def installed_torch() -> str | None:
    """The installed torch's version, read without importing torch (None: not installed)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def torch_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string ("2.11.0+cu130" -> (2, 11)); None if it has none."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def torch_problem(version: str | None) -> str | None:
    """Why this torch cannot run the launcher, in one line (None: it can)."""
    need = ".".join(map(str, MIN_TORCH))
    if version is None:
        return f"torch is not installed; python -m training run needs torch >= {need}"
    release = torch_release(version)
    if release and release >= MIN_TORCH:
        return None
    return f"torch {version} is installed; python -m training run needs torch >= {need}"


def shutdown_args(version: str | None, stop_timeout: int) -> tuple[list[str], str | None]:
    """torchrun's arguments for --stop-timeout, and a warning line when this torch cannot honour it."""
    release = torch_release(version or "")
    if release is None or release >= SHUTDOWN_TIMEOUT_TORCH:
        return [f"--shutdown-timeout={stop_timeout}"], None
    if stop_timeout <= FIXED_GRACE_S:  # the fixed grace is at least what was asked (the workers stop sooner)
        return [], None
    return [], (f"torch {version}'s torchrun has no --shutdown-timeout: on SIGTERM the workers get its fixed "
                f"{FIXED_GRACE_S} s, not --stop-timeout {stop_timeout} (torch >= 2.13 honours it)")


def fail(lines: list[str] | str) -> None:
    for line in [lines] if isinstance(lines, str) else lines:
        click.echo(f"error: {line}", err=True)
    sys.exit(EXIT_USAGE)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """The openpod training runtime."""


@main.command(context_settings={"show_default": True})
@click.option("--model", type=click.Choice(sorted(MODELS)), default="tiny", help="reference model size")
@click.option("--steps", type=int, required=True, help="optimizer steps to reach")
@click.option("--checkpoint-every", type=int, default=5, help="steps between checkpoints (0: never)")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), required=True,
              help="durable checkpoint directory (the FSx tier); also holds the run state")
@click.option("--nproc-per-node", type=int, default=1, help="local workers")
@click.option("--seed", type=int, default=0)
@click.option("--global-batch", type=int, default=12, help="samples per step, whatever the world size")
@click.option("--micro-batch", type=int, default=2, help="samples per forward pass on a rank")
@click.option("--num-samples", type=int, default=1536, help="samples in the synthetic data set")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="[default: CHECKPOINT_DIR/data]")
@click.option("--data-cache-gib", type=float, default=None,
              help="copy the data set's shards into node memory (MEMORY_DIR/data-cache), up to this many GiB, so "
                   "a restarted worker maps them instead of reading DATA_DIR again (0: off) "
                   "[default: 1/8 of the container's memory limit, at most 16]")
@click.option("--memory-dir", type=click.Path(file_okay=False), default=None,
              help="node-memory tier [default: /dev/shm/openpod/<hash of CHECKPOINT_DIR>]")
@click.option("--nvme-dir", type=click.Path(file_okay=False), default=None, help="local NVMe tier (optional)")
@click.option("--s3-uri", default=None, help="s3://bucket/prefix tier (optional)")
@click.option("--s3-endpoint-url", default=None, help="S3 endpoint override")
@click.option("--fsx-every", type=int, default=1, help="promote every n-th checkpoint to CHECKPOINT_DIR")
@click.option("--s3-every", type=int, default=4, help="promote every n-th checkpoint to S3")
@click.option("--keep", type=int, default=2, help="checkpoints kept per tier")
@click.option("--peer-replication/--no-peer-replication", default=True,
              help="hold each snapshot in a buddy node's memory too")
@click.option("--overlap-staging/--no-overlap-staging", default=True,
              help="copy the state to host memory while the next step's forward/backward runs "
                   "(its optimizer step waits for the copy); off: save() blocks for the whole copy")
@click.option("--checkpoint-layout", type=click.Choice(LAYOUTS), default="raw",
              help="tensor bytes on disk: raw (each tensor written as it lies in memory, one write; read by "
                   "openpod's restore and export); torch-save (DCP's own layout, a torch.save per tensor: slower, "
                   "but stock dcp.load(FileSystemReader) reads it)")
@click.option("--nnodes", default="1", help="nodes, or MIN:MAX for an elastic job")
@click.option("--rdzv-endpoint", default=None, help="host:port of the c10d rendezvous [default: local free port]")
@click.option("--rdzv-id", default=None, help="job id shared by all agents [default: from CHECKPOINT_DIR]")
@click.option("--node-id", default=None, help="this node's name for node-local tiers [default: hostname]")
@click.option("--rdzv-last-call", type=int, default=3,
              help="seconds an elastic rendezvous waits for more nodes once MIN are there")
@click.option("--max-restarts", type=int, default=0, help="worker group restarts torchrun may do")
@click.option("--threads", type=int, default=1, help="torch threads per worker")
@click.option("--metrics-port", type=int, default=None, help="serve Prometheus metrics from each node's local rank 0")
@click.option("--log-every", type=int, default=10, show_default=True,
              help="rank 0 logs a progress line on stderr every this many steps (step, loss, step time, "
                   "checkpoint state); 0: never. stdout keeps the result JSON alone")
@click.option("--bind-host", default="127.0.0.1", help="address for the peer side-channel and the agent")
@click.option("--parallelism", type=click.Choice(PARALLELISMS), default="ddp",
              help="ddp: replicated state; fsdp: FSDP2 shards over all ranks; hsdp: FSDP2 shards within a "
                   "group of --shard-size ranks, replicated across groups")
@click.option("--allow-identity-change", is_flag=True, default=False,
              help="resume a --checkpoint-dir whose recorded run had another model, seed, global batch or data set "
                   "(refused otherwise: it would mix two runs; training/run_guard.py)")
@click.option("--allow-fresh-start", is_flag=True, default=False,
              help="start from step 0 even if a checkpoint source cannot be read (default: refuse to start)")
@click.option("--allow-tier-behind", is_flag=True, default=False,
              help="exit 0 when the steps are done even if the last checkpoint could not be made durable in every "
                   "shared tier (FSx, S3) [default: say which tier and exit 4; a rerun promotes it]")
@click.option("--shard-size", type=int, default=0, help="hsdp: ranks per shard group [default: --nproc-per-node]")
@click.option("--tp", type=int, default=1,
              help="tensor-parallel degree (with --parallelism fsdp): groups of --tp consecutive local ranks split "
                   "each layer, FSDP2 shards across the groups")
@click.option("--hang-floor", type=float, default=300.0, show_default=True,
              help="seconds with no rank advancing before the watchdog declares a hang (at least)")
@click.option("--hang-multiple", type=float, default=10.0, show_default=True,
              help="... or this multiple of the median recent step time, whichever is longer")
@click.option("--stop-timeout", type=int, default=50, show_default=True,
              help="on SIGTERM, seconds the workers get to finish the step and checkpoint it durably before "
                   "they are killed (keep it below the pod's terminationGracePeriodSeconds)")
@click.option("--fault-tolerance", type=click.Choice(FAULT_TOLERANCE), default="restart",
              help="restart: a failed worker restarts every worker from the newest checkpoint; replica: this "
                   "launcher runs one of --replicas replica groups coordinated by a torchft Lighthouse, and a "
                   "failed group restarts alone and heals from a live peer (docs/training.md)")
@click.option("--restart", type=click.Choice(RESTART), default="process",
              help="process: a failed worker ends every local worker and torchrun starts them again; in-process: "
                   "the launcher replaces the failed rank alone and the other ranks re-form the process group in "
                   "their own processes, then all restore the newest snapshot (one node; docs/training.md)")
@click.option("--spare-workers", type=int, default=1,
              help="in-process: warm standby workers on this node (started, torch imported, waiting) that take a "
                   "failed rank's place at once; 0: a replacement starts from scratch")
@click.option("--node-rank", type=int, default=0,
              help="in-process with --nnodes N: this node's index, 0 .. N-1; node 0's launcher hosts the job's "
                   "store at --rdzv-endpoint")
@click.option("--node-timeout", type=float, default=30.0, show_default=True,
              help="in-process with --nnodes N: seconds a node's launcher may stay silent in the job's store before "
                   "its node is declared lost (its ranks failed; the others wait for a replacement)")
@click.option("--node-wait", type=float, default=600.0, show_default=True,
              help="in-process with --nnodes N: seconds to wait for a launcher with a lost node's --node-rank to "
                   "join (a replacement pod) before the job stops with an error")
@click.option("--replica-id", type=int, default=0, help="replica: this group's index, 0 .. --replicas - 1")
@click.option("--replicas", type=int, default=1, help="replica: replica groups in the job")
@click.option("--min-replicas", type=int, default=0,
              help="replica: groups a step needs to commit [0: all - survivors wait for a lost group]; give "
                   "the Lighthouse the same --min_replicas")
@click.option("--lighthouse", envvar="TORCHFT_LIGHTHOUSE", default=None,
              help="replica: the torchft Lighthouse, http://host:port [env TORCHFT_LIGHTHOUSE]")
@click.option("--lighthouse-wait", type=float, default=600.0, show_default=True,
              help="replica: seconds to wait for the Lighthouse to accept connections before starting the workers "
                   "(on Kubernetes its pod may start after this one)")
def run(model, steps, checkpoint_every, checkpoint_dir, nproc_per_node, seed, global_batch, micro_batch,
        num_samples, data_dir, memory_dir, nvme_dir, s3_uri, s3_endpoint_url, fsx_every, s3_every, keep,
        peer_replication, overlap_staging, nnodes, rdzv_endpoint, rdzv_id, node_id, rdzv_last_call, max_restarts, threads, metrics_port,
        bind_host, parallelism, allow_fresh_start, shard_size, hang_floor, hang_multiple, stop_timeout,
        fault_tolerance, replica_id, replicas, min_replicas, lighthouse, data_cache_gib=None, lighthouse_wait=600.0,
        restart="process", spare_workers=1, tp=1, node_rank=0, node_timeout=30.0, node_wait=600.0,
        log_every=10, allow_identity_change=False, allow_tier_behind=False, checkpoint_layout="raw") -> None:
    """Train the reference model; resume from the newest complete checkpoint if there is one."""
    torch_version = installed_torch()
    unsupported = torch_problem(torch_version)
    if unsupported:
        fail(unsupported)
    from training.worker_start import ENV, start_method

    try:  # the value only: whether this torch may fork is said where torch is imported (the agent, the launcher)
        start_method(os.environ.get(ENV, "auto"), cuda_build=False)
    except ValueError as e:
        fail(f"{e} (how each rank's worker starts, docs/training.md)")
    problems = usage_problems(click.get_current_context().params) + input_problems(click.get_current_context().params)
    if problems:
        fail(problems)
    if peer_replication and checkpoint_every > 0 and (peer := peer_secret_problems(bind_host)):
        fail(peer)  # here, not in usage_problems: `openpod submit` checks the arguments without the secret
    if fault_tolerance == "replica" and (heal := peer_secret_problems(bind_host, purpose="replica")):
        fail(heal)

    ckpt_dir = Path(checkpoint_dir).resolve()
    shared_dir = ckpt_dir  # the data set is shared by replica groups; checkpoints and run state are not
    ft = FaultToleranceConfig()
    if fault_tolerance == "replica":
        # Each replica group holds a full copy of the state and checkpoints it on its own: its own tiers,
        # run state and rendezvous, all under replica-<id>/ (a whole-job restart then resumes each group
        # from its own newest checkpoint; the first quorum brings every group to the newest of them).
        ft = FaultToleranceConfig(mode="replica", replica_id=replica_id, replicas=replicas,
                                  min_replicas=min_replicas, lighthouse=lighthouse, host=bind_host)
        ckpt_dir = ckpt_dir / f"replica-{replica_id}"
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        memory_dir = str(Path(memory_dir) / f"replica-{replica_id}") if memory_dir else None
        nvme_dir = str(Path(nvme_dir) / f"replica-{replica_id}") if nvme_dir else None
        s3_uri = f"{s3_uri.rstrip('/')}/replica-{replica_id}" if s3_uri else None
    job = hashlib.sha256(str(ckpt_dir).encode()).hexdigest()[:12]
    try:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        probe = ckpt_dir / f".probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        fail(f"--checkpoint-dir: {ckpt_dir} is not a writable directory ({e.strerror})")
    from training import run_guard

    try:  # held until this launcher exits: a second launch on this directory (same node name) is refused
        dir_lock = run_guard.lock(ckpt_dir, node_id)  # noqa: F841 - the lock lasts while the file is open
    except run_guard.RunGuardError as e:
        fail(str(e))
    m = MODELS[model]
    run_dir = ckpt_dir / "run"
    memory = Path(memory_dir).resolve() if memory_dir else Path("/dev/shm/openpod") / job
    if data_cache_gib is None:
        data_cache_gib = default_data_cache_gib()
    data = DataConfig(data_dir=str(Path(data_dir).resolve() if data_dir else shared_dir / "data"),
                      num_samples=num_samples, global_batch=global_batch, micro_batch=micro_batch,
                      cache_dir=str(memory / "data-cache") if data_cache_gib > 0 else None,
                      cache_max_gib=data_cache_gib)
    tiers = [TierConfig("memory", str(memory), keep=keep)]
    if nvme_dir:
        tiers.append(TierConfig("nvme", str(Path(nvme_dir).resolve()), keep=keep))
    tiers.append(TierConfig("fsx", str(ckpt_dir), keep=keep, every=fsx_every))
    if s3_uri:
        tiers.append(TierConfig("s3", s3_uri, keep=keep, every=s3_every, endpoint_url=s3_endpoint_url))
    cfg = RunConfig(model=model, steps=steps, seed=seed, run_dir=str(run_dir), data=data, threads=threads,
                    metrics_port=metrics_port, log_every=log_every, parallelism=parallelism, shard_size=shard_size, tp=tp,
                    fault_tolerance=ft,
                    restart=restart, restart_max=max_restarts if restart == "in-process" else 0,
                    checkpoint=CheckpointConfig(enabled=checkpoint_every > 0, every=checkpoint_every, tiers=tiers,
                                                peer_replication=peer_replication, peer_host=bind_host,
                                                overlap_staging=overlap_staging,
                                                layout=checkpoint_layout,
                                                allow_fresh_start=allow_fresh_start))
    from training.data import ensure_dataset  # imports torch: only once the arguments are valid

    try:
        ensure_dataset(data.data_dir, seed=seed, num_samples=num_samples, samples_per_shard=data.samples_per_shard,
                       seq_len=m.seq_len, vocab_size=m.vocab_size)
    except (ValueError, OSError) as e:
        fail(f"--data-dir: {e}")
    except (KeyError, TypeError) as e:  # an index.json of another shape
        fail(f"--data-dir: {data.data_dir}/index.json is not a data set index ({type(e).__name__}: {e})")
    bad_shards = shard_problems(Path(data.data_dir))
    if bad_shards:
        fail(bad_shards)
    try:
        changed = run_guard.check_identity(ckpt_dir, run_guard.identity(
            model=model, seed=seed, global_batch=global_batch, num_samples=num_samples, data_dir=Path(data.data_dir),
            parallelism=parallelism, tp=tp, shard_size=shard_size), allow_change=allow_identity_change)
    except run_guard.RunGuardError as e:
        fail(str(e))
    except OSError as e:
        fail(f"--checkpoint-dir: cannot record the run's identity in {ckpt_dir}: {e.strerror or e}")
    if changed:
        click.echo(f"warning: {changed}", err=True)
    config_path = run_dir / f"config-{node_id or socket.gethostname()}.json"
    try:  # a full or read-only --checkpoint-dir: one clear line, not a traceback
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(config_path, json.loads(cfg.to_json()))
    except OSError as e:
        fail(f"--checkpoint-dir: cannot write {config_path}: {e.strerror or e} (a full or read-only file system?)")

    if fault_tolerance == "replica":
        try:
            waited = wait_for_lighthouse(lighthouse, lighthouse_wait)
        except TimeoutError as e:
            click.echo(f"error: --lighthouse: {e}", err=True)
            sys.exit(1)
        if waited >= 1:
            click.echo(f"the Lighthouse {lighthouse} accepted connections after {waited:.0f}s", err=True)
    results = Path(tempfile.mkdtemp(prefix="openpod-results-"))
    # One node without --rdzv-endpoint: port 0, so torchrun's rendezvous store binds a port the kernel picks, as
    # torchrun --standalone does (facts: torchrun.standalone-endpoint). A port picked here and bound by
    # torchrun seconds later could be taken in between (seen: a rendezvous client timing out on such a port).
    grace, grace_warning = shutdown_args(torch_version, stop_timeout)
    if grace_warning:
        click.echo(f"warning: {grace_warning}", err=True)
    cmd = [sys.executable, "-m", "training.agent",  # torchrun, forking the workers where it can (training/agent.py)
           f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}",
           "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint or f'{bind_host}:0'}",
           f"--rdzv-id={rdzv_id or job}", f"--max-restarts={max_restarts}", "--monitor-interval=0.2",
           *grace,
           f"--local-addr={bind_host}", f"--rdzv-conf=last_call_timeout={rdzv_last_call}",
           "-m", "training.worker", "--config", str(config_path), "--result-dir", str(results)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    # torch 2.13's shared rendezvous TCPStore caches the first round's store address,
    # so after a membership change agents can end up on different stores and hang;
    # the per-round store avoids that (see docs/training.md, "Elastic").
    env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    if node_id:
        env["OPENPOD_NODE_ID"] = node_id
    from training.ft.watchdog import clear_state

    ft_dir = run_dir / "ft" / (node_id or socket.gethostname())  # pid files, stack dumps: kept after the pod
    # Heartbeats are written by every rank at every step: node-local (the memory tier's file system), never
    # two metadata operations per rank and step on FSx. Only this node's launcher reads them.
    beats_dir = memory / ".beats" / (node_id or socket.gethostname())
    try:
        beats_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"--memory-dir: cannot create {beats_dir}: {e.strerror or e}")
    clear_state(ft_dir, beats_dir)
    env["OPENPOD_FT_DIR"] = str(ft_dir)
    env["OPENPOD_BEATS_DIR"] = str(beats_dir)
    env = nccl_env.worker_env(env, restart)  # in-process: NCCL's watchdog must not take survivors down
    try:
        if restart == "in-process":
            from training.ft.inprocess import supervise_ranks
            from training.ft.watchdog import Watchdog

            worker = cmd[cmd.index("training.worker") - 1:]  # "-m training.worker ...": no torchrun
            rc, signalled = supervise_ranks([sys.executable, *worker], env, nproc=nproc_per_node, host=bind_host,
                                            max_restarts=max_restarts, stop_timeout=stop_timeout,
                                            echo=lambda m: click.echo(m, err=True), ft_dir=ft_dir,
                                            watchdog=Watchdog(ft_dir, floor_s=hang_floor, multiple=hang_multiple,
                                                              beats_dir=beats_dir),
                                            spares=spare_workers, nnodes=int(nnodes), node_rank=node_rank,
                                            endpoint=rdzv_endpoint, node_timeout=node_timeout,
                                            node_wait=node_wait)
        else:
            rc, signalled = _supervise(cmd, env, ft_dir, hang_floor, hang_multiple, beats_dir, max_restarts)
        files = sorted(results.glob("result-*.json"))
        refused = results / "refused.txt"
        if rc != 0 and refused.exists():
            click.echo(f"error: {refused.read_text()}", err=True)
            sys.exit(3)
        result = json.loads(files[0].read_text()) if files else None
        if result and result.get("preempted"):
            stop = result["preempted"]
            where = f"checkpoint durable in {stop['durable']}" if stop["durable"] else \
                "WARNING: that step could not be made durable; a rerun resumes from the newest durable checkpoint"
            click.echo(f"stopped by SIGTERM at step {stop['step']} ({where}); rerun the same command to resume",
                       err=True)
            click.echo(json.dumps(result, sort_keys=True))
            sys.exit(EXIT_STOPPED)
        if signalled and not files:
            click.echo(f"stopped by SIGTERM before the workers could checkpoint (torchrun exit status {rc}); "
                       "rerun the same command to resume from the newest checkpoint", err=True)
            sys.exit(EXIT_STOPPED)
        if rc != 0 or not files:
            click.echo(f"error: training failed (torchrun exit status {rc}); rerun the same command to resume",
                       err=True)
            sys.exit(rc if rc > 0 else 1)
        _warn_checkpoint_failures(result)
        click.echo(json.dumps(result, sort_keys=True))
        behind = _not_durable(result)
        if behind:
            click.echo(f"{'warning' if allow_tier_behind else 'error'}: {behind}", err=True)
            sys.exit(0 if allow_tier_behind else EXIT_NOT_DURABLE)
    finally:
        shutil.rmtree(results, ignore_errors=True)


def _die_with(launcher: int):
    """For ``Popen(preexec_fn=...)``: the child gets SIGKILL when ``launcher`` dies (PR_SET_PDEATHSIG), and dies at
    once if it already has. (Not ``getppid() == 1``: in a container the launcher itself may be PID 1.)"""
    import ctypes
    import signal

    def arm() -> None:
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:  # not Linux
            return
        if os.getppid() != launcher:
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


def _not_durable(result: dict) -> str | None:
    """One line when the job's last checkpoint is not durable in every shared tier (the result's
    ``checkpoints.tiers_behind``: each such tier's newest verified step), else None."""
    ck = result.get("checkpoints") or {}
    behind = ck.get("tiers_behind") or {}
    if not behind:
        return None
    where = ", ".join(f"{k} (newest verified step: {s if s is not None else 'none'})" for k, s in sorted(behind.items()))
    return (f"the steps are done but the last checkpoint, step {ck.get('last_step')}, is not durable in {where}; "
            "rerun the same command to promote it (or pass --allow-tier-behind)")


def _warn_checkpoint_failures(result: dict) -> None:
    """One line on stderr when any rank's checkpoint writes failed (the result sums every rank's), and each shared
    tier's newest step that every rank's part reached."""
    ck = result.get("checkpoints") or {}
    if not ck.get("failed_ranks"):
        return
    lost = ", ".join(f"{k} x{n}" for k, n in sorted(ck.get("promote_failed", {}).items()))
    durable = ", ".join(f"{k}: step {s}" if s is not None else f"{k}: none" for k, s in
                        sorted(ck.get("durable", {}).items()))
    click.echo(f"warning: checkpoint copies failed on rank(s) {', '.join(map(str, ck['failed_ranks']))} "
               f"(saves failed: {ck.get('failed', 0)}{'; copies: ' + lost if lost else ''}); newest complete step "
               f"per shared tier: {durable or 'no shared tier'}; last error: {ck.get('last_error')}", err=True)


def _supervise(cmd: list[str], env: dict, ft_dir: Path, floor_s: float, multiple: float,
               beats_dir: Path | None = None, max_restarts: int = 0) -> tuple[int, bool]:
    """Run torchrun; while it runs, the hang watchdog reads this node's rank heartbeats.

    SIGTERM (the kubelet signals only the container's first process, this one) is passed
    on to torchrun, which passes it to the workers and waits ``--shutdown-timeout`` for them:
    they stop after the current step, once it is checkpointed. Returns (exit status, signalled).

    A hang (no local rank advanced for max(floor, multiple x median step time)) dumps every
    local worker's Python stack into ``ft_dir`` and kills the workers: torchrun then restarts
    the worker group (``--max-restarts``), which restores from the newest checkpoint.
    """
    from training.ft.watchdog import Watchdog, clear_state

    import signal

    watchdog = Watchdog(ft_dir, floor_s=floor_s, multiple=multiple, beats_dir=beats_dir)
    # torchrun dies with this launcher (the kernel's parent-death signal; its workers die with it the same way),
    # so a killed launcher never leaves workers training unsupervised into the checkpoint tiers.
    proc = subprocess.Popen(cmd, env=env, stdout=sys.stderr, preexec_fn=_die_with(os.getpid()))
    signalled = []

    def forward(signum, frame):
        signalled.append(signum)
        click.echo("launcher: SIGTERM, asking the workers to checkpoint and stop", err=True)
        proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    try:
        while proc.poll() is None:
            try:
                proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                pass
            pids = watchdog.pids()
            quiet = watchdog.quiet()  # before check(), which waits for the stack dumps
            if pids and watchdog.check(pids):
                click.echo(f"watchdog: no rank advanced for {quiet:.1f}s (bound {watchdog.bound():.1f}s); "
                           f"stacks in {ft_dir}; " + (f"restarting the workers (--max-restarts {max_restarts})"
                                                      if max_restarts > 0 else "stopping the job: --max-restarts 0 "
                                                      "allows no restart (rerun to resume)"), err=True)
                clear_state(ft_dir, beats_dir)
    finally:  # the launcher leaves by an exception (Ctrl-C): its torchrun does not outlive it
        if proc.poll() is None:
            proc.kill()
    return proc.wait(), bool(signalled)


def wait_for_lighthouse(url: str, timeout: float, *, poll: float = 0.5) -> float:
    """Seconds until the torchft Lighthouse at ``url`` accepted a TCP connection (its name may not resolve
    yet: a JobSet pod's DNS record appears with its IP); TimeoutError after ``timeout``."""
    from urllib.parse import urlsplit

    import time

    u = urlsplit(url)
    t0 = time.monotonic()
    while True:
        try:
            socket.create_connection((u.hostname, u.port), timeout=min(5.0, max(timeout, 0.1))).close()
            return time.monotonic() - t0
        except OSError as e:
            if time.monotonic() - t0 >= timeout:
                raise TimeoutError(f"{url} did not accept connections within {timeout:g}s ({e})") from None
            time.sleep(poll)


def default_data_cache_gib() -> float:
    """1/8 of the memory this container may use (cgroup v2 ``memory.max``, else the machine's), at most 16 GiB:
    the cache's pages are charged to the pod that writes them."""
    limit = None
    try:
        raw = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        limit = int(raw) if raw != "max" else None
    except (OSError, ValueError):
        pass
    if limit is None:
        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(16.0, round(limit / 8 / (1 << 30), 3))


def _tp_problems(p: dict) -> list[str]:
    tp = p.get("tp", 1)
    if tp == 1:
        return []
    if tp < 1:
        return [f"--tp: must be >= 1, got {tp}"]
    out = []
    if p.get("parallelism") != "fsdp":
        out.append(f"--tp: needs --parallelism fsdp (FSDP2 across the TP groups), got {p.get('parallelism')}")
    if p.get("nproc_per_node", 1) % tp:
        out.append(f"--tp: {tp} must divide --nproc-per-node {p.get('nproc_per_node', 1)} (TP stays within a node)")
    m = MODELS[p.get("model", "tiny")]
    if m.n_heads % tp or m.vocab_size % tp:
        out.append(f"--tp: {tp} must divide the model's {m.n_heads} heads and {m.vocab_size} vocabulary entries")
    if p.get("fault_tolerance", "restart") == "replica":
        out.append("--tp: not supported with --fault-tolerance replica")
    return out


def input_problems(params: dict) -> list[str]:
    """Paths and ports ``run`` would otherwise trip over after starting the workers (issue 29), one line each."""
    problems = []
    if not str(params.get("checkpoint_dir") or "").strip():
        problems.append("--checkpoint-dir: empty; give the durable checkpoint directory (an empty path would write "
                        "into the current directory)")
    for name in ("data_dir", "memory_dir", "nvme_dir"):
        if params.get(name) is not None and not str(params[name]).strip():
            problems.append(f"--{name.replace('_', '-')}: empty; give a directory or leave the option out")
    port = params.get("metrics_port")
    if port is not None:
        if not 1 <= port <= 65535:
            problems.append(f"--metrics-port: must be 1..65535, got {port}")
        else:
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", port))   # where the workers' metrics server binds (training/goodput.py)
                except OSError as e:
                    problems.append(f"--metrics-port: {port} cannot be bound on this host ({e.strerror}); "
                                    "choose a free port")
    return problems


def shard_problems(data_dir: Path) -> list[str]:
    """Shard files whose size is not the one their index gives (truncated or overwritten): one line each."""
    try:
        index = json.loads((data_dir / "index.json").read_text())
        size = index["sample_tokens"] * 2   # uint16 tokens (training/data.py writes them)
        want = {sh["name"]: sh["samples"] * size for sh in index["shards"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"--data-dir: {data_dir}/index.json is not a data set index ({type(e).__name__}: {e})"]
    out = []
    for name, nbytes in want.items():
        try:
            have = (data_dir / name).stat().st_size
        except FileNotFoundError:
            continue   # a node-memory copy may stand in for it (training/data.py ShardCache); the worker says if not
        except OSError as e:
            out.append(f"--data-dir: {data_dir / name}: {e.strerror}")
            continue
        if have != nbytes:
            out.append(f"--data-dir: {data_dir / name} is {have} bytes, its index says {nbytes}: the data set is "
                       "corrupt (remove the directory to rebuild a synthetic one)")
    return out


def peer_secret_problems(bind_host: str, environ=os.environ, purpose: str = "peer") -> list[str]:
    """The peer side-channel (``purpose`` "peer") or replica healing's transport ("replica") serves state on
    ``bind_host``: off loopback only with the job's secret."""
    from training.checkpoint import peer_auth
    from training.checkpoint.peer import is_loopback

    try:
        secret = peer_auth.secret_from_env(environ)
    except ValueError as e:
        return [str(e)]
    if secret is None and not is_loopback(bind_host) and purpose == "replica":
        return [f"--bind-host {bind_host}: --fault-tolerance replica heals over a channel signed with "
                f"{peer_auth.ENV} (the job's Secret, which `openpod submit` renders); it is not set"]
    if secret is None and not is_loopback(bind_host):
        return [f"--bind-host {bind_host}: the peer side-channel needs {peer_auth.ENV} (the job's Secret, which "
                f"`openpod submit` renders) to serve checkpoints beyond this machine; or use --no-peer-replication"]
    return []


def usage_problems(params: dict) -> list[str]:
    """Bad values and combinations among ``run``'s parsed ``params`` (click checked the types), one line each."""
    p = params
    steps, checkpoint_every, nproc_per_node = p["steps"], p["checkpoint_every"], p["nproc_per_node"]
    global_batch, micro_batch, num_samples = p["global_batch"], p["micro_batch"], p["num_samples"]
    fsx_every, s3_every, keep, max_restarts = p["fsx_every"], p["s3_every"], p["keep"], p["max_restarts"]
    threads, nnodes, s3_uri, rdzv_endpoint = p["threads"], p["nnodes"], p["s3_uri"], p["rdzv_endpoint"]
    problems = []
    for name, value, low in (("--steps", steps, 1), ("--checkpoint-every", checkpoint_every, 0),
                             ("--nproc-per-node", nproc_per_node, 1), ("--global-batch", global_batch, 1),
                             ("--micro-batch", micro_batch, 1), ("--num-samples", num_samples, 1),
                             ("--fsx-every", fsx_every, 1), ("--s3-every", s3_every, 1), ("--keep", keep, 1),
                             ("--max-restarts", max_restarts, 0), ("--threads", threads, 1),
                             ("--log-every", p.get("log_every", 10), 0)):
        if value < low:
            problems.append(f"{name}: must be >= {low}, got {value}")
    max_nodes = _max_nodes(nnodes, problems)
    if max_nodes and nproc_per_node * max_nodes > global_batch:
        problems.append(f"--global-batch: {global_batch} is smaller than the largest world size "
                        f"({nproc_per_node} x {max_nodes}); every rank needs at least one sample")
    if s3_uri is not None and not s3_uri.startswith("s3://"):
        problems.append(f"--s3-uri: must look like s3://bucket/prefix, got {s3_uri!r}")
    if rdzv_endpoint is not None and not _is_host_port(rdzv_endpoint):
        problems.append(f"--rdzv-endpoint: must be host:port, got {rdzv_endpoint!r}")
    if (p.get("data_cache_gib") or 0.0) < 0:
        problems.append(f"--data-cache-gib: must be >= 0 (0: off), got {p['data_cache_gib']}")
    if p.get("hang_floor", 1.0) <= 0:
        problems.append(f"--hang-floor: must be > 0 seconds, got {p['hang_floor']}")
    if p.get("stop_timeout", 0) < 0:
        problems.append(f"--stop-timeout: must be >= 0 seconds, got {p['stop_timeout']}")
    if p.get("hang_multiple", 1.0) < 1:
        problems.append(f"--hang-multiple: must be >= 1, got {p['hang_multiple']}")
    shard_size = p.get("shard_size", 0)
    if shard_size < 0:
        problems.append(f"--shard-size: must be >= 0, got {shard_size}")
    elif shard_size and p.get("parallelism") != "hsdp":
        problems.append("--shard-size: only applies with --parallelism hsdp")
    elif shard_size and max_nodes and max_nodes == int(nnodes.split(":")[0]) \
            and (nproc_per_node * max_nodes) % shard_size:
        problems.append(f"--shard-size: {shard_size} does not divide the world size {nproc_per_node * max_nodes}")
    if max_nodes and max_nodes > 1 and rdzv_endpoint is None:
        problems.append("--rdzv-endpoint: required when --nnodes allows more than one node")
    problems += _tp_problems(p)
    problems += _replica_problems(p, max_nodes)
    if p.get("restart", "process") != "in-process" and p.get("spare_workers", 1) != 1:
        problems.append("--spare-workers: only applies with --restart in-process")
    if p.get("restart", "process") != "in-process" and p.get("node_rank", 0) != 0:
        problems.append("--node-rank: only applies with --restart in-process (torchrun's rendezvous numbers nodes)")
    if p.get("restart", "process") == "in-process":
        if ":" in nnodes:
            problems.append(f"--restart: in-process needs a fixed node count (--nnodes N), got --nnodes {nnodes}")
        elif max_nodes and not 0 <= p.get("node_rank", 0) < max_nodes:
            problems.append(f"--node-rank: must be 0 .. {max_nodes - 1}, got {p.get('node_rank')}")
        if p.get("fault_tolerance", "restart") != "restart":
            problems.append("--restart: in-process applies to --fault-tolerance restart (replica mode keeps the "
                            "survivors' processes already)")
        for opt in ("node_timeout", "node_wait"):
            if p.get(opt, 1.0) <= 0:
                problems.append(f"--{opt.replace('_', '-')}: must be > 0 seconds, got {p[opt]}")
        from training.ft.inprocess import GENERATION_WAIT_S

        if p.get("node_timeout", 1.0) >= GENERATION_WAIT_S:  # a survivor would give up before the node is lost
            problems.append(f"--node-timeout: must be below {GENERATION_WAIT_S:.0f} s (how long a survivor waits "
                            f"for a new generation after its collective failed), got {p['node_timeout']}")
        elif (max_nodes or 1) > 1 and "hang_floor" in p and p.get("node_timeout", 1.0) >= p["hang_floor"]:
            # The hang bound is never below the floor (training/ft/watchdog.py hang_bound). A watchdog that fires
            # before the lost node is declared finds every rank at the same step and replaces its own waiting ranks.
            problems.append(f"--node-timeout: must be below --hang-floor ({p['hang_floor']:g} s): a lost "
                            f"node must be declared before the hang watchdog fires, got {p['node_timeout']}")
        if p.get("spare_workers", 1) < 0:
            problems.append(f"--spare-workers: must be >= 0, got {p['spare_workers']}")
        if max_restarts < 1:
            problems.append("--max-restarts: --restart in-process needs >= 1 (the replacements of failed ranks "
                            "the job may start)")
    return problems


def _replica_problems(p: dict, max_nodes: int | None) -> list[str]:
    """--fault-tolerance replica and its options."""
    mode = p.get("fault_tolerance", "restart")
    replicas, replica_id, min_replicas = p.get("replicas", 1), p.get("replica_id", 0), p.get("min_replicas", 0)
    if mode != "replica":
        given = [o for o, v, default in (("--replica-id", replica_id, 0), ("--replicas", replicas, 1),
                                          ("--min-replicas", min_replicas, 0)) if v != default]
        return [f"{o}: only applies with --fault-tolerance replica" for o in given]
    problems = []
    if replicas < 1:
        problems.append(f"--replicas: must be >= 1, got {replicas}")
    elif not 0 <= replica_id < replicas:
        problems.append(f"--replica-id: must be in 0 .. {replicas - 1} (--replicas {replicas}), got {replica_id}")
    if not 0 <= min_replicas <= max(replicas, 1):
        problems.append(f"--min-replicas: must be in 0 .. {replicas} (0: all), got {min_replicas}")
    lighthouse = p.get("lighthouse")
    if not lighthouse:
        problems.append("--lighthouse: required with --fault-tolerance replica (http://host:port of the torchft "
                        "Lighthouse, or env TORCHFT_LIGHTHOUSE)")
    elif not (lighthouse.startswith(("http://", "https://")) and _is_host_port(lighthouse.split("://", 1)[1])):
        problems.append(f"--lighthouse: must look like http://host:port, got {lighthouse!r}")
    if p.get("parallelism", "ddp") not in ("ddp", "fsdp"):
        problems.append(f"--parallelism: --fault-tolerance replica supports ddp or fsdp (FSDP2 inside each group, "
                        f"the groups replicate it: HSDP), got {p['parallelism']}")
    if p.get("max_restarts", 0) < 1:
        problems.append("--max-restarts: --fault-tolerance replica needs >= 1 (a failed group restarts its own "
                        "workers, which heal from a live peer)")
    if max_nodes and max_nodes * p.get("nproc_per_node", 1) * max(replicas, 1) > p.get("global_batch", 1):
        problems.append(f"--global-batch: {p['global_batch']} is smaller than the ranks of all replica groups "
                        f"({replicas} x {max_nodes * p['nproc_per_node']}); every rank needs at least one sample")
    return problems


def check_run_args(argv: list[str]) -> list[str]:
    """Problems with ``python -m training run ARGV``, found without running anything (empty: it would start).

    Parses with the ``run`` command itself (unknown options, types, required
    options) and applies :func:`usage_problems`; used by ``openpod submit``.
    """
    if {"-h", "--help"} & set(argv):
        return ["--help given: nothing would run"]
    try:
        ctx = run.make_context("run", list(argv))
    except click.ClickException as e:
        return [e.format_message()]
    return usage_problems(ctx.params)


def _max_nodes(nnodes: str, problems: list[str]) -> int | None:
    try:
        parts = [int(x) for x in nnodes.split(":")]
    except ValueError:
        parts = []
    if not (1 <= len(parts) <= 2) or min(parts) < 1 or parts[0] > parts[-1]:
        problems.append(f"--nnodes: must be N or MIN:MAX with 1 <= MIN <= MAX, got {nnodes!r}")
        return None
    return parts[-1]


def _is_host_port(s: str) -> bool:
    host, _, port = s.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


if __name__ == "__main__":  # pragma: no cover
    main()
