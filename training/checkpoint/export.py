"""Export one checkpoint step as a model-only file: full (unsharded) tensors, one dtype, safetensors or torch.

Every rank of a sharded job saves its own DCP snapshot holding only its chunks of each tensor. Reading one of
them alone (torch's ``dcp_to_torch_save`` on a rank's directory) builds full-size tensors whose other rows are
never written - uninitialised memory, no error. This reads every rank's snapshot of the step through
:class:`~training.checkpoint.reshard.MergedShardsReader`, checks that the chunks cover every element of every
model tensor, and refuses a step whose parts are not all there.

    python -m training.checkpoint export SOURCE OUT [--step N] [--dtype bf16] [--format safetensors]

SOURCE is a tier: a directory (FSx, NVMe or memory tier root) or ``s3://bucket/prefix``. Its bytes are untrusted:
they are read as the restore reads them (:mod:`training.checkpoint.safe_load`). A safetensors file carries
``{"format": "pt"}``, which transformers 4.x requires to load it (facts ``transformers.safetensors-format``).
Every failure - bad input, an unreadable or planted step, a storage error (S3, a full disk) - is one
:class:`ExportError` line, and OUT is written atomically: never half a file.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import torch

DTYPES = {"keep": None, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
FORMATS = ("safetensors", "torch")


class ExportError(Exception):
    """A step that cannot be exported (partial, unreadable, corrupt): one line saying why."""


def open_tier(source: str, endpoint_url: str | None = None):
    from training.checkpoint.storage import DirTier, S3Tier

    if source.startswith("s3://"):
        return S3Tier(source, endpoint_url=endpoint_url)
    if not Path(source).is_dir():
        raise ExportError(f"SOURCE: {source} is not a directory or an s3:// URI")
    return DirTier("fsx", source, fsync=False)


def pick_step(markers: list, step: int | None) -> tuple[int, list]:
    """The markers of ``step`` (default: the newest complete step): one replicated snapshot, or every rank's
    snapshot of one sharded save. ExportError if that step is partial or absent."""
    by_step: dict[int, list] = {}
    for m in markers:
        by_step.setdefault(m.step, []).append(m)

    def parts(ms: list) -> list | None:
        rep = [m for m in ms if m.replicated]
        if rep:
            return [min(rep, key=lambda m: m.rank)]
        world = max(m.world_size for m in ms)
        ranks = {m.rank: m for m in ms if m.world_size == world}
        return [ranks[r] for r in range(world)] if len(ranks) == world else None

    complete = {s: p for s, ms in by_step.items() if (p := parts(ms)) is not None}
    if step is None:
        if not complete:
            raise ExportError("no complete step in SOURCE" + (f" (partial: {', '.join(map(str, sorted(by_step)))})"
                                                               if by_step else ""))
        step = max(complete)
    if step not in by_step:
        raise ExportError(f"--step {step}: not in SOURCE (steps: {', '.join(map(str, sorted(by_step))) or 'none'})")
    if step not in complete:
        ms = by_step[step]
        world = max(m.world_size for m in ms)
        missing = sorted(set(range(world)) - {m.rank for m in ms})
        raise ExportError(f"step {step} is partial in SOURCE: the parts of rank(s) {', '.join(map(str, missing[:8]))}"
                          f"{' ...' if len(missing) > 8 else ''} of {world} are missing; refusing to export it "
                          f"(complete steps: {', '.join(map(str, sorted(complete))) or 'none'})")
    return step, complete[step]


def read_model(dirs: list[Path]) -> dict[str, torch.Tensor]:
    """Every ``model.*`` tensor of the snapshot(s) in ``dirs``, full size; ExportError if a tensor's saved
    chunks do not cover it."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    from training.checkpoint.reshard import MergedShardsReader
    from training.checkpoint.safe_load import SafeFileSystemReader, first_failure

    # the restore's reader: .metadata through the restricted unpickler, raw items with readinto (checked against
    # the metadata), items of DCP's torch.save layout and non-tensor items with weights_only=True
    reader = MergedShardsReader(dirs) if len(dirs) > 1 else SafeFileSystemReader(dirs[0])
    md = reader.read_metadata()
    out: dict[str, torch.Tensor] = {}
    for fqn, tmd in sorted(md.state_dict_metadata.items()):
        if not fqn.startswith("model.") or not isinstance(tmd, TensorStorageMetadata):
            continue
        covered = sum(math.prod(c.sizes) for c in tmd.chunks)  # chunks are disjoint (replicas' kept once)
        if covered != math.prod(tmd.size):
            raise ExportError(f"{fqn}: the saved chunks hold {covered} of {math.prod(tmd.size)} elements")
        out[fqn] = torch.empty(tuple(tmd.size), dtype=tmd.properties.dtype)
    if not out:
        raise ExportError("the step holds no model tensors")
    if hasattr(reader, "reset"):
        reader.reset()
    with warnings.catch_warnings():  # "torch.distributed is disabled ...": one process reading, as intended
        warnings.simplefilter("ignore", UserWarning)
        try:
            dcp.load(out, storage_reader=reader, no_dist=True)
        except CheckpointException as e:  # a corrupt item: its one-line error (a BaseException: never a traceback)
            raise first_failure(e) from None
    return {k[len("model."):]: v for k, v in out.items()}


