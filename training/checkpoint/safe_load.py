"""Reading a DCP snapshot without running code that the snapshot carries.

torch's own reader unpickles ``.metadata`` with ``pickle.load`` (torch 2.13.0
``torch/distributed/checkpoint/filesystem.py:930``) and every non-tensor item (``BYTE_IO``:
hyper-parameters, registered components' state) with ``torch.load(weights_only=False)``
(``default_planner.py:387-391``). Both run whatever a planted ``__reduce__`` names, and a
checkpoint is untrusted input: a teammate, a rogue peer or a leaking file system can write one.

:class:`SafeFileSystemReader` closes both:

- ``.metadata`` goes through :class:`MetadataUnpickler`, which resolves only the DCP metadata
  classes (:data:`METADATA_GLOBALS`) and torch dtypes, then checks that the result is a
  ``Metadata`` whose every storage entry names a plain file in the snapshot directory;
- each ``BYTE_IO`` item is loaded with ``torch.load(weights_only=True)`` (torch's restricted
  unpickler) and the planner gets the loaded value, never the bytes (its own ``load_bytes`` would
  load them again with ``weights_only=False``).

Tensor items written in openpod's raw layout (``training/checkpoint/rawfmt.py``) are read with ``readinto``
after their descriptor, length and range are checked against the metadata and the file; items written the
old way (``torch.save``, DCP's layout) load as before, with ``torch.load(weights_only=True)``.

Anything else raises :class:`UnsafeCheckpoint`, a :class:`CorruptCheckpoint`, so the restore
skips that copy by name and goes on with the next verified one.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
from pathlib import Path

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint._traverse import set_element  # what DefaultLoadPlanner.load_bytes uses
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata
from torch.futures import Future

from training.checkpoint import rawfmt
from training.checkpoint.names import check_file_name
from training.checkpoint.storage import CorruptCheckpoint

# What a DCP ``.metadata`` written by torch 2.13.0 references: the dataclasses of
# torch/distributed/checkpoint/metadata.py:23-160 (TensorProperties pickles its memory format as
# _MEM_FORMAT_ENCODING, :57-75), _StorageInfo of filesystem.py:74-85, torch.Size and dtypes, the layout
# through torch.serialization._get_layout (how torch.layout pickles), and pathlib paths (StorageMeta's
# checkpoint_id). Found by recording every find_class of the .metadata of a model + AdamW + RNG +
# components save (tests/training/test_safe_load.py keeps that list true).
METADATA_GLOBALS: frozenset[tuple[str, str]] = frozenset({
    ("torch.distributed.checkpoint.metadata", "Metadata"),
    ("torch.distributed.checkpoint.metadata", "TensorStorageMetadata"),
    ("torch.distributed.checkpoint.metadata", "BytesStorageMetadata"),
    ("torch.distributed.checkpoint.metadata", "ChunkStorageMetadata"),
    ("torch.distributed.checkpoint.metadata", "TensorProperties"),
    ("torch.distributed.checkpoint.metadata", "MetadataIndex"),
    ("torch.distributed.checkpoint.metadata", "StorageMeta"),
    ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
})

METADATA_FILE = ".metadata"
MAX_METADATA_BYTES = 256 << 20  # a 405B-parameter FSDP snapshot's metadata is a few MiB


class UnsafeCheckpoint(CorruptCheckpoint):
    """A snapshot whose metadata or non-tensor items would run code or name files outside it."""


class MetadataUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves :data:`METADATA_GLOBALS` and torch dtypes, nothing else."""

    def __init__(self, file, where: str):
        super().__init__(file)
        self.where = where

    def find_class(self, module: str, name: str):
        if (module, name) in METADATA_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise UnsafeCheckpoint(
            f"{self.where}: refused to load {module}.{name}: DCP metadata may only reference the checkpoint "
            f"metadata classes and torch dtypes (a planted payload, or a checkpoint from another torch)")


