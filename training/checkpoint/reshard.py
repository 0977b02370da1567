"""Restore sharded state saved by another world size or mesh: one DCP reader over every old rank's snapshot.

Each rank of a sharded (FSDP2/HSDP) job saves its own snapshot with its own DCP
``.metadata`` describing only its chunks of each global tensor. This reader merges
those per-rank metadata files into one global view (the chunks of all old ranks;
identical chunks saved by HSDP replicas are kept once), so DCP's load planner can
read the pieces that overlap each new rank's shards: the same resharding that a
single multi-rank DCP checkpoint gets.

:func:`state_layout` names how a state is laid out over ranks (recorded in every marker),
:func:`directly_loadable` says when a rank's own old snapshot is enough, and
:func:`shard_sets` groups the snapshots every source lists by step and saving mesh, so a
set can be completed from several sources (node memory, held buddy copies, peers, FSx, S3).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from torch.distributed.checkpoint.metadata import Metadata, TensorStorageMetadata

from training.checkpoint.safe_load import SafeFileSystemReader
from training.checkpoint.storage import Marker


class MergedShardsReader(SafeFileSystemReader):
    """A :class:`SafeFileSystemReader` over several snapshot directories, one per saving rank."""

    def __init__(self, dirs: list[Path]):
        self.dirs = [Path(d).resolve() for d in dirs]
        super().__init__(os.path.commonpath([str(d) for d in self.dirs]))

    def read_metadata(self, *args, **kwargs) -> Metadata:
        merged: Metadata | None = None
        seen: dict[str, set] = {}
        for d in self.dirs:
            md = SafeFileSystemReader(d).read_metadata()
            rel = os.path.relpath(d, self.path)
            storage = {k: dataclasses.replace(v, relative_path=os.path.join(rel, v.relative_path))
                       for k, v in (md.storage_data or {}).items()}
            if merged is None:
                merged = md
                merged.storage_data = storage
                merged.planner_data = dict(md.planner_data or {})
                for fqn, tmd in md.state_dict_metadata.items():
                    if isinstance(tmd, TensorStorageMetadata):
                        seen[fqn] = {tuple(c.offsets) for c in tmd.chunks}
                continue
            for fqn, tmd in md.state_dict_metadata.items():
                have = merged.state_dict_metadata.get(fqn)
                if have is None:
                    merged.state_dict_metadata[fqn] = tmd
                    if isinstance(tmd, TensorStorageMetadata):
                        seen[fqn] = {tuple(c.offsets) for c in tmd.chunks}
                elif isinstance(tmd, TensorStorageMetadata) and isinstance(have, TensorStorageMetadata):
                    for c in tmd.chunks:
                        if tuple(c.offsets) not in seen[fqn]:
                            seen[fqn].add(tuple(c.offsets))
                            have.chunks.append(c)
            for k, v in storage.items():
                merged.storage_data.setdefault(k, v)
            merged.planner_data.update(md.planner_data or {})
        assert merged is not None, "no snapshot directories"
        if merged.storage_meta is not None:
            merged.storage_meta.load_id = self.load_id
        return merged


def state_layout(state) -> str:
    """How ``state`` is laid out over ranks: ``replicated`` (no DTensor), else the device meshes and a digest of
    every DTensor's placements by name. Two states with the same layout on the same world size hold the same
    shards on each rank, so a rank can load its own old snapshot; any other layout needs :class:`MergedShardsReader`.
    """
    from torch.distributed.tensor import DTensor

    entries: list[str] = []
    meshes: set[str] = set()

    def walk(prefix: str, obj) -> None:
        if isinstance(obj, DTensor):
            mesh = obj.device_mesh
            names = mesh.mesh_dim_names or tuple(f"d{i}" for i in range(mesh.ndim))
            desc = ",".join(f"{n}={s}" for n, s in zip(names, mesh.shape))
            meshes.add(desc)
            entries.append(f"{prefix}|{desc}|{obj.placements}")
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                walk(f"{prefix}.{k}", obj[k])
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(f"{prefix}.{i}", v)

    walk("", state)
    if not entries:
        return "replicated"
    digest = hashlib.sha256("\n".join(entries).encode()).hexdigest()[:12]
    return f"mesh({';'.join(sorted(meshes))})#{digest}"


def directly_loadable(m: Marker, rank: int, world_size: int, layout: str | None) -> bool:
    """Whether ``rank`` of a job of ``world_size`` ranks whose state has ``layout`` can load snapshot ``m`` alone:
    replicated state, or this rank's own shards saved on the same mesh. Markers written before layouts were
    recorded compare by world size only."""
    if m.replicated:
        return True
    saved = m.meta.get("layout")
    return m.rank == rank and m.world_size == world_size and (saved is None or layout is None or saved == layout)


@dataclass
class ShardSet:
    """Every copy of one step's sharded snapshots saved by one mesh (``world_size`` ranks, one layout)."""

    step: int
    world_size: int
    layout: str | None
    copies: dict[int, list[tuple[object, Marker]]] = field(default_factory=dict)  # old rank -> (source, marker)

    @property
    def missing(self) -> list[int]:
        return [r for r in range(self.world_size) if not self.copies.get(r)]

    @property
    def complete(self) -> bool:
        return not self.missing


def shard_sets(listed: list[tuple[object, list[Marker]]]) -> dict[int, list[ShardSet]]:
    """Group the sharded snapshots of every listed source by step and saving mesh, copies in source order
    (``listed`` is ordered fastest source first), complete sets first."""
    sets: dict[tuple, ShardSet] = {}
    for src, markers in listed:
        for m in markers:
            if m.replicated or not 0 <= m.rank < m.world_size:
                continue
            key = (m.step, m.world_size, m.meta.get("layout"))
            s = sets.setdefault(key, ShardSet(m.step, m.world_size, key[2]))
            s.copies.setdefault(m.rank, []).append((src, m))
    out: dict[int, list[ShardSet]] = {}
    for s in sets.values():
        out.setdefault(s.step, []).append(s)
    for v in out.values():
        v.sort(key=lambda s: (not s.complete, len(s.missing)))
    return out
