"""Deterministic synthetic token data in memory-mapped shards, and a rank-independent sample order.

* Shards are raw little-endian uint16 files of fixed-size samples (``seq_len + 1``
  tokens), memory-mapped: opening a data set reads nothing, seeking is O(1).
* The sample order is a function of (seed, epoch) only. Global step ``s`` consumes
  stream positions ``[s*G, (s+1)*G)`` (``G`` = global batch); a rank takes a
  contiguous slice of that window sized by the current world size. So a resume at
  step ``s`` starts reading exactly where the interrupted run stopped, and a change of
  world size changes who reads a sample, never which samples a step reads.
* Optionally (:class:`ShardCache`) each shard is copied once into a per-job directory in node
  memory (``/dev/shm``) and mapped from there: the node's ranks share it, and a restarted rank
  maps the cached copy instead of reading the source (FSx) again. The cache is keyed by the data
  set's index, so a changed data set is never served from a stale copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

# torch is imported where tensors are made, not here: the launcher writes the data set (numpy only) and
# must not pay torch's import (about 3 s of CPU per run) before torchrun starts the workers.

INDEX = "index.json"


def _synthetic_sample(g: np.random.Generator, n: int, vocab: int) -> np.ndarray:
    """A learnable sequence: an arithmetic progression mod vocab with sparse noise."""
    start = int(g.integers(vocab))
    stride = int(g.integers(1, 8))
    seq = (start + stride * np.arange(n, dtype=np.int64)) % vocab
    noise = g.random(n) < 0.05
    seq[noise] = g.integers(vocab, size=int(noise.sum()))
    return seq


def ensure_dataset(data_dir: str | Path, *, seed: int, num_samples: int, samples_per_shard: int,
                   seq_len: int, vocab_size: int) -> Path:
    """Write the data set once (atomically: temp dir + rename); a no-op if it exists."""
    data_dir = Path(data_dir)
    params = {"seed": seed, "num_samples": num_samples, "samples_per_shard": samples_per_shard,
              "sample_tokens": seq_len + 1, "vocab_size": vocab_size, "dtype": "uint16"}
    if (data_dir / INDEX).exists():
        have = json.loads((data_dir / INDEX).read_text())
        if {k: have.get(k) for k in params} != params:
            raise ValueError(f"{data_dir} holds a different data set ({INDEX} differs); use another --data-dir")
        return data_dir
    if vocab_size > 65535:
        raise ValueError("vocab_size must fit in uint16")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{data_dir.name}.", dir=data_dir.parent))
    g = np.random.Generator(np.random.PCG64(seed))
    shards = []
    for first in range(0, num_samples, samples_per_shard):
        count = min(samples_per_shard, num_samples - first)
        block = np.stack([_synthetic_sample(g, seq_len + 1, vocab_size) for _ in range(count)])
        raw = block.astype("<u2").tobytes()
        name = f"shard_{len(shards):05d}.bin"
        with open(tmp / name, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        shards.append({"name": name, "samples": count, "sha256": hashlib.sha256(raw).hexdigest()})
    (tmp / INDEX).write_text(json.dumps({**params, "shards": shards}, indent=1))
    try:
        os.rename(tmp, data_dir)
    except OSError:  # another launcher won the race: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return data_dir


class ShardCache:
    """Node-local copies of a data set's shards, for :class:`TokenShards`; outlives the processes.

    ``root/<key>/shard_*.bin``, ``key`` = SHA-256 of the data set's ``index.json`` (which holds every
    shard's SHA-256), so a changed data set gets a new directory and the old one is removed on open.
    A shard is copied on first use (verified against its SHA-256, then renamed into place: a present
    file is complete); beyond ``max_bytes`` shards are mapped from the source instead.
    """

    def __init__(self, root: str | Path, index: bytes, *, max_bytes: int):
        self.root = Path(root)
        self.key = hashlib.sha256(index).hexdigest()[:16]
        self.dir = self.root / self.key
        self.max_bytes = max_bytes
        self.root.mkdir(parents=True, exist_ok=True)
        for d in self.root.iterdir():  # another data set's copies (or an older version of this one)
            if d.name != self.key and d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
        self.dir.mkdir(exist_ok=True)

    def _used(self) -> int:
        return sum(f.stat().st_size for f in self.dir.glob("shard_*.bin"))

    def get(self, source: Path, *, size: int, sha256: str) -> tuple[Path, str]:
        """(path to map, "hit" | "filled" | "uncached") for the shard at ``source``."""
        cached = self.dir / source.name
        try:
            if cached.stat().st_size == size:
                return cached, "hit"
        except FileNotFoundError:
            pass
        if self._used() + size > self.max_bytes:
            return source, "uncached"
        raw = source.read_bytes()
        if hashlib.sha256(raw).hexdigest() != sha256:
            raise ValueError(f"{source}: contents differ from {INDEX} (the data set changed while in use)")
        tmp = self.dir / f".{source.name}.{os.getpid()}"
        tmp.write_bytes(raw)
        os.replace(tmp, cached)
        return cached, "filled"


class TokenShards:
    """Random access to samples in memory-mapped shards (nothing is read until indexed).

    With ``cache_dir``, shards are mapped from a :class:`ShardCache` there (``cache_max_bytes`` at most);
    ``cache_stats`` counts this process's shards found in the cache, copied into it, or left uncached.
    """

    def __init__(self, data_dir: str | Path, *, cache_dir: str | Path | None = None,
                 cache_max_bytes: int = 16 << 30):
        self.dir = Path(data_dir)
        raw = (self.dir / INDEX).read_bytes()
        idx = json.loads(raw)
        self.sample_tokens = idx["sample_tokens"]
        self.samples_per_shard = idx["samples_per_shard"]
        self.num_samples = idx["num_samples"]
        self._shards = idx["shards"]
        self._maps: list[np.memmap | None] = [None] * len(self._shards)
        self.cache = ShardCache(cache_dir, raw, max_bytes=cache_max_bytes) if cache_dir else None
        self.cache_stats = {"dir": str(self.cache.dir) if self.cache else None, "hit": 0, "filled": 0, "uncached": 0}

    def __len__(self) -> int:
        return self.num_samples

    def _map(self, shard: int) -> np.memmap:
        m = self._maps[shard]
        if m is None:
            s = self._shards[shard]
            path = self.dir / s["name"]
            if self.cache is not None:
                path, how = self.cache.get(path, size=s["samples"] * self.sample_tokens * 2, sha256=s["sha256"])
                self.cache_stats[how] += 1
            m = self._maps[shard] = np.memmap(path, dtype="<u2", mode="r").reshape(-1, self.sample_tokens)
        return m

    def sample(self, i: int) -> torch.Tensor:
        import torch

        shard, off = divmod(i, self.samples_per_shard)
        return torch.from_numpy(self._map(shard)[off].astype(np.int64))

    def batch(self, ids: list[int]) -> torch.Tensor:
        import torch

        return torch.stack([self.sample(i) for i in ids])


class SampleOrder:
    """Position in the global sample stream -> sample id; depends on (seed, epoch) only."""

    def __init__(self, num_samples: int, seed: int):
        self.n = num_samples
        self.seed = seed
        self._epoch = -1
        self._perm: list[int] = []

    def epoch_order(self, epoch: int) -> list[int]:
        if epoch != self._epoch:
            import torch

            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm, self._epoch = torch.randperm(self.n, generator=g).tolist(), epoch
        return self._perm

    def __getitem__(self, position: int) -> int:
        epoch, pos = divmod(position, self.n)
        return self.epoch_order(epoch)[pos]


@dataclass(frozen=True)
class StepPlan:
    """The samples one rank processes in one optimizer step, split in micro-batches."""

    step: int
    positions: range                 # this rank's slice of the global window
    micro_batches: list[list[int]]   # sample ids
    global_batch: int

    @property
    def sample_ids(self) -> list[int]:
        return [i for mb in self.micro_batches for i in mb]


def plan_step(order: SampleOrder, step: int, *, rank: int, world_size: int, global_batch: int,
              micro_batch: int) -> StepPlan:
    """Rank ``rank``'s share of global step ``step``: gradient accumulation adapts to the world size."""
    if world_size > global_batch:
        raise ValueError(f"world size {world_size} exceeds the global batch {global_batch}")
    base = step * global_batch
    lo = base + rank * global_batch // world_size
    hi = base + (rank + 1) * global_batch // world_size
    ids = [order[p] for p in range(lo, hi)]
    mbs = [ids[i:i + micro_batch] for i in range(0, len(ids), micro_batch)]
    return StepPlan(step=step, positions=range(lo, hi), micro_batches=mbs, global_batch=global_batch)