def load_metadata(path: Path, where: str | None = None) -> Metadata:
    """The ``Metadata`` in the file ``path``, read by :class:`MetadataUnpickler` and checked."""
    where = where or str(path)
    with open(path, "rb") as f:
        raw = f.read(MAX_METADATA_BYTES + 1)
    if len(raw) > MAX_METADATA_BYTES:
        raise UnsafeCheckpoint(f"{where}: metadata larger than {MAX_METADATA_BYTES} bytes")
    try:
        md = MetadataUnpickler(io.BytesIO(raw), where).load()
    except UnsafeCheckpoint:
        raise
    except Exception as e:  # noqa: BLE001 - any malformed pickle: a clear error, never a traceback from pickle
        raise UnsafeCheckpoint(f"{where}: unreadable DCP metadata ({type(e).__name__}: {e})") from None
    if not isinstance(md, Metadata) or not isinstance(md.state_dict_metadata, dict):
        raise UnsafeCheckpoint(f"{where}: holds {type(md).__name__}, not DCP Metadata")
    for key, info in (md.storage_data or {}).items():
        rel = getattr(info, "relative_path", None)
        try:
            check_file_name(rel)
        except ValueError as e:
            raise UnsafeCheckpoint(f"{where}: storage entry {getattr(key, 'fqn', key)!r}: {e}") from None
        rawfmt.check_descriptors(info, f"{where}: storage entry {getattr(key, 'fqn', key)!r}")
    return md


class _BytesChecked:
    """The load planner, except that a ``BYTE_IO`` item is loaded here with ``weights_only=True`` and the planner
    gets the loaded value: the planner's own ``load_bytes`` would load the bytes again with ``weights_only=False``
    (default_planner.py:382-392), which must never see checkpoint bytes."""

    def __init__(self, planner, where: str):
        if type(planner).load_bytes is not DefaultLoadPlanner.load_bytes:
            raise UnsafeCheckpoint(f"{where}: {type(planner).__name__} loads non-tensor items itself; only torch's "
                                   "DefaultLoadPlanner can be handed items loaded with weights_only=True")
        self._planner, self._where = planner, where

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        try:
            obj = torch.load(io.BytesIO(value.getvalue()), weights_only=True)
        except Exception as e:  # noqa: BLE001 - torch's UnpicklingError names the refused global
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UnsafeCheckpoint(f"{self._where}: item {read_item.dest_index.fqn!r} refused: only tensors and "
                                   f"plain Python values load from a checkpoint ({first})") from None
        p, fqn = self._planner, read_item.dest_index.fqn
        if p.flatten_state_dict:  # what DefaultLoadPlanner.load_bytes does with its own load (:383-392)
            set_element(p.original_state_dict, p.mappings[fqn], obj)
        else:
            p.state_dict[fqn] = obj

    def __getattr__(self, name):
        return getattr(self._planner, name)


class SafeFileSystemReader(FileSystemReader):
    """A :class:`FileSystemReader` whose metadata and non-tensor items cannot run code."""

    def read_metadata(self, *args, **kwargs) -> Metadata:
        rank = kwargs.get("rank")
        path = Path(self._get_metadata_path(rank))
        md = load_metadata(path)
        # as FileSystemReader.read_metadata (filesystem.py:932-935)
        if getattr(md, "storage_meta", None) is None:
            from torch.distributed.checkpoint.metadata import StorageMeta

            md.storage_meta = StorageMeta()
        md.storage_meta.load_id = self.load_id
        return md

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args, **kwargs) -> None:
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self._metadata = metadata  # what raw items are checked against

    def read_data(self, plan, planner):
        checked = _BytesChecked(planner, str(self.path))
        raw, rest = [], []  # rest: items written by torch.save (DCP's layout) and non-tensor items
        for r in plan.items:
            (raw if rawfmt.is_raw(self.storage_data[r.storage_index]) else rest).append(r)
        if rest:
            super().read_data(dataclasses.replace(plan, items=rest), checked)
        if raw:
            rawfmt.read_raw(lambda rel: self.fs.concat_path(self.path, rel), self.storage_data,
                            getattr(self, "_metadata", None), raw, planner, str(self.path))
        done: Future = Future()
        done.set_result(None)
        return done


def first_failure(e: CheckpointException) -> BaseException:
    """The exception a rank's ``read_data`` raised, out of DCP's ``CheckpointException`` (whose text is a
    traceback per rank, torch 2.13.0 distributed/checkpoint/api.py:41-48): a CorruptCheckpoint stays one line."""
    for exc, _trace in getattr(e, "failures", {}).values():
        return exc if isinstance(exc, Exception) else e
    return e
