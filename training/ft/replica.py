"""Replica-level fault tolerance on torchft: a failed replica group heals from a live peer.

The job is ``replicas`` data-parallel replica groups (each its own torchrun job, one
launcher per node) coordinated by a torchft Lighthouse. Every step starts with a
quorum (:meth:`ReplicaGroup.begin_step`); gradients are summed inside the group with
the group's own process group, then across groups with torchft's reconfigurable gloo
or NCCL process group; the optimizer steps only if the step commits
(:meth:`ReplicaGroup.commit`).

When a group's worker dies, only that group's torchrun restarts its workers. The
other groups keep their processes: their all-reduce of the step fails, the step does
not commit, and they run it again after the next quorum - waiting there until
``required`` groups are back (``min_replicas`` = all: survivors wait; fewer: they go
on with a smaller quorum). The restarted group joins at step 0, the quorum sees it
behind, and torchft's checkpoint transport sends it the live state of a peer at the
current step - model, optimizer, every registered component (LR schedule, ...) - so it
trains that very step with the others, without reading a checkpoint.

torchft 0.2.0 behaviour relied on (site-packages/torchft, read 2026-11-23):

* ``Manager(use_async_quorum=False)``: ``start_quorum`` waits for the quorum and, if
  healing, applies the received state before returning (manager.py:606-615); the
  received ``torchft`` entry sets the step to the quorum's ``max_step`` (manager.py:792-804).
* A peer behind ``max_step`` heals; with ``init_sync=False`` nobody heals at step 0
  (src/manager.rs ``compute_quorum_results``, meta-pytorch/torchft@7eb7087, the
  0.2.0 sources).
* Replica ranks are the participants sorted by replica id (src/manager.rs, same
  function): ids are zero-padded so the data plan's rank order is the group order.
* ``allreduce`` swallows a failed collective and records it; ``should_commit`` then
  returns False (manager.py:436-493, 855-943). ``should_commit`` is agreed inside a
  group only, not across groups.
* With a sync quorum every member of the quorum participates, healed ones included
  (manager.py:674-678).
* A process group is (re)configured when the quorum id changes, under the store prefix
  ``torchft/<quorum_id>/`` (manager.py:692-704). A restarted Lighthouse numbers its
  quorums from 1 again (src/lighthouse.rs:282 starts the state at 0, :313 adds 1 per
  membership change), so groups that healed before the restart would re-form under a
  prefix an earlier quorum wrote, and gloo could dial a dead worker's address from a
  stale key. :func:`distinct_quorum_id` gives the manager ids that do not repeat.
* The checkpoint transport serves the live state dict until ``should_commit`` calls
  ``disallow_checkpoint`` (manager.py:925), i.e. before the optimizer changes it. It is
  :class:`~training.ft.heal_transport.SignedHTTPTransport` (signed requests, tagged replies,
  ``weights_only`` loads), not torchft's ``HTTPTransport``, which unpickles whatever the address the
  quorum names sends (http_transport.py:146-164).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_flatten

from training.config import FaultToleranceConfig
from training.ft.heal_transport import SignedHTTPTransport

log = logging.getLogger("training.ft")


def replica_name(replica_id: int) -> str:
    """torchft orders replicas by this string (and reads its trailing digits): zero-padded."""
    return f"replica_{replica_id:05d}"


def distinct_quorum_id(quorum_id: int, replica_ids: list[str]) -> int:
    """The id under which the manager configures its process group: the Lighthouse's quorum id and the
    quorum's members (torchft replica ids end in a uuid per manager, so a replaced group is a new member).

    Every member computes the same value from the same quorum. It changes whenever the Lighthouse's id or the
    membership changes, so a group never re-forms under an earlier quorum's store prefix, also after a
    Lighthouse restart; a restart with unchanged members maps to the id in use and nothing is re-formed."""
    key = f"{quorum_id}|" + "|".join(sorted(replica_ids))
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=7).digest(), "big")


class _Quorum:
    """A torchft quorum result whose ``quorum_id`` is :func:`distinct_quorum_id`'s."""

    def __init__(self, result):
        self._result = result
        self.quorum_id = distinct_quorum_id(result.quorum_id, list(result.replica_ids))
        self.lighthouse_quorum_id = result.quorum_id

    def __getattr__(self, name):
        return getattr(self._result, name)


