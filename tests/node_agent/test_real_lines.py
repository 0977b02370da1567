"""The kernel-log rules on real lines people posted (tests/node_agent/corpus): the split is by source, and the
tuning half keeps its scores. The test half is scored once for docs/node-agent.md, never asserted here."""

from __future__ import annotations

import hashlib

from tests.node_agent.corpus.score import rows, score


def test_split_is_by_source_and_fixed_by_the_url_hash():
    halves: dict[str, set[str]] = {}
    for r in rows():
        halves.setdefault(r["source"], set()).add(r["split"])
        assert r["split"] == ("tune" if hashlib.sha256(r["source"].encode()).digest()[0] % 2 == 0 else "test")
        assert set(r["acceptable"].split("|")) <= {"none", "reboot", "replace"}
    assert all(len(h) == 1 for h in halves.values())
    assert len(rows()) >= 150


def test_tuning_half_no_false_alarm_and_recall_at_least_0_9():
    s = score("tune")
    assert s.false_alarms == 0, s.alarms
    assert s.recall >= 0.9, s.misses
