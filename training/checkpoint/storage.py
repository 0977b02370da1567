"""Where checkpoints live: tiers, the on-storage layout and the commit marker.

Layout (the same in every tier, S3 keys included)::

    step_000000012/rank_00000/            DCP files of rank 0's snapshot at step 12
    step_000000012/rank_00000.commit.json the commit marker, written last

A checkpoint exists only once its marker exists. Directory tiers write the marker
to a temp file, fsync it, rename it into place and fsync the directory; S3 uploads
it after every data object. The marker lists each file's size and hash, keyed by the hash's
algorithm (``{"size": n, "blake3": hex}``; markers written before BLAKE3 carry ``"sha256"``
and still verify), so a reader verifies what it loads and skips a corrupt or partial copy
by name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import blake3

from training.checkpoint.names import check_file_name
from training.faults import enospc_quota, put_fault
from training.storage_utils import atomic_write, fsync_dir as _fsync_dir

log = logging.getLogger("training.checkpoint")

MARKER_SUFFIX = ".commit.json"
MANIFEST = "manifest.json"  # step_N/manifest.json: every rank's marker of a step complete in a shared tier
_CHUNK = 8 << 20

# File hashes a marker may name, and the one new markers use. The hash must be cryptographic: the peer
# side-channel authenticates a marker by HMAC and its files only through these hashes
# (training/checkpoint/peer_auth.py), so a fast non-cryptographic hash (xxh3) would let whoever can
# alter the bytes in flight pick a colliding file. BLAKE3 (the blake3 package, Rust, releases the GIL)
# hashes 2.1 GB/s on one core of the development VM against sha256's 1.45 GB/s (SHA-NI), 2026-11-23.
HASHERS = {"blake3": blake3.blake3, "sha256": hashlib.sha256}
HASH = "blake3"


@dataclass
class Marker:
    step: int
    rank: int
    world_size: int
    files: dict[str, dict]           # name -> {"size": int, "blake3" (or, older, "sha256"): hex}
    replicated: bool = True          # True: any rank's snapshot restores any rank (data parallel)
    meta: dict = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    def __post_init__(self) -> None:  # markers are untrusted input: every tier joins these names to its paths
        if not isinstance(self.files, dict):
            raise TypeError(f"marker files: a mapping of file names, got {type(self.files).__name__}")
        for name in self.files:
            check_file_name(name)

    @property
    def key(self) -> str:
        return checkpoint_key(self.step, self.rank)

    @property
    def nbytes(self) -> int:
        return sum(f["size"] for f in self.files.values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Marker":
        return cls(**json.loads(text))


class CorruptCheckpoint(Exception):
    """A committed checkpoint whose files do not match its marker."""


def checkpoint_key(step: int, rank: int) -> str:
    return f"step_{step:09d}/rank_{rank:05d}"


def file_hash(entry: dict) -> tuple[str, str]:
    """``(algorithm, hex digest)`` of one marker file entry; ValueError if it names no known algorithm."""
    for alg in HASHERS:
        if isinstance(entry.get(alg), str):
            return alg, entry[alg]
    raise ValueError(f"no file hash of a known algorithm ({', '.join(HASHERS)}) in {sorted(entry)}")


def hash_file(path: Path, alg: str = HASH) -> str:
    h = HASHERS[alg]()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def describe_dir(d: Path) -> dict[str, dict]:
    """Sizes and hashes (:data:`HASH`) of every file in a snapshot directory."""
    return {p.name: {"size": p.stat().st_size, HASH: hash_file(p)}
            for p in sorted(d.iterdir()) if p.is_file()}


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)  # Linux flushes a file's dirty pages through any descriptor
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify_dir(d: Path, marker: Marker, where: str) -> None:
    for name, want in marker.files.items():
        p = d / name
        if not p.is_file():
            raise CorruptCheckpoint(f"{where}: file {name} is missing")
        if p.stat().st_size != want["size"]:
            raise CorruptCheckpoint(f"{where}: file {name} has {p.stat().st_size} bytes, marker says {want['size']}")
        try:
            alg, digest = file_hash(want)
        except ValueError as e:
            raise CorruptCheckpoint(f"{where}: file {name}: {e}") from None
        if hash_file(p, alg) != digest:
            raise CorruptCheckpoint(f"{where}: file {name} fails its {alg} check")


def _scandir(path) -> list[os.DirEntry]:
    """Entries of ``path``; empty if it was removed meanwhile."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _scandir_step(path) -> list[os.DirEntry]:
    """Entries of one step directory; an unreadable one is skipped by name (the tier's other steps count)."""
    try:
        return _scandir(path)
    except OSError as e:
        log.warning("skipping checkpoint directory %s: unreadable (%s)", path, e)
        return []


