"""A slow rank in a lock-step job is named: two gloo ranks of the real trainer (DDP), rank 1 made slower in its
forward pass. Step times, what the old score read, are equal on both ranks (the gradient all-reduce holds rank 0
until rank 1 arrives); the compute time before that collective, what the score reads now, is not."""

from __future__ import annotations

import subprocess

import pytest
from prometheus_client import CollectorRegistry

from tests.conftest import free_port
from tests.training.conftest import PY, ROOT, cli_env
from training.ft.heartbeat import read_beats, straggler_scores
from training.straggler import COMPUTE, METRIC, StragglerCollector

pytestmark = pytest.mark.slow   # two torch processes: ~15-30 s on the shared 2-core machine

SLOW_S = 0.15  # added to every micro-batch forward of rank 1 (two micro-batches a step)

# One rank of a 2-rank job on one node, as the launcher would start it (env rendezvous, OPENPOD_FT_DIR).
SCRIPT = r"""
import os, sys, time
rank, ft_dir, data_dir, run_dir, slow = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
os.environ["OPENPOD_FT_DIR"] = ft_dir
from training import trainer
from training.config import CheckpointConfig, DataConfig, RunConfig
from training.data import ensure_dataset
from training.config import MODELS
from training.model import GPT

if rank == 1:  # the injected straggler: a slower forward (a throttled GPU, a noisy neighbour)
    loss_sum = GPT.loss_sum
    def slow_loss_sum(self, batch):
        time.sleep(slow)
        return loss_sum(self, batch)
    GPT.loss_sum = slow_loss_sum
m = MODELS["tiny"]
data = DataConfig(data_dir=data_dir, num_samples=64, samples_per_shard=32, global_batch=8, micro_batch=2)
if rank == 0:
    ensure_dataset(data_dir, seed=0, num_samples=64, samples_per_shard=32, seq_len=m.seq_len, vocab_size=m.vocab_size)
else:
    while not os.path.exists(os.path.join(data_dir, "ready")):
        time.sleep(0.05)
if rank == 0:
    open(os.path.join(data_dir, "ready"), "w").close()
cfg = RunConfig(model="tiny", steps=6, seed=0, run_dir=run_dir, data=data, device="cpu", parallelism="ddp",
                checkpoint=CheckpointConfig(enabled=False))


def main():
    trainer.train(cfg)


from training.process_exit import run_and_exit
run_and_exit(main)  # a process that ran gloo collectives (training/process_exit.py)
"""


def test_a_slow_rank_is_named_by_its_compute_time_not_its_step_time(tmp_path):
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = cli_env(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(
            [PY, "-c", SCRIPT, str(rank), str(tmp_path / "ft"), str(tmp_path / "data"), str(tmp_path / "run"),
             str(SLOW_S)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]

    beats = {b.rank: b for b in read_beats(tmp_path / "ft")}
    assert set(beats) == {0, 1} and all(b.step == 6 for b in beats.values())
    # lock-step: the old score (step time over the median) cannot tell the two ranks apart
    old = straggler_scores(list(beats.values()))
    assert abs(old[0] - old[1]) < 0.2, old
    # the compute time before the gradient all-reduce can
    assert beats[1].compute_time > beats[0].compute_time + SLOW_S, {r: b.compute_time for r, b in beats.items()}
    reg = CollectorRegistry()
    reg.register(StragglerCollector(tmp_path / "ft"))
    assert reg.get_sample_value(METRIC, {"rank": "1"}) > 1.5 > reg.get_sample_value(METRIC, {"rank": "0"})
    assert reg.get_sample_value(COMPUTE, {"rank": "1"}) == pytest.approx(beats[1].compute_time)
