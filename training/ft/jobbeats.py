"""The job's heartbeats in its store (``--restart in-process``): every node's launcher sees every rank.

A rank writes its beat to a file on its node (training/ft/heartbeat.py); a launcher reads only its own
node's files. On several nodes that is not enough to name a hang's culprit: a rank of node 1 that stops
advancing leaves node 0's ranks waiting in the step's collective, and node 0's files show only ranks
that began the step and went quiet. So each launcher publishes its node's beats, about once a second,
to the job's store (the launcher of node 0 hosts it: training/ft/inprocess.py), under one key per node
(``openpod/beats/node-<i>``: the launcher's clock and its ranks' beats), and judges the hang from every
node's: the culprits (the ranks that did not begin the step the others began) are the same on every
node, and only the launcher that runs them kills them.

Beats carry the in-process generation they were written in; only those of the store's current
generation are judged (a survivor's beat from before a recovery is stale until it writes a new one).
Times are each node's boot clock (training/ft/clock.py), which no wall-clock step moves and which differs from
node to node: a reader rebases another node's beats into its own clock (:func:`current`, from when it saw that
node's publication change), so no two nodes' clocks need agree.

Cost: one ``set`` and one ``multi_get`` of N keys per launcher per second (N nodes).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from dataclasses import replace

from training.ft import clock
from training.ft.heartbeat import Beat

KEY = "openpod/beats/node-{}"


@dataclass(frozen=True)
class NodeBeats:
    node: int
    time: float | None  # when its launcher last published (None: never yet)
    beats: tuple[Beat, ...] = ()


def init(store, nnodes: int) -> None:
    """Node 0's launcher, before it announces generation 0: every node's key exists (multi_get never waits)."""
    for i in range(nnodes):
        store.set(KEY.format(i), "")


def publish(store, node: int, beats: list[Beat], now: float | None = None) -> None:
    store.set(KEY.format(node), json.dumps({"time": clock.now() if now is None else now,
                                            "beats": [b.__dict__ for b in beats]}))


def gather(store, nnodes: int) -> list[NodeBeats]:
    out = []
    for i, raw in enumerate(store.multi_get([KEY.format(i) for i in range(nnodes)])):
        if not raw:
            out.append(NodeBeats(i, None))
            continue
        d = json.loads(raw)
        out.append(NodeBeats(i, d["time"], tuple(Beat(**b) for b in d["beats"])))
    return out


def current(nodes: list[NodeBeats], generation: int, seen: dict[int, tuple] | None = None,
            own: int | None = None) -> tuple[list[Beat], dict[int, int]]:
    """The beats of ``generation`` from every node, and each of their ranks' node. With ``seen`` (node ->
    (its publication's time, the reader's clock when the reader saw that publication first)), another node's
    beat times are moved into the reader's clock: a beat ``a`` seconds older than its publication is ``a``
    seconds older than the moment the reader first saw it. ``own``: the reader's node (its clock already)."""
    out = []
    for n in nodes:
        shift = 0.0
        if seen is not None and n.node != own and n.time is not None:
            t, at = seen.get(n.node, (None, None))
            shift = at - n.time if t == n.time and at is not None else 0.0
        for b in n.beats:
            if b.generation != generation:
                continue
            if shift:
                b = replace(b, **{k: getattr(b, k) + shift for k in ("time", "started_time", "phase_time")
                                  if getattr(b, k) > 0})
            out.append(b)
    return out, {b.rank: n.node for n in nodes for b in n.beats}