def _parse_marker_key(rel: str) -> tuple[int | None, int]:
    """``(step, rank)`` of a commit marker's path ``step_NNNNNNNNN/rank_NNNNN.commit.json``; ``(None, -1)``
    for anything else (snapshot files, foreign names)."""
    parts = rel.split("/")
    if len(parts) != 2 or not parts[1].endswith(MARKER_SUFFIX):
        return None, -1
    step, rank = parts[0], parts[1][: -len(MARKER_SUFFIX)]
    if not (step.startswith("step_") and step[5:].isdigit() and rank.startswith("rank_") and rank[5:].isdigit()):
        return None, -1
    return int(step[5:]), int(rank[5:])


def manifest_bytes(step: int, markers: list[Marker]) -> bytes:
    return json.dumps({"step": step, "markers": [json.loads(m.to_json()) for m in markers]}, sort_keys=True).encode()


def parse_manifest(step: int, text: str | bytes) -> list[Marker]:
    """The markers a step's manifest holds; ValueError if it is not one of ``step`` (one marker per rank)."""
    d = json.loads(text)
    if not isinstance(d, dict) or d.get("step") != step or not isinstance(d.get("markers"), list):
        raise ValueError("not a manifest of this step")
    out = [Marker(**m) for m in d["markers"]]
    if any(m.step != step for m in out) or len({m.rank for m in out}) != len(out):
        raise ValueError("its markers are of another step or repeat a rank")
    return out


