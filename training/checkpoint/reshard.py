"""Restore sharded state saved by another world size: one DCP reader over every old rank's snapshot.

Each rank of a sharded (FSDP2/HSDP) job saves its own snapshot with its own DCP
``.metadata`` describing only its chunks of each global tensor. This reader merges
those per-rank metadata files into one global view (the chunks of all old ranks;
identical chunks saved by HSDP replicas are kept once), so DCP's load planner can
read the pieces that overlap each new rank's shards: the same resharding that a
single multi-rank DCP checkpoint gets.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata, TensorStorageMetadata


class MergedShardsReader(FileSystemReader):
    """A :class:`FileSystemReader` over several snapshot directories, one per saving rank."""

    def __init__(self, dirs: list[Path]):
        self.dirs = [Path(d).resolve() for d in dirs]
        super().__init__(os.path.commonpath([str(d) for d in self.dirs]))

    def read_metadata(self, *args, **kwargs) -> Metadata:
        merged: Metadata | None = None
        seen: dict[str, set] = {}
        for d in self.dirs:
            md = FileSystemReader(d).read_metadata()
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
