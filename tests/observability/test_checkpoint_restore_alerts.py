"""A restore that falls back to an older step, from the runtime's counters to the platform's alerts (the real
promtool): it is reported as what it is, and the "checkpoint saves are failing" alert stays silent."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from tests.observability.test_rules import Case, _alert_test
from tests.training.test_checkpoint import checkpointer, make_model, saved, tiers
from training.goodput import Goodput

ROOT = Path(__file__).resolve().parents[2]
RULES_FILE = ROOT / "docs" / "prometheus-rules.yaml"
TRAIN = {"job": "openpod-training", "namespace": "team-a", "training_job": "llm", "pod": "llm-node-0-0"}
NAMES = ("openpod_checkpoint_failures", "openpod_checkpoint_restored_older",
         "openpod_checkpoint_restore_source_failures")


def _fallback_restore(tmp_path):
    """Steps 2 and 4 saved in memory, NVMe and FSx; step 4 corrupt in all three: the restore takes step 2."""
    cfg = tiers(tmp_path)
    saved(tmp_path, cfg, steps=(2, 4))
    for tier in ("shm/n0", "nvme/n0", "fsx"):
        data = tmp_path / tier / "step_000000004/rank_00000/__0_0.distcp"
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    model, opt = make_model(seed=99)
    ck = checkpointer(tmp_path, cfg)
    info = ck.restore(model, opt)
    ck.close()
    return info, ck.stats


def _exported(prom: str) -> dict[str, float]:
    return {n: float(re.search(rf"^{n} (\S+)$", prom, re.M).group(1)) for n in NAMES}


def test_a_fallback_restore_fires_its_own_alert_and_not_the_save_failure_alert(tmp_path, promtool):
    """Failed on the old code: the fall-back was added into openpod_checkpoint_failures (1 here), the metric the
    "checkpoint saves are failing" alert reads, and had no metric of its own."""
    info, stats = _fallback_restore(tmp_path)
    assert info.step == 2 and stats.restored_older == 1
    assert stats.failures == 0, "a restore's fall-back is not a save failure"

    g = Goodput(tmp_path / "run", rank=0)
    g.persist(**stats.gauges())
    exported = _exported((tmp_path / "run" / "metrics.prom").read_text())
    assert exported == {"openpod_checkpoint_failures": 0.0, "openpod_checkpoint_restored_older": 1.0,
                        "openpod_checkpoint_restore_source_failures": 0.0}

    # As scraped: 0 while the pod restores (the metrics port is up from the start), then what the runtime exports.
    sel = ", ".join(f'{k}="{v}"' for k, v in TRAIN.items())
    series = [{"series": f"{n}{{{sel}}}", "values": f"0x3 {v:g}x40"} for n, v in exported.items()]
    job = {"namespace": "team-a", "training_job": "llm"}
    tests = [_alert_test(Case("OpenpodCheckpointSaveFailing", "20m", series)),
             _alert_test(Case("OpenpodCheckpointSourceUnreadable", "20m", series)),
             _alert_test(Case("OpenpodCheckpointRestoredOlder", "20m", series, [job],
                              ["Job team-a/llm resumed from an older checkpoint than its newest"])),
             _alert_test(Case("OpenpodCheckpointRestoredOlder", "70m", series))]
    (tmp_path / "rules.yaml").write_text(RULES_FILE.read_text())
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False))
    out = subprocess.run([promtool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_source_outage_at_restore_is_exported_apart_from_save_failures(tmp_path, monkeypatch):
    """FSx cannot be listed at restore: the restore goes on from NVMe, the outage is its own gauge."""
    cfg = tiers(tmp_path)
    saved(tmp_path, cfg, steps=(2,))
    ck = checkpointer(tmp_path, cfg)
    fsx = ck.tiers[2]

    def down():
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(fsx, "markers", down)
    monkeypatch.setattr("training.checkpoint.restore.time.sleep", lambda s: None)  # the retries' back-off
    model, opt = make_model(seed=99)
    info = ck.restore(model, opt)
    ck.close()
    assert info.step == 2
    assert ck.stats.gauges() == {"checkpoint_failures": 0, "restore_source_failures": 1, "restored_older": 0}