class Tier:
    """One storage level. Subclasses: :class:`DirTier`, :class:`S3Tier`."""

    kind: str
    keep: int
    every: int

    @property
    def name(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def markers(self) -> list[Marker]:
        """Committed checkpoints, newest first; unreadable markers are skipped with a warning."""
        raise NotImplementedError

    def put(self, src: Path, marker: Marker) -> None:
        """Copy a committed snapshot directory here; the marker goes last."""
        raise NotImplementedError

    def materialize(self, marker: Marker, scratch: Path) -> Path:
        """A local directory holding the snapshot's files (verified by the caller)."""
        raise NotImplementedError

    def delete(self, step: int, rank: int) -> None:
        raise NotImplementedError

    def index(self) -> dict[int, set[int]]:
        """Committed steps and the ranks whose part of each is committed, from names alone (no marker is
        read: a listing, never one read per rank and step)."""
        raise NotImplementedError

    def seal(self, step: int, world_size: int) -> bool:
        """Write ``step``'s manifest (every rank's marker in one file) once every part of it is committed here;
        readers then read one file per step instead of one per rank (``markers``). Idempotent; returns
        whether this call wrote it. A rank deleting its part deletes the manifest first."""
        return False

    def step_markers(self, step: int) -> list[Marker]:
        """The markers a reader takes for ``step`` (its manifest when sealed, else each rank's marker)."""
        return [m for m in self.markers() if m.step == step]

    def check_copy(self, marker: Marker) -> None:
        """Raise :class:`CorruptCheckpoint` unless this tier's copy of ``marker``'s files matches it."""
        raise NotImplementedError

    def verify_step(self, step: int, world_size: int) -> str | None:
        """None when every part (ranks ``0 .. world_size - 1``) of ``step`` is here as a reader takes it - the
        markers it reads (a sealed step's from its manifest) against the files; else why not, in a few words. A
        step re-copied under an old manifest (the marker read no longer the copy's) fails here."""
        try:
            got = {m.rank: m for m in self.step_markers(step)}
        except Exception as e:  # noqa: BLE001 - a report, not the job
            return f"unreadable ({type(e).__name__}: {e})"
        missing = [r for r in range(max(world_size, 1)) if r not in got]
        if missing:
            return f"rank(s) {', '.join(map(str, missing[:4]))} not committed"
        for r in range(max(world_size, 1)):
            try:
                self.check_copy(got[r])
            except CorruptCheckpoint as e:
                return str(e)
            except Exception as e:  # noqa: BLE001 - an unreadable copy does not verify
                return f"rank {r}: {type(e).__name__}: {e}"
        return None

    def complete_steps(self, world_size: int) -> list[int]:
        """Steps whose every part (ranks ``0 .. world_size - 1``) is committed here, newest first. Replicated
        state has one part in shared tiers (rank 0's): ``world_size`` 1."""
        need = set(range(max(world_size, 1)))
        return sorted((s for s, ranks in self.index().items() if need <= ranks), reverse=True)

    def retain(self, rank: int, pinned: set[int] = frozenset(), keep: int | None = None,
               world_size: int | None = None) -> None:
        """Keep the newest ``keep`` (default: the tier's) committed steps of ``rank``; drop older and partial ones.

        With ``world_size`` (a shared tier, where every rank's part of a step lands on its own): also keep
        ``rank``'s part of the newest step that is complete job-wide. Ranks whose copies fail
        (or fall behind) hold other steps than their peers; without this each rank kept its own newest
        steps and deleted the last step every rank held."""
        keep = self.keep if keep is None else max(keep, 0)
        index = self.index()
        mine = sorted((s for s, ranks in index.items() if rank in ranks), reverse=True)
        kept = set(mine[:keep])
        if world_size is not None:
            need = set(range(max(world_size, 1)))
            kept |= set(sorted((s for s, ranks in index.items() if need <= ranks), reverse=True)[:1])
        for step in mine:
            if step not in kept and step not in pinned:
                self.delete(step, rank)


class DirTier(Tier):
    """A directory: node memory (/dev/shm), local NVMe, or the shared FSx for Lustre mount."""

    def __init__(self, kind: str, root: str | Path, *, keep: int = 2, every: int = 1, fsync: bool = True):
        self.kind, self.root, self.keep, self.every, self.fsync = kind, Path(root), keep, every, fsync
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.root}"

    def snapshot_dir(self, step: int, rank: int) -> Path:
        return self.root / checkpoint_key(step, rank)

    def marker_path(self, step: int, rank: int) -> Path:
        return self.root / (checkpoint_key(step, rank) + MARKER_SUFFIX)

    def _entries(self) -> list[Path]:
        """``step_*/rank_*`` paths (markers and snapshot directories), tolerating concurrent deletion.

        Ranks of one node share the node-local roots and each applies its own retention,
        so a step directory can vanish between listing the root and listing it
        (``Path.glob`` raises then).
        """
        out = []
        for step_dir in _scandir(self.root):
            if step_dir.name.startswith("step_"):
                out += [Path(e.path) for e in _scandir_step(step_dir.path) if e.name.startswith("rank_")]
        return out

    def manifest_path(self, step: int) -> Path:
        return self.root / f"step_{step:09d}" / MANIFEST

    def markers(self) -> list[Marker]:
        """Committed snapshots: a sealed step's from its manifest (one read), another's from each marker."""
        out = []
        for step_dir in _scandir(self.root):
            if not step_dir.name.startswith("step_") or not step_dir.name[5:].isdigit():
                continue
            entries = _scandir_step(step_dir.path)
            if any(e.name == MANIFEST for e in entries):
                p = Path(step_dir.path, MANIFEST)
                try:
                    out += parse_manifest(int(step_dir.name[5:]), p.read_text())
                    continue
                except FileNotFoundError:
                    entries = _scandir_step(step_dir.path)  # unsealed meanwhile (retention): read the markers
                except (ValueError, TypeError, OSError) as e:
                    log.warning("ignoring checkpoint manifest %s (%s); reading its markers", p, e)
            for e in entries:
                if not (e.name.startswith("rank_") and e.name.endswith(MARKER_SUFFIX)):
                    continue
                try:
                    out.append(Marker.from_json(Path(e.path).read_text()))
                except FileNotFoundError:
                    continue  # removed by retention meanwhile
                except (ValueError, TypeError, OSError) as ex:  # this step only; the tier's other steps count
                    log.warning("skipping checkpoint %s: unreadable commit marker (%s)", e.path, ex)
        return sorted(out, key=lambda m: (m.step, -m.rank), reverse=True)

    def check_copy(self, marker: Marker) -> None:
        verify_dir(self.snapshot_dir(marker.step, marker.rank), marker, f"{self.name}/{marker.key}")

    def seal(self, step: int, world_size: int) -> bool:
        """See :meth:`Tier.seal`; a manifest that no longer holds every rank's current marker (a part copied
        again: a rerun re-saving the step) is replaced, atomically (rename)."""
        d = self.root / f"step_{step:09d}"
        names = {e.name for e in _scandir_step(d)}
        if not all(f"rank_{r:05d}{MARKER_SUFFIX}" in names for r in range(world_size)):
            return False
        try:
            markers = [Marker.from_json(self.marker_path(step, r).read_text()) for r in range(world_size)]
        except (FileNotFoundError, ValueError, TypeError):
            return False  # a part deleted or unreadable meanwhile: not complete
        body = manifest_bytes(step, markers)
        if MANIFEST in names:
            try:
                if self.manifest_path(step).read_bytes() == body:
                    return False
            except FileNotFoundError:
                pass
        atomic_write(self.manifest_path(step), body, fsync=self.fsync)
        if not all(self.marker_path(step, r).exists() for r in range(world_size)):
            self.manifest_path(step).unlink(missing_ok=True)  # a rank began copying its part again meanwhile
            return False
        return True

    def commit(self, marker: Marker) -> None:
        """Make the snapshot's files and directory durable (fsync tiers), then write the marker."""
        d = self.snapshot_dir(marker.step, marker.rank)
        if self.fsync:
            for name in marker.files:
                fsync_file(d / name)
            _fsync_dir(d)
        atomic_write(self.marker_path(marker.step, marker.rank), marker.to_json().encode(), fsync=self.fsync)

    def prepare(self, step: int, rank: int) -> Path:
        """An empty snapshot directory (a stale partial one from a crash is removed). The step is uncommitted first
        (this rank's marker, then the step's manifest): a reader never takes an old marker for the new files."""
        self.marker_path(step, rank).unlink(missing_ok=True)
        self.manifest_path(step).unlink(missing_ok=True)
        d = self.snapshot_dir(step, rank)
        shutil.rmtree(d, ignore_errors=True)
        for _ in range(3):  # another rank's retention may remove the shared step directory meanwhile
            try:
                d.mkdir(parents=True)
                break
            except FileNotFoundError:
                continue
        else:
            d.mkdir(parents=True)
        return d

    def put(self, src: Path, marker: Marker) -> None:
        put_fault(self.kind, marker.step, marker.rank)
        quota = enospc_quota(self.kind, marker.step, marker.rank)
        d = self.prepare(marker.step, marker.rank)
        for name in marker.files:
            if quota is None:  # kernel-side copy (sendfile/copy_file_range), no Python buffers
                shutil.copyfile(src / name, d / name)
                continue
            with open(src / name, "rb") as fi, open(d / name, "wb") as fo:
                while chunk := fi.read(_CHUNK):
                    quota.charge(len(chunk))
                    fo.write(chunk)
        self.commit(marker)  # fsyncs the files first

    def materialize(self, marker: Marker, scratch: Path) -> Path:
        return self.snapshot_dir(marker.step, marker.rank)

    def delete(self, step: int, rank: int) -> None:
        self.manifest_path(step).unlink(missing_ok=True)  # the step is no longer complete
        self.marker_path(step, rank).unlink(missing_ok=True)  # uncommit first
        shutil.rmtree(self.snapshot_dir(step, rank), ignore_errors=True)
        try:
            (self.root / f"step_{step:09d}").rmdir()
        except OSError:
            pass

    def index(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for p in self._entries():
            step, rank = _parse_marker_key(f"{p.parent.name}/{p.name}")
            if step is not None:
                out.setdefault(step, set()).add(rank)
        return out

    def retain(self, rank: int, pinned: set[int] = frozenset(), keep: int | None = None,
               world_size: int | None = None) -> None:
        super().retain(rank, pinned, keep, world_size)
        committed = [s for s, ranks in self.index().items() if rank in ranks]
        if not committed:
            return
        oldest_kept = min(committed)  # retention above left only what is kept
        for d in self._entries():  # partial copies left by crashes
            if d.name != f"rank_{rank:05d}":
                continue
            step = int(d.parent.name.split("_")[1])
            if step < oldest_kept and step not in pinned and not self.marker_path(step, rank).exists():
                shutil.rmtree(d, ignore_errors=True)


class S3Tier(Tier):
    """An S3 prefix (boto3). Objects first, marker last: a listing never shows a partial checkpoint."""

    kind = "s3"

    def __init__(self, uri: str, *, keep: int = 2, every: int = 1, endpoint_url: str | None = None):
        import boto3

        u = urlparse(uri)
        if u.scheme != "s3" or not u.netloc:
            raise ValueError(f"not an s3:// URI: {uri}")
        self.uri, self.bucket, self.prefix = uri, u.netloc, u.path.strip("/")
        self.keep, self.every = keep, every
        self.s3 = boto3.client("s3", endpoint_url=endpoint_url)
        self._abort_warned = False
        self._swept: set[int] = set()  # ranks whose stale multipart uploads this process has aborted
        self._uploads: dict[str, str] = {}  # upload id -> key: multipart uploads this process started, not ended
        self._uploads_lock = threading.Lock()  # s3transfer calls the hooks from its worker threads
        ev = self.s3.meta.events
        ev.register("after-call.s3.CreateMultipartUpload", self._upload_started)
        for op in ("CompleteMultipartUpload", "AbortMultipartUpload"):
            ev.register(f"before-parameter-build.s3.{op}", self._upload_params)
            ev.register(f"after-call.s3.{op}", self._upload_ended)

    @property
    def name(self) -> str:
        return f"s3:{self.uri}"

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _list(self, prefix: str) -> tuple[list[str], list[str]]:
        """(object keys, common prefixes) directly under ``prefix`` (ListObjectsV2 with Delimiter "/"): a step's
        markers and manifest without its data objects."""
        keys, prefixes = [], []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix,
                                                                      Delimiter="/"):
            keys += [o["Key"] for o in page.get("Contents", [])]
            prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        return keys, prefixes

    def _steps(self) -> dict[int, list[str]]:
        """step -> the names directly under ``step_N/`` (markers, manifest)."""
        out = {}
        for p in self._list(self._key("step_"))[1]:
            name = p[len(self._key("")):].rstrip("/")
            if name.startswith("step_") and name[5:].isdigit():
                out[int(name[5:])] = [k[len(p):] for k in self._list(p)[0]]
        return out

    def index(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for step, names in self._steps().items():
            for n in names:
                s, rank = _parse_marker_key(f"step_{step:09d}/{n}")
                if s is not None:
                    out.setdefault(step, set()).add(rank)
        return out

    def _get(self, rel: str) -> bytes:
        return self.s3.get_object(Bucket=self.bucket, Key=self._key(rel))["Body"].read()

    def markers(self) -> list[Marker]:
        """Committed snapshots: a sealed step's from its manifest (one GET), another's from each marker."""
        out = []
        for step, names in self._steps().items():
            d = f"step_{step:09d}"
            if MANIFEST in names:
                try:
                    out += parse_manifest(step, self._get(f"{d}/{MANIFEST}"))
                    continue
                except self.s3.exceptions.NoSuchKey:
                    names = [k for k in names if k != MANIFEST]  # unsealed meanwhile (retention)
                except (ValueError, TypeError) as e:
                    log.warning("ignoring checkpoint manifest s3://%s/%s (%s); reading its markers", self.bucket,
                                self._key(f"{d}/{MANIFEST}"), e)
            for n in names:
                if not (n.startswith("rank_") and n.endswith(MARKER_SUFFIX)):
                    continue
                try:
                    out.append(Marker.from_json(self._get(f"{d}/{n}").decode()))
                except self.s3.exceptions.NoSuchKey:
                    continue
                except (ValueError, TypeError) as e:
                    log.warning("skipping checkpoint s3://%s/%s: unreadable commit marker (%s)",
                                self.bucket, self._key(f"{d}/{n}"), e)
        return sorted(out, key=lambda m: (m.step, -m.rank), reverse=True)

    def seal(self, step: int, world_size: int) -> bool:
        """See :meth:`Tier.seal`; a manifest that no longer holds every rank's current marker is replaced (a PUT
        replaces an object whole)."""
        d = f"step_{step:09d}"
        names = {k[len(self._key(d + "/")):] for k in self._list(self._key(d + "/"))[0]}
        if not all(f"rank_{r:05d}{MARKER_SUFFIX}" in names for r in range(world_size)):
            return False
        try:
            markers = [Marker.from_json(self._get(checkpoint_key(step, r) + MARKER_SUFFIX).decode())
                       for r in range(world_size)]
        except (self.s3.exceptions.NoSuchKey, ValueError, TypeError):
            return False
        body = manifest_bytes(step, markers)
        if MANIFEST in names:
            try:
                if self._get(f"{d}/{MANIFEST}") == body:
                    return False
            except self.s3.exceptions.NoSuchKey:
                pass
        self.s3.put_object(Bucket=self.bucket, Key=self._key(f"{d}/{MANIFEST}"), Body=body)
        if len(self.s3.list_objects_v2(Bucket=self.bucket, Prefix=self._key(f"{d}/rank_"), Delimiter="/")
               .get("Contents", [])) < world_size:  # a rank began copying its part again meanwhile
            self.s3.delete_object(Bucket=self.bucket, Key=self._key(f"{d}/{MANIFEST}"))
            return False
        return True

    def check_copy(self, marker: Marker) -> None:
        """The objects' sizes against the marker's (one listing); the hashes were checked as the files were
        written and are checked again by every restore (a download)."""
        where = f"s3://{self.bucket}/{self._key(marker.key)}"
        listing = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=self._key(marker.key + "/"))
        sizes = {o["Key"].rsplit("/", 1)[-1]: o["Size"] for o in listing.get("Contents", [])}
        for name, want in marker.files.items():
            if name not in sizes:
                raise CorruptCheckpoint(f"{where}: file {name} is missing")
            if sizes[name] != want["size"]:
                raise CorruptCheckpoint(f"{where}: file {name} has {sizes[name]} bytes, marker says {want['size']}")
        try:
            own = Marker.from_json(self._get(marker.key + MARKER_SUFFIX).decode())
        except self.s3.exceptions.NoSuchKey:
            raise CorruptCheckpoint(f"{where}: its commit marker is gone") from None
        if own.files != marker.files:
            raise CorruptCheckpoint(f"{where}: the step's manifest holds another copy's marker")

    # ------------------------------------------------ multipart uploads: recorded as started, aborted by id
    # boto3's upload_file copies files above 8 MiB as multipart uploads; parts of an upload never completed
    # (a killed writer, a failed copy) are billed until aborted. Listing a bucket's unfinished uploads needs
    # s3:ListBucketMultipartUploads on the whole bucket, which the platform does not grant (tenancy: it would
    # show every team's keys). So each upload this writer starts is recorded in memory and as a small object
    # under the job's prefix (``_multipart/rank_NNNNN/<sha256 of the id>``: key and id), dropped when the
    # upload completes or is aborted; what is left is aborted by id (s3:AbortMultipartUpload on the prefix).
    RECORDS = "_multipart"

    def _record_key(self, rank: int, upload_id: str = "") -> str:
        tail = hashlib.sha256(upload_id.encode()).hexdigest() if upload_id else ""
        return self._key(f"{self.RECORDS}/rank_{rank:05d}/{tail}")

    def _rank_of(self, key: str) -> int | None:
        for part in key.split("/"):
            if part.startswith("rank_") and part[5:].isdigit():
                return int(part[5:])
        return None

    def _upload_started(self, parsed=None, http_response=None, **_kw) -> None:
        """after-call CreateMultipartUpload: remember the id (memory, then the record object)."""
        if http_response is None or http_response.status_code >= 300 or not parsed or "UploadId" not in parsed:
            return
        key, upload_id = parsed["Key"], parsed["UploadId"]
        rank = self._rank_of(key)
        if rank is None or not key.startswith(self._key("step_")):
            return
        with self._uploads_lock:
            self._uploads[upload_id] = key
        try:
            self.s3.put_object(Bucket=self.bucket, Key=self._record_key(rank, upload_id),
                               Body=json.dumps({"key": key, "upload_id": upload_id}).encode())
        except Exception as e:  # noqa: BLE001 - the copy goes on; this process still aborts it by id if it fails
            log.warning("cannot record multipart upload of s3://%s/%s (%s: %s); a crash before it completes "
                        "leaves it to the bucket's lifecycle rule", self.bucket, key, type(e).__name__, e)

    def _upload_params(self, params=None, context=None, **_kw) -> None:
        """before-parameter-build Complete/AbortMultipartUpload: which upload the call is about."""
        if params is not None and context is not None:
            context["openpod_upload"] = (params.get("Key"), params.get("UploadId"))

    def _upload_ended(self, http_response=None, context=None, parsed=None, **_kw) -> None:
        """after-call Complete/AbortMultipartUpload: a completed or aborted upload needs no record."""
        key, upload_id = (context or {}).get("openpod_upload", (None, None))
        gone = http_response is not None and (http_response.status_code < 300 or (parsed or {}).get(
            "Error", {}).get("Code") == "NoSuchUpload")
        if not upload_id or not gone:
            return
        with self._uploads_lock:
            self._uploads.pop(upload_id, None)
        rank = self._rank_of(key or "")
        if rank is not None:
            try:
                self.s3.delete_object(Bucket=self.bucket, Key=self._record_key(rank, upload_id))
            except Exception as e:  # noqa: BLE001 - a stale record only costs one abort call later
                log.debug("cannot drop the record of multipart upload %s: %s", upload_id, e)

    def _abort(self, key: str, upload_id: str) -> bool:
        try:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except self.s3.exceptions.NoSuchUpload:
            return False  # completed or aborted already; _upload_ended drops the record
        log.info("aborted incomplete multipart upload s3://%s/%s", self.bucket, key)
        return True

    def abort_incomplete(self, rank: int, step: int | None = None, *, world_size: int | None = None) -> int:
        """Abort the multipart uploads ``rank`` left unfinished, by id: with ``step``, those of this process's
        copy of that step (a failed copy); without, every one recorded for ``rank`` - a killed writer's - and,
        given the job's ``world_size``, those of ranks the job no longer has (a restart on fewer ranks). Never
        another current rank's: it may be uploading now. A rank copies one snapshot at a time, so none of its
        own is in progress when this runs. Returns how many were aborted."""
        n = 0
        if step is not None:
            where = self._key(checkpoint_key(step, rank) + "/")
            with self._uploads_lock:
                mine = [(u, k) for u, k in self._uploads.items() if k.startswith(where)]
            return sum(self._abort(k, u) for u, k in mine)
        prefix = self._key(f"{self.RECORDS}/")
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                owner = self._rank_of(obj["Key"][len(prefix):])
                if owner != rank and (world_size is None or owner is None or owner < world_size):
                    continue
                try:
                    rec = json.loads(self.s3.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read())
                except self.s3.exceptions.NoSuchKey:
                    continue
                except (ValueError, TypeError):
                    log.warning("dropping unreadable multipart record s3://%s/%s", self.bucket, obj["Key"])
                    self.s3.delete_object(Bucket=self.bucket, Key=obj["Key"])
                    continue
                n += self._abort(rec["key"], rec["upload_id"])
                self.s3.delete_object(Bucket=self.bucket, Key=obj["Key"])
        return n

    def _abort_quietly(self, rank: int, step: int | None = None, *, world_size: int | None = None) -> bool:
        """:meth:`abort_incomplete`, best effort: during an outage the copy goes on and the bucket's lifecycle
        rule remains the backstop. Returns whether it ran."""
        try:
            self.abort_incomplete(rank, step, world_size=world_size)
            return True
        except Exception as e:  # noqa: BLE001 - botocore ClientError, connection errors
            if not self._abort_warned:
                self._abort_warned = True
                log.warning("cannot abort incomplete multipart uploads in s3://%s/%s (%s: %s); the bucket's "
                            "lifecycle rule will", self.bucket, self.prefix, type(e).__name__, e)
            return False

    def put(self, src: Path, marker: Marker) -> None:
        # Parts of earlier attempts (a killed writer) are billed until aborted. Only an earlier process leaves
        # them unseen - this one aborts a failed copy's in delete() - so the records are read once per process
        # and rank (rank 0 also takes those of ranks the job no longer has), and again after a sweep that
        # could not run.
        put_fault(self.kind, marker.step, marker.rank)
        # Uncommit first (this rank's marker, then the step's manifest): a reader never takes an old marker for
        # new objects while they are replaced.
        self.s3.delete_object(Bucket=self.bucket, Key=self._key(marker.key + MARKER_SUFFIX))
        self.s3.delete_object(Bucket=self.bucket, Key=self._key(f"step_{marker.step:09d}/{MANIFEST}"))
        if marker.rank not in self._swept and self._abort_quietly(
                marker.rank, world_size=marker.world_size if marker.rank == 0 else None):
            self._swept.add(marker.rank)
        for name in marker.files:
            self.s3.upload_file(str(src / name), self.bucket, self._key(f"{marker.key}/{name}"))
        self.s3.put_object(Bucket=self.bucket, Key=self._key(marker.key + MARKER_SUFFIX),
                           Body=marker.to_json().encode())

    def materialize(self, marker: Marker, scratch: Path) -> Path:
        d = scratch / marker.key
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for name in marker.files:
            self.s3.download_file(self.bucket, self._key(f"{marker.key}/{name}"), str(d / name))
        return d

    def delete(self, step: int, rank: int) -> None:
        key = checkpoint_key(step, rank)
        if not self._abort_quietly(rank, step):
            self._swept.discard(rank)  # the next put lists them again
        self.s3.delete_object(Bucket=self.bucket, Key=self._key(f"step_{step:09d}/{MANIFEST}"))  # no longer complete
        self.s3.delete_object(Bucket=self.bucket, Key=self._key(key + MARKER_SUFFIX))
        listing = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=self._key(key + "/"))
        objs = [{"Key": o["Key"]} for o in listing.get("Contents", [])]
        if objs:
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": objs})

