"""What keeps two runs apart in one ``--checkpoint-dir``: the run's identity, and one launch per node at a time.

**Identity.** ``<checkpoint-dir>/run-identity.json`` records what makes a run the run it is: the model, the seed,
the global batch and the data (sample count and a digest of the data set's ``index.json``), plus its layout
(parallelism, tp, shard size) for the record. A launch whose identity differs from the recorded one is refused in
one line - resuming would silently mix two runs (another seed's sample order, a larger batch skipping samples) -
unless ``--allow-identity-change`` says it is intended; then the new identity is recorded and the old one kept in
``history``. The world size and the layout are not compared: an elastic resize and a switch of ``--parallelism``
/ ``--tp`` / ``--shard-size`` restore by resharding (docs/training.md, "Resharding"). A directory written before
identities were recorded is compared with the ``run/config-*.json`` its last launch wrote.

**Lock.** Each launcher holds an exclusive ``flock`` on ``<checkpoint-dir>/.locks/<node>.lock`` while it runs
(``<node>``: ``--node-id`` or the host name), so a second launch on the same directory from the same node - or
from a node of the same name, where the file system's locks are coherent across clients (Lustre's ``flock``
mount option) - is refused in one line. The nodes of one job have distinct names and do not contend. The kernel
drops the lock when the launcher dies, however it dies.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from pathlib import Path

from training.storage_utils import write_json_atomic

IDENTITY_FILE = "run-identity.json"
LOCK_DIR = ".locks"
COMPARED = ("model", "seed", "global_batch", "data")  # what a resume must keep; "layout" may change (reshard)
FLAG = "--allow-identity-change"


class RunGuardError(Exception):
    """A launch refused: one line saying why and what to do."""


def identity(*, model: str, seed: int, global_batch: int, num_samples: int, data_dir: Path, parallelism: str,
             tp: int, shard_size: int | None) -> dict:
    index = Path(data_dir) / "index.json"
    digest = hashlib.sha256(index.read_bytes()).hexdigest()[:16] if index.is_file() else None
    return {"model": model, "seed": seed, "global_batch": global_batch,
            "data": {"samples": num_samples, "index_sha256": digest},
            "layout": {"parallelism": parallelism, "tp": tp, "shard_size": shard_size}}


def _from_config(run_dir: Path) -> dict | None:
    """The compared part of the identity, from the newest ``config-*.json`` a launcher wrote (older versions)."""
    configs = sorted(run_dir.glob("config-*.json"), key=lambda p: p.stat().st_mtime)
    for p in reversed(configs):
        try:
            c = json.loads(p.read_text())
            return {"model": c["model"], "seed": c["seed"], "global_batch": c["data"]["global_batch"]}
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def _differences(old: dict, new: dict) -> list[str]:
    out = []
    for key in COMPARED:
        if key not in old:
            continue
        a, b = old[key], new[key]
        if key == "data" and isinstance(a, dict):
            if a.get("samples") != b["samples"]:
                out.append(f"--num-samples {a.get('samples')} (this launch: {b['samples']})")
            elif a.get("index_sha256") and b["index_sha256"] and a["index_sha256"] != b["index_sha256"]:
                out.append(f"data set index {a['index_sha256']} (this launch's --data-dir: {b['index_sha256']})")
        elif a != b:
            out.append(f"--{key.replace('_', '-')} {a} (this launch: {b})")
    return out


def check_identity(ckpt_dir: Path, new: dict, *, allow_change: bool) -> str | None:
    """Refuse (RunGuardError) a launch whose identity differs from the one recorded in ``ckpt_dir``, unless
    ``allow_change``; record ``new`` (atomically). Returns a note when a change was allowed."""
    path = Path(ckpt_dir) / IDENTITY_FILE
    try:
        recorded = json.loads(path.read_text())
        if not isinstance(recorded, dict):
            raise ValueError("not an object")
    except FileNotFoundError:
        recorded = None
    except (OSError, ValueError) as e:
        raise RunGuardError(f"--checkpoint-dir: {path} is unreadable ({e}); it records which run the checkpoints "
                            f"belong to - restore it, or pass {FLAG} to record this launch's") from None
    old = recorded if recorded is not None else _from_config(Path(ckpt_dir) / "run")
    diffs = _differences(old, new) if old else []
    note = None
    if diffs:
        if not allow_change:
            raise RunGuardError(f"--checkpoint-dir {ckpt_dir} holds another run: {'; '.join(diffs)}; resuming it "
                                f"would mix two runs. Use another --checkpoint-dir, or pass {FLAG} if intended")
        note = f"run identity changed as asked ({FLAG}): {'; '.join(diffs)}"
    history = list((recorded or {}).get("history", []))
    if diffs and recorded is not None:
        history.append({k: v for k, v in recorded.items() if k != "history"})
    if recorded is None or diffs or {k: v for k, v in recorded.items() if k != "history"} != new:
        write_json_atomic(path, {**new, "history": history[-20:]})
    return note


def lock(ckpt_dir: Path, node: str | None = None):
    """Hold this node's exclusive lock on ``ckpt_dir`` (the returned file; the lock lasts while it is open).
    RunGuardError if another launch holds it; None where the file system has no locks (a warning's worth)."""
    node = node or socket.gethostname()
    d = Path(ckpt_dir) / LOCK_DIR
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{node}.lock"
    f = open(path, "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise RunGuardError(f"--checkpoint-dir {ckpt_dir}: another launch is running on it ({holder}); two runs "
                            "in one directory overwrite each other's checkpoints. Wait for it or stop it, or use "
                            "another --checkpoint-dir") from None
    except OSError as e:
        f.close()
        if e.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            return None
        raise
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}, node {node}, since "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    f.flush()
    return f