class _DistinctQuorumClient:
    """The manager's client to its manager server, returning quorums with distinct ids."""

    def __init__(self, client):
        self._client = client

    def _quorum(self, *args, **kwargs):
        return _Quorum(self._client._quorum(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._client, name)


class ReplicaGroup:
    """This process's view of its replica group in a torchft job (one per worker process)."""

    def __init__(self, cfg: FaultToleranceConfig, *, group_rank: int, group_world_size: int, device: torch.device):
        from torchft.manager import Manager
        from torchft.process_group import ProcessGroupGloo, ProcessGroupNCCL

        self.cfg = cfg
        self.group_rank, self.group_world_size = group_rank, group_world_size
        timeout = timedelta(seconds=cfg.timeout_seconds)
        host = cfg.host

        # Not torchft's HTTPTransport: it loads a peer's reply with weights_only=False from whatever address the
        # unauthenticated Lighthouse's quorum names (training/ft/heal_transport.py)
        # what a healing fetch accepts at most: 4x the registered state's tensors when registered (AdamW's
        # moments appear at the first step: model + 2 moments = 3x the model), plus 64 MiB of plain values
        self._state_bytes = 0
        self.transport = SignedHTTPTransport(host, timeout, max_bytes=lambda: 4 * self._state_bytes + (64 << 20))
        # A fresh store per incarnation of the group (no stale keys from a previous one): the
        # manager publishes its address there and the cross-replica process group meets there.
        store = None
        if group_rank == 0:
            store = dist.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=timeout)
        port = [store.port if store is not None else 0]
        if group_world_size > 1:
            dist.broadcast_object_list(port, src=0)
        self._store = store
        pg = ProcessGroupNCCL(timeout=timeout) if device.type == "cuda" else ProcessGroupGloo(timeout=timeout)
        self.manager = Manager(
            pg=pg, load_state_dict=None, state_dict=None, min_replica_size=cfg.required,
            use_async_quorum=False, init_sync=False, timeout=timeout,
            quorum_timeout=timedelta(seconds=cfg.quorum_timeout_seconds), connect_timeout=timeout,
            rank=group_rank, world_size=group_world_size, store_addr=host, store_port=port[0],
            lighthouse_addr=cfg.lighthouse, replica_id=replica_name(cfg.replica_id), hostname=host,
            checkpoint_transport=self.transport)
        self.manager._client = _DistinctQuorumClient(self.manager._client)
        self.healed: dict | None = None     # {"step", "seconds", "from"} once this group healed from a peer
        self.redone = 0                      # steps whose commit failed and were run again
        self._quorum_done = False            # the next step's quorum already happened (in join())

    def register(self, state_dict: Callable[[], dict], load_state_dict: Callable[[dict], None]) -> None:
        """What a healing peer receives: everything that defines the state at the start of a step."""
        self.manager.register_state_dict_fn("openpod", load_state_dict, state_dict)
        values, _ = tree_flatten(state_dict())
        self._state_bytes = sum(v.nbytes for v in values if isinstance(v, torch.Tensor))

    # ------------------------------------------------------------------ steps
    def _quorum(self) -> None:
        t0 = time.perf_counter()
        before = self.manager.current_step()
        self.manager.start_quorum()
        if self.manager.errored() is not None:  # this step will not commit and is run again after a new quorum
            log.warning("replica %s: quorum or healing failed: %s", self.cfg.replica_id, self.manager.errored())
        step = self.manager.current_step()
        if step != before:  # healed: the state of a peer at step `step` was received and loaded
            self.healed = {"step": step, "seconds": round(time.perf_counter() - t0, 4),
                           "participants": self.manager.num_participants()}
            log.warning("replica %s healed from a live peer at step %d in %.2fs", self.cfg.replica_id, step,
                        self.healed["seconds"])

    def join(self) -> bool:
        """The first quorum: heal from a peer that is ahead. False if none is (the job is starting, or every
        group restarted): the caller then restores its own checkpoint and :meth:`set_step` s to it."""
        self._quorum()
        if self.manager.current_step() > 0:
            self._quorum_done = True  # that quorum was this step's
            return True
        return False

    def set_step(self, step: int) -> None:
        self.manager.load_state_dict({"step": step, "batches_committed": 0})

    def begin_step(self) -> int:
        """Join this step's quorum (heal if behind); returns the global step to run."""
        if self._quorum_done:
            self._quorum_done = False
        else:
            self._quorum()
        return self.manager.current_step()

    def data_rank(self) -> tuple[int, int]:
        """(rank, world size) of this process among everyone training this step, for the data plan."""
        r = self.manager.participating_rank()
        if r is None:
            raise RuntimeError("this replica group is not participating in the quorum")
        return r * self.group_world_size + self.group_rank, self.manager.num_participants() * self.group_world_size

    def participants(self) -> int:
        return self.manager.num_participants()

    def allreduce_sum(self, t: torch.Tensor) -> None:
        """Sum ``t`` over the groups in place; a failure is recorded and makes :meth:`commit` return False."""
        from torch.distributed import ReduceOp

        self.manager.allreduce(t, reduce_op=ReduceOp.SUM).wait()

    def commit(self) -> bool:
        ok = self.manager.should_commit()
        if not ok:
            self.redone += 1
            log.warning("replica %s: step %d did not commit (%s); running it again", self.cfg.replica_id,
                        self.manager.current_step(), self.manager.errored())
        return ok

    def summary(self) -> dict:
        return {"mode": "replica", "replica_id": self.cfg.replica_id, "pid": os.getpid(), "healed": self.healed,
                "redone_steps": self.redone}

    def shutdown(self) -> None:
        self.manager.shutdown(wait=False)