def export(source: str, out: str | Path, *, step: int | None = None, dtype: str = "keep",
           fmt: str = "safetensors", endpoint_url: str | None = None) -> dict:
    """Write ``step`` of ``source`` to ``out`` (atomically); returns what was written. ExportError otherwise."""
    if dtype not in DTYPES:
        raise ExportError(f"--dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if fmt not in FORMATS:
        raise ExportError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt == "safetensors":
        try:
            import safetensors.torch  # noqa: F401 - the training extra installs it
        except ImportError:
            raise ExportError("--format safetensors needs the safetensors package (pip install '.[training]'), "
                              "or pass --format torch") from None
    try:
        tensors, step, parts, name = _read(source, step, endpoint_url)
    except ExportError:
        raise
    except Exception as e:  # noqa: BLE001 - S3 (botocore) and file-system errors: one line, never a traceback
        raise ExportError(f"SOURCE {source}: {_one_line(e)}") from None
    want = DTYPES[dtype]
    tensors = {k: (v.to(want) if want is not None and v.is_floating_point() else v).contiguous()
               for k, v in tensors.items()}
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "safetensors":
            from safetensors.torch import save_file

            save_file(tensors, str(tmp), metadata={"format": "pt", "step": str(step), "source": name,
                                                   "saved_by_ranks": str(len(parts))})
        else:
            torch.save(tensors, tmp)
        os.replace(tmp, out)
    except Exception as e:  # noqa: BLE001 - a full disk is OSError, safetensors' SafetensorError or torch's RuntimeError
        raise ExportError(f"OUT {out}: not written: {_one_line(e)}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return {"step": step, "tensors": len(tensors), "ranks": len(parts), "out": str(out), "format": fmt,
            "dtype": dtype, "bytes": out.stat().st_size}


def _read(source: str, step: int | None, endpoint_url: str | None) -> tuple[dict, int, list, str]:
    """(tensors, step, the step's markers, the tier's name): every part verified against its marker, then read."""
    from training.checkpoint.storage import CorruptCheckpoint, verify_dir

    tier = open_tier(source, endpoint_url)
    step, parts = pick_step(tier.markers(), step)
    scratch = Path(tempfile.mkdtemp(prefix="openpod-export-"))
    try:
        dirs = []
        for m in parts:
            d = tier.materialize(m, scratch)
            try:
                verify_dir(d, m, f"{tier.name}/{m.key}")
            except CorruptCheckpoint as e:
                raise ExportError(f"step {step}: {e}") from None
            dirs.append(d)
        try:
            return read_model(dirs), step, parts, tier.name
        except CorruptCheckpoint as e:  # a planted or unreadable .metadata / item: refused, nothing of it ran
            raise ExportError(f"step {step}: {e}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or "no detail"
    return f"{type(e).__name__}: {text[:300]}"
