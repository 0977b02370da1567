"""Run configuration: one dataclass tree, each component switched by its own section.

The CLI builds a :class:`RunConfig`, writes it as JSON next to the run, and every
worker reads the same file, so all ranks agree on every knob.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

LAYOUTS = ("raw", "torch-save")  # CheckpointConfig.layout / --checkpoint-layout (training/checkpoint/rawfmt.py)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    seq_len: int


# Reference model sizes: ``tiny`` trains in seconds on a CPU; ``xl`` is ~1.2 GB of
# model + AdamW state in fp32 (the benchmarks' size).
MODELS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4, seq_len=32),
    "small": ModelConfig(vocab_size=1024, d_model=256, n_layers=4, n_heads=8, seq_len=128),
    "medium": ModelConfig(vocab_size=4096, d_model=512, n_layers=8, n_heads=8, seq_len=256),
    "xl": ModelConfig(vocab_size=8192, d_model=1024, n_layers=8, n_heads=16, seq_len=256),
}


@dataclass
class DataConfig:
    data_dir: str
    num_samples: int = 1536          # samples (windows of seq_len + 1 tokens) in the data set
    samples_per_shard: int = 256
    global_batch: int = 12           # samples per optimizer step, whatever the world size
    micro_batch: int = 2             # samples per forward/backward on one rank
    cache_dir: str | None = None     # node-memory copies of the shards (training/data.py ShardCache); None: off
    cache_max_gib: float = 16.0      # beyond this the shards are mapped from data_dir


@dataclass
class OptimConfig:
    lr: float = 3e-3
    warmup_steps: int = 5
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0


@dataclass
class TierConfig:
    """One place checkpoints live. ``kind``: memory | nvme | fsx | s3."""

    kind: str
    path: str                        # directory, or s3://bucket/prefix
    keep: int = 2                    # committed checkpoints retained in this tier
    every: int = 1                   # promote every n-th checkpoint into this tier
    endpoint_url: str | None = None  # S3 only (tests: moto server)


@dataclass
class CheckpointConfig:
    enabled: bool = True
    every: int = 5                   # steps between checkpoints
    tiers: list[TierConfig] = field(default_factory=list)
    peer_replication: bool = True    # send each snapshot to a buddy rank on another node
    peer_host: str = "127.0.0.1"     # address the peer server binds and advertises
    write_threads: int = 1           # DCP FileSystemWriter threads
    layout: str = "raw"              # tensor items on disk: raw (their bytes at known offsets, one write each; read
    #                                  by openpod's reader) | torch-save (DCP's own: a torch.save per tensor, loadable
    #                                  by stock dcp.load(FileSystemReader)); training/checkpoint/rawfmt.py
    allow_fresh_start: bool = False  # start from step 0 even though a checkpoint source could not be read
    source_attempts: int = 3         # tries per checkpoint source at restore (1 s, 2 s, ... between them)
    promote_attempts: int = 3        # tries per copy into a further tier (promote_retry_s x 1, 2, ... between)
    promote_retry_s: float = 0.5
    overlap_staging: bool = True     # copy parameters/optimizer state to host during the next step's
    #                                  forward/backward; that step's optimizer.step() waits for the copy
    o_direct: bool = True            # write the nvme tier's large staged runs with O_DIRECT (no page-cache copy);
    #                                  buffered where the file system refuses it; training/checkpoint/hashing.py
    direct_durable: bool = True      # write the first durable tier (after a memory tier) from the staged
    #                                  copy, alongside the memory tier, instead of copying it afterwards
    tier_lag_saves: int = 2          # a further tier more saves behind than this is warned about (and exported:
    #                                  openpod_checkpoint_tier_lag_saves); each tier has its own copy thread


@dataclass
class FaultToleranceConfig:
    """How the job survives a failed worker. ``restart``: torchrun restarts every worker, which reload the
    newest checkpoint. ``replica``: the job is ``replicas`` data-parallel replica groups coordinated by a
    torchft Lighthouse; a failed group restarts alone and heals from a live peer (training/ft/replica.py)."""

    mode: str = "restart"            # restart | replica
    replica_id: int = 0              # this launcher's replica group, 0 .. replicas-1
    replicas: int = 1                # replica groups in the job
    min_replicas: int = 0            # groups a step needs to commit [0: all of them - survivors wait]
    lighthouse: str = ""             # the torchft Lighthouse, http://host:port
    host: str = "127.0.0.1"          # address other replicas reach this group's store, manager and transport at
    timeout_seconds: int = 60        # cross-replica collectives, commit votes, the state transfer
    quorum_timeout_seconds: int = 1800  # how long a survivor waits at a step for enough replicas

    @property
    def required(self) -> int:
        return self.min_replicas or self.replicas


@dataclass
class RunConfig:
    model: str
    steps: int
    seed: int
    run_dir: str                     # job state: goodput ledger, metrics, results
    data: DataConfig
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    threads: int = 1                 # torch intra-op threads per worker
    device: str = "auto"             # auto | cpu | cuda
    metrics_port: int | None = None  # serve Prometheus metrics from rank 0
    log_every: int = 10              # rank 0 logs a progress line (stderr) every this many steps; 0: never
    # Collectives wait this long for the slowest rank. Restore is the longest wait: peers sit in the
    # all_gather while one rank lists and fetches from S3 (242 s measured, docs/training.md "Benchmarks"),
    # with up to 3 tries per source; 120 s (the old value) let the waiting ranks time out first.
    pg_timeout_seconds: int = 1800
    parallelism: str = "ddp"         # ddp | fsdp (FSDP2 fully_shard) | hsdp (FSDP2 over a 2-D replicate x shard mesh)
    shard_size: int = 0              # hsdp: ranks per shard group [0: the local world size, i.e. shard within a node]
    tp: int = 1                      # tensor-parallel degree (fsdp): a (dp, tp) mesh, FSDP2 over dp, TP within tp
    fault_tolerance: FaultToleranceConfig = field(default_factory=FaultToleranceConfig)
    # process: a failed worker ends the worker group (torchrun restarts it); in-process: the survivors re-form
    # the process group in their own processes (training/ft/inprocess.py), only the failed rank is replaced
    restart: str = "process"
    restart_max: int = 0             # in-process: restarts a worker may do (the launcher's --max-restarts)

    @property
    def model_config(self) -> ModelConfig:
        return MODELS[self.model]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        d = dict(d)
        d["data"] = DataConfig(**d["data"])
        d["optim"] = OptimConfig(**d.get("optim", {}))
        ck = dict(d.get("checkpoint", {}))
        ck["tiers"] = [TierConfig(**t) for t in ck.get("tiers", [])]
        d["checkpoint"] = CheckpointConfig(**ck)
        d["fault_tolerance"] = FaultToleranceConfig(**d.get("fault_tolerance", {}))
        return cls(**d)

    @classmethod
    def load(cls, path: str | Path) -> "RunConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))
