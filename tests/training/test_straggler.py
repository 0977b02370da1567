"""openpod_train_straggler_score is computed when Prometheus scrapes, not in the training step.

Each node's local rank 0 serves the score of its node's ranks (step time / their median) from their
heartbeat files. The old runtime read every heartbeat file after every optimizer step to set a gauge;
now a collector (training/straggler.py) reads them at scrape time, so the step does no file reads.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request

from prometheus_client import CollectorRegistry, start_http_server

from tests.conftest import free_port
from tests.training.conftest import PY, ROOT, cli_env
from training.ft.heartbeat import Heartbeat
from training.straggler import METRIC, StragglerCollector


def _beats(d, times):
    """rank r's step times ``times[r]``, as the ranks write them."""
    for r, step_time in enumerate(times):
        hb = Heartbeat(d, r)
        hb.beat(0, now=100.0)
        hb.beat(1, now=100.0 + step_time)


def test_the_score_is_read_from_the_heartbeats_when_scraped(tmp_path):
    reg = CollectorRegistry()
    reg.register(StragglerCollector(tmp_path))
    assert reg.get_sample_value(METRIC, {"rank": "0"}) is None  # no heartbeats yet: no sample
    _beats(tmp_path, [1.0, 1.5, 1.0])
    assert reg.get_sample_value(METRIC, {"rank": "1"}) == 1.5
    assert reg.get_sample_value(METRIC, {"rank": "0"}) == 1.0
    _beats(tmp_path, [1.0, 1.0, 3.0])  # the next scrape sees the new step times
    assert reg.get_sample_value(METRIC, {"rank": "1"}) == 1.0 and reg.get_sample_value(METRIC, {"rank": "2"}) == 3.0
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=reg)
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert f"# TYPE {METRIC} gauge" in text and f'{METRIC}{{rank="2"}} 3.0' in text


# A training run of one rank (the runtime's "plain python script" world of one) with the launcher's heartbeat
# directory and a metrics port: counts the heartbeat-file reads made inside Runtime.step_done, and scrapes the
# metrics endpoint after the last step.
SCRIPT = r"""
import builtins, json, os, sys, traceback, urllib.request
from pathlib import Path

ft_dir, data_dir, run_dir, port, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
os.environ["OPENPOD_FT_DIR"] = ft_dir
reads = {"in_step": 0, "other": 0}


def count(path):
    p = Path(path)
    if p.parent == Path(ft_dir) and p.name.startswith("rank-") and p.suffix == ".json":
        in_step = any(f.name in ("step_done", "persist") for f in traceback.extract_stack())
        reads["in_step" if in_step else "other"] += 1


real_read_text, real_open = Path.read_text, builtins.open


def read_text(self, *a, **kw):
    count(self)
    return real_read_text(self, *a, **kw)


def open_(file, mode="r", *a, **kw):
    if isinstance(file, (str, os.PathLike)) and "r" in mode:
        count(file)
    return real_open(file, mode, *a, **kw)


Path.read_text, builtins.open = read_text, open_

from training import runtime, trainer
from training.config import MODELS, CheckpointConfig, DataConfig, RunConfig
from training.data import ensure_dataset

m = MODELS["tiny"]
data = DataConfig(data_dir=data_dir, num_samples=64, samples_per_shard=32, global_batch=4, micro_batch=2)
ensure_dataset(data_dir, seed=0, num_samples=64, samples_per_shard=32, seq_len=m.seq_len, vocab_size=m.vocab_size)
cfg = RunConfig(model="tiny", steps=steps, seed=0, run_dir=run_dir, data=data, device="cpu", metrics_port=port,
                checkpoint=CheckpointConfig(enabled=False))
scraped = {}
step_done = runtime.Runtime.step_done


def step_done_then_scrape(self, step, *a, **kw):
    step_done(self, step, *a, **kw)
    self.goodput.persist()  # the ledger and metrics.prom, written at most once a second by step_done itself
    if step == steps - 1:
        scraped["text"] = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()


runtime.Runtime.step_done = step_done_then_scrape


def main():
    trainer.train(cfg)
    print(json.dumps({"reads": reads, "metrics": scraped.get("text", "")}))


from training.process_exit import run_and_exit
run_and_exit(main)  # a process that ran gloo collectives (training/process_exit.py)
"""


def test_a_training_step_reads_no_heartbeat_file_and_the_score_is_served(tmp_path):
    """Failed on the old code: every step read the node's heartbeat files (one read per rank per step); and, with
    the collector in the ledger's registry, every metrics.prom write (once a second) read them too."""
    steps = 6
    r = subprocess.run([PY, "-c", SCRIPT, str(tmp_path / "ft"), str(tmp_path / "data"), str(tmp_path / "run"),
                        str(free_port()), str(steps)], cwd=ROOT, env=cli_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["reads"]["in_step"] == 0
    assert f"# TYPE {METRIC} gauge" in out["metrics"]
    assert f'{METRIC}{{rank="0"}} 1.0' in out["metrics"]  # one rank: it is its own median
