"""Issue 24: durable tiers consistent job-wide. Two ranks' checkpointers in one process share an FSx directory
(sharded state: each rank writes its own part there); one rank's copies fail. A step is durable only when every
rank's part is there, so cadence, retries and retention must keep such a step."""

import dataclasses
import logging

import pytest

from training.checkpoint import Checkpointer, DirTier
from training.checkpoint import manager
from training.config import CheckpointConfig, TierConfig
from tests.training.test_checkpoint import make_model, train


def _ranks(tmp_path, monkeypatch, *, fsx_every=2, attempts=3, keep=2):
    monkeypatch.setattr(manager, "_has_dtensor", lambda state: True)  # sharded: every rank's part is its own
    cfg = CheckpointConfig(every=1, peer_replication=False, promote_attempts=attempts, promote_retry_s=0.0,
                           tiers=[TierConfig("memory", str(tmp_path / "shm"), keep=keep),
                                  TierConfig("nvme", str(tmp_path / "nvme"), keep=keep),
                                  TierConfig("fsx", str(tmp_path / "fsx"), keep=keep, every=fsx_every)])
    cks = [Checkpointer(cfg, rank=r, world_size=2, local_world_size=1, node_id=f"n{r}",
                        scratch_dir=tmp_path / f"scratch{r}") for r in range(2)]
    return cks, make_model()


def _save(cks, model, opt, steps):
    for s in steps:
        train(model, opt)
        for ck in cks:
            ck.save(s, model, opt)
            ck.flush()


def test_one_ranks_failed_copy_is_retried_and_the_ranks_copy_the_same_steps(tmp_path, monkeypatch):
    """Failed on the old code: rank 1's first copy of step 2 failed, so its own cadence counter moved it onto
    step 3 while rank 0 copied 2 and 4: FSx never held a step of both ranks."""
    monkeypatch.setenv("OPENPOD_FAULT_PUT", "fsx@2@1@1")  # rank 1's first try of step 2 fails
    cks, (model, opt) = _ranks(tmp_path, monkeypatch)
    _save(cks, model, opt, range(1, 5))
    for ck in cks:
        ck.close()
    fsx = DirTier("fsx", tmp_path / "fsx")
    assert fsx.index() == {2: {0, 1}, 4: {0, 1}}
    assert fsx.complete_steps(2) == [4, 2]
    assert cks[1].stats.promote_retried == 1 and cks[1].stats.promote_failed == {} and cks[1].stats.behind == {}


def test_retention_never_deletes_the_newest_step_every_rank_holds(tmp_path, monkeypatch, caplog):
    """Failed on the old code: rank 1's copies fail from step 2 on; rank 0 kept its newest two (3, 4) and
    deleted step 1, the only step both ranks held - no complete step left on FSx. Rank 1's failures are
    counted and its tier reported behind."""
    monkeypatch.setenv("OPENPOD_FAULT_PUT", "fsx@2@1,fsx@3@1,fsx@4@1")
    cks, (model, opt) = _ranks(tmp_path, monkeypatch, fsx_every=1, attempts=2)
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        _save(cks, model, opt, range(1, 5))
    for ck in cks:
        ck.close()
    fsx = DirTier("fsx", tmp_path / "fsx")
    assert fsx.complete_steps(2) == [1]
    assert fsx.index() == {1: {0, 1}, 3: {0}, 4: {0}}  # rank 0's own newest two, bounded
    assert cks[1].stats.promote_failed == {"fsx": 3} and cks[1].stats.behind == {"fsx": 4}
    assert "promoting step 4 to fsx" in caplog.text and "attempt 2 of 2" in caplog.text


def test_a_full_shared_tier_makes_room_without_dropping_the_newest_complete_step(tmp_path, monkeypatch):
    """A full FSx (ENOSPC on every copy of rank 1) costs copies, not training, and never the newest step both
    ranks hold."""
    cks, (model, opt) = _ranks(tmp_path, monkeypatch, fsx_every=1, attempts=2)
    _save(cks, model, opt, [1])             # both ranks' step 1
    monkeypatch.setenv("OPENPOD_FAULT_ENOSPC", "fsx@*@1")
    _save(cks, model, opt, [2, 3])
    for ck in cks:
        ck.close()
    fsx = DirTier("fsx", tmp_path / "fsx")
    assert fsx.complete_steps(2) == [1]
    assert cks[1].stats.behind == {"fsx": 3} and cks[0].stats.failures == 0


@pytest.mark.parametrize("replicated", [True, False])
def test_index_reads_names_only(tmp_path, monkeypatch, replicated):
    """Retention and completeness come from a listing of names: no commit marker is read."""
    cks, (model, opt) = _ranks(tmp_path, monkeypatch, fsx_every=1)
    if replicated:
        monkeypatch.setattr(manager, "_has_dtensor", lambda state: False)
    _save(cks, model, opt, [1, 2, 3])
    for ck in cks:
        ck.close()
    fsx = DirTier("fsx", tmp_path / "fsx")
    monkeypatch.setattr(DirTier, "markers", lambda self: pytest.fail("a marker was read"))
    if replicated:
        assert fsx.index() == {2: {0}, 3: {0}}
    else:
        assert fsx.index() == {2: {0, 1}, 3: {0, 1}}


@pytest.mark.slow
def test_a_failure_on_rank_1_alone_is_in_the_result_and_the_metrics(tmp_path):
    """Failed on the old code: the CLI printed rank 0's result ("promote_failed": {}) and metrics.prom held rank 0's
    count (0) while rank 1's every copy of step 10 into FSx failed."""
    from tests.training.conftest import cli_env, failure_text, last_json, run_cli, train_args

    args = train_args(tmp_path, steps=10, every=5, extra=["--parallelism", "fsdp", "--nvme-dir", str(tmp_path / "nv")])
    r = run_cli(args, env=cli_env(OPENPOD_FAULT_PUT="fsx@10@1"))
    assert r.returncode == 4, failure_text(r)  # its last step is not durable in FSx (issue 38)
    assert "error: the steps are done but the last checkpoint, step 10, is not durable in fsx (newest verified " \
           "step: 5)" in r.stderr
    ck = last_json(r.stdout)["checkpoints"]
    assert ck["promote_failed"] == {"fsx": 1} and ck["failed_ranks"] == [1], ck
    assert ck["behind"] == {"fsx": {"1": 10}} and ck["durable"] == {"fsx": 5}, ck
    assert ck["last_error"].startswith("rank 1: OSError: [Errno 5] injected failure"), ck
    assert "checkpoint copies failed on rank(s) 1" in r.stderr
    prom = next((tmp_path / "ck").rglob("metrics.prom")).read_text()
    assert "openpod_checkpoint_failures 1.0" in prom, prom


def _fake_parts(tier, tmp_path, step, ranks, world):
    from training.checkpoint.storage import Marker, describe_dir

    for r in ranks:
        d = tmp_path / "src" / f"{step}-{r}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "__0_0.distcp").write_bytes(bytes([r]) * 64)
        tier.put(d, Marker(step=step, rank=r, world_size=world, files=describe_dir(d), replicated=False))


def test_a_complete_step_is_read_from_one_manifest_not_one_marker_per_rank(tmp_path, moto_s3, bucket):
    """Issue 24, failed on the old code: every reader GETs every rank's marker of every step (about 2.1 M GETs
    per restore of 1024 ranks, keep 2). A step complete in S3 is now sealed into one manifest; an incomplete
    step is still read marker by marker; a rank deleting its part unseals the step first."""
    from training.checkpoint.storage import S3Tier

    s3 = S3Tier(f"s3://{bucket}/job", endpoint_url=moto_s3)
    _fake_parts(s3, tmp_path, 10, range(8), 8)
    _fake_parts(s3, tmp_path, 20, range(5), 8)  # ranks 5-7 did not get there
    assert s3.seal(10, 8) and not s3.seal(20, 8) and not s3.seal(10, 8)
    gets = []
    s3.s3.meta.events.register("before-parameter-build.s3.GetObject", lambda params, **kw: gets.append(params["Key"]))
    markers = s3.markers()
    assert sorted((m.step, m.rank) for m in markers) == [(10, r) for r in range(8)] + [(20, r) for r in range(5)]
    assert gets.count(f"job/step_{10:09d}/manifest.json") == 1 and len(gets) == 1 + 5
    s3.delete(10, 3)
    assert sorted({m.step for m in s3.markers()}) == [10, 20] and 3 not in {m.rank for m in s3.markers()
                                                                            if m.step == 10}
    assert s3.index()[10] == set(range(8)) - {3}


def test_a_sealed_step_in_a_directory_tier_is_read_from_its_manifest(tmp_path, monkeypatch):
    cks, (model, opt) = _ranks(tmp_path, monkeypatch, fsx_every=1)
    _save(cks, model, opt, [1, 2])
    for ck in cks:
        ck.close()
    fsx = DirTier("fsx", tmp_path / "fsx")
    assert (tmp_path / "fsx/step_000000002/manifest.json").exists()
    from training.checkpoint import storage

    monkeypatch.setattr(storage.Marker, "from_json", classmethod(lambda cls, t: pytest.fail("a marker was read")))
    assert sorted((m.step, m.rank) for m in fsx.markers()) == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_a_step_copied_again_into_a_sealed_tier_verifies_restores_and_is_reported(tmp_path, monkeypatch, caplog):
    """Issue 38, failed on the old code: a step already sealed in FSx and copied again (a rerun saving it anew)
    kept its old manifest, so every reader took the old markers for the new files - the step failed its hash
    check forever, a restore from FSx fell back to an older step, and the result still called it durable. The
    copy now uncommits the step first and the seal replaces the manifest; the result lists what verifies."""
    from training.checkpoint import state_sha256
    from training.checkpoint.storage import verify_dir

    cks, (model, opt) = _ranks(tmp_path, monkeypatch, fsx_every=1)
    _save(cks, model, opt, [1, 2])
    assert (tmp_path / "fsx/step_000000002/manifest.json").exists()
    _save(cks, model, opt, [2])  # the same step, another state: copied again into FSx
    want = state_sha256(cks[0].state(model, opt))
    for ck in cks:
        ck.close()
    fsx = DirTier("fsx", tmp_path / "fsx")
    for m in fsx.markers():
        verify_dir(fsx.snapshot_dir(m.step, m.rank), m, m.key)  # the markers a reader takes, against the files
    for d in ("shm", "nvme"):  # the restore must come from FSx
        __import__("shutil").rmtree(tmp_path / d)
    fresh, opt2 = make_model(seed=99)
    ck = Checkpointer(cks[0].cfg, rank=0, world_size=2, local_world_size=1, node_id="n0",
                      scratch_dir=tmp_path / "scratch-r")
    info = ck.restore(fresh, opt2)
    assert (info.step, info.source) == (2, f"fsx:{tmp_path}/fsx")
    assert state_sha256(ck.state(fresh, opt2)) == want
    ck.close()
    assert fsx.verify_step(2, 2) is None and cks[0].durable_steps() == {"fsx": 2}
    blob = tmp_path / "fsx/step_000000002/rank_00001/__0_0.distcp"
    blob.write_bytes(b"\0" * blob.stat().st_size)  # same size, other bytes: only the hash tells
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        assert cks[0].durable_steps() == {"fsx": 1}
    assert "step 2 in fsx" in caplog.text and "fails its blake3 check" in caplog.text


def test_a_step_copied_again_into_s3_replaces_its_manifest(tmp_path, moto_s3, bucket):
    """Issue 38, failed on the old code: the S3 copy of a sealed step put again kept the old manifest."""
    from training.checkpoint.storage import Marker, S3Tier, describe_dir, verify_dir

    s3 = S3Tier(f"s3://{bucket}/job", endpoint_url=moto_s3)
    _fake_parts(s3, tmp_path, 10, range(2), 2)
    assert s3.seal(10, 2)
    d = tmp_path / "again"
    d.mkdir()
    (d / "__0_0.distcp").write_bytes(b"new state" * 9)
    s3.put(d, Marker(step=10, rank=0, world_size=2, files=describe_dir(d), replicated=False))
    s3.seal(10, 2)
    m = next(m for m in s3.markers() if (m.step, m.rank) == (10, 0))
    verify_dir(s3.materialize(m, tmp_path / "scratch"), m, "s3")  # the marker a reader takes, against the copy
    assert not s3.seal(10, 2) and s3.verify_step(10, 2) is None  # replaced once, then unchanged
    from training.checkpoint.storage import manifest_bytes

    old = [dataclasses.replace(m, files={"__0_0.distcp": {"size": 81, "blake3": "0" * 64}})] + [
        x for x in s3.markers() if (x.step, x.rank) == (10, 1)]
    s3.s3.put_object(Bucket=bucket, Key="job/step_000000010/manifest.json", Body=manifest_bytes(10, old))
    assert "another copy's marker" in s3.verify_step(10, 2)  # what the old code left: not durable


def test_the_final_flush_copies_again_a_last_step_whose_shared_copy_does_not_verify(tmp_path, monkeypatch):
    """Issue 38, found by benchmarks/chaos_checkpoint.py (re-seal family), failed on the old code: the last step's
    FSx copy was damaged after the job ended (one rank's file truncated); the rerun found the rank's part listed
    in FSx and did not copy it again, so it exited 4 ("rerun the same command to promote it") - and so did every
    rerun. The final flush now copies again a part whose copy there does not match the node's."""
    cks, (model, opt) = _ranks(tmp_path, monkeypatch, fsx_every=1)
    _save(cks, model, opt, [1, 2])
    for ck in cks:
        ck.wait()
        ck.promoter.wait_idle()
    assert cks[0].durable_steps() == {"fsx": 2}
    blob = tmp_path / "fsx/step_000000002/rank_00001/__0_0.distcp"
    blob.write_bytes(blob.read_bytes()[:100])
    assert cks[0].durable_steps() == {"fsx": 1}
    assert [ck.finalize() for ck in cks] == [[], ["fsx"]]  # rank 1's part alone is copied again
    assert cks[0].durable_steps() == {"fsx": 2}
    for ck in cks:
        ck.close()
    assert DirTier("fsx", tmp_path / "fsx").verify_step(2, 2) is None


def test_the_final_flush_copies_a_last_step_restored_from_s3_into_fsx(tmp_path, moto_s3, bucket):
    """Issue 38, found by benchmarks/chaos_checkpoint.py (re-seal family), failed on the old code: a finished job's
    last step survived in S3 alone (node memory, NVMe and FSx lost it); the rerun restored it from S3 and exited 4
    ("rerun the same command to promote it") - and so did every rerun: only a part in a node directory was ever
    copied on. The final flush now fetches the part again into node memory and copies it into FSx."""
    import shutil

    from tests.training.test_checkpoint import checkpointer, tiers

    cfg = tiers(tmp_path, s3=f"s3://{bucket}/job", endpoint=moto_s3)
    cfg = dataclasses.replace(cfg, every=1, tiers=[dataclasses.replace(t, every=1) for t in cfg.tiers])
    model, opt = make_model()
    ck = checkpointer(tmp_path, cfg)
    _save([ck], model, opt, (1, 2))
    ck.close()
    for d in ("shm", "nvme", "fsx"):
        shutil.rmtree(tmp_path / d)
    fresh, opt2 = make_model(seed=99)
    ck = checkpointer(tmp_path, cfg)
    info = ck.restore(fresh, opt2)
    assert (info.step, info.source) == (2, f"s3:s3://{bucket}/job")
    assert ck.finalize() == ["fsx"]
    assert ck.durable_steps() == {"fsx": 2, "s3": 2}
    ck.close()


def test_the_final_flush_copies_another_ranks_replicated_part_when_this_ranks_was_never_committed(tmp_path):
    """Issue 38, found by benchmarks/chaos_checkpoint.py (final-flush family, ddp), failed on the old code: rank 0
    was killed before committing its part of the last step (replicated state) while rank 1 committed its own;
    the rerun restored the step from rank 1's part, but only rank 0 copies replicated state on, and only its own
    part - "no node-local copy of rank 0's part to promote", exit 4 on every rerun. The final flush now copies
    the restored part as rank 0's."""
    import shutil

    cfg = CheckpointConfig(every=1, peer_replication=False,
                           tiers=[TierConfig("memory", str(tmp_path / "shm")), TierConfig("nvme", str(tmp_path / "nvme")),
                                  TierConfig("fsx", str(tmp_path / "fsx"))])
    cks = [Checkpointer(cfg, rank=r, world_size=2, local_world_size=1, node_id="n0",
                        scratch_dir=tmp_path / f"scratch{r}") for r in range(2)]
    model, opt = make_model()
    _save(cks, model, opt, [1, 2])
    for ck in cks:
        ck.close()
    for d in ("shm/n0", "nvme/n0"):
        for p in (tmp_path / d / "step_000000002").glob("rank_00000*"):  # rank 0's part of step 2: never committed
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    shutil.rmtree(tmp_path / "fsx/step_000000002")
    fresh, opt2 = make_model(seed=99)
    ck = Checkpointer(cfg, rank=0, world_size=2, local_world_size=1, node_id="n0", scratch_dir=tmp_path / "s")
    info = ck.restore(fresh, opt2)
    assert info.step == 2
    assert ck.finalize() == ["fsx"]
    assert ck.durable_steps() == {"fsx": 2}
    ck.close()


class _ThreadRanks:
    """The restore's collectives across ranks run as threads of this process (each thread's rank in ``local``)."""

    def __init__(self, n):
        import threading

        self.barrier, self.slots, self.local = threading.Barrier(n, timeout=30), [None] * n, threading.local()

    def all_gather(self, obj, world_size):
        self.slots[self.local.rank] = obj
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out

    def all_ok(self, ok, world_size):
        return all(self.all_gather(ok, world_size))

    def run(self, fns):
        import threading

        out = [None] * len(fns)

        def one(r):
            self.local.rank = r
            out[r] = fns[r]()

        threads = [threading.Thread(target=one, args=(r,)) for r in range(len(fns))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return out


def test_a_newest_step_copied_by_some_ranks_alone_leaves_fsx_one_job_wide_step(tmp_path, monkeypatch, caplog):
    """Sharded, FSx copying step 2 while steps 4 and 6 are saved (6 replaces 4 in the queue: 4 is the fallback).
    Rank 1's copy of step 6 fails, rank 0's succeeds: rank 1 falls back to 4, rank 0 has no need to. FSx then
    holds rank 0's 6 and rank 1's 4, neither a step; the newest step every rank holds there, 2, is kept and
    verifies, the result reports it, and a restore from FSx takes step 2 on both ranks - never rank 0's 6 with
    rank 1's 4. (Checked on the code before this test: it held; the test keeps it so.)"""
    from training.checkpoint import restore, storage

    entered, release = __import__("threading").Event(), __import__("threading").Event()
    real = storage.put_fault

    def put_fault(kind, step, rank):
        if kind == "fsx" and step == 2:
            entered.set()
            assert release.wait(30)
        real(kind, step, rank)

    monkeypatch.setattr(storage, "put_fault", put_fault)
    monkeypatch.setenv("OPENPOD_FAULT_PUT", "fsx@6@1")
    cks, (model, opt) = _ranks(tmp_path, monkeypatch, fsx_every=1, attempts=1, keep=1)
    for ck in cks:
        ck.cfg.direct_durable = False
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        train(model, opt)
        for ck in cks:
            ck.save(2, model, opt)
            ck.wait()
        assert entered.wait(30)
        for s in (4, 6):
            train(model, opt)
            for ck in cks:
                ck.save(s, model, opt)
                ck.wait()
        release.set()
        for ck in cks:
            ck.flush()
    assert "falls back to step 4 after step 6's copy failed" in caplog.text
    fsx = DirTier("fsx", tmp_path / "fsx")
    assert fsx.index() == {2: {0, 1}, 4: {1}, 6: {0}}
    assert fsx.complete_steps(2) == [2] and fsx.verify_step(2, 2) is None
    assert [ck.durable_steps() for ck in cks] == [{"fsx": 2}] * 2
    for ck in cks:
        ck.close()
    for d in ("shm", "nvme"):  # the nodes are gone: the restore comes from FSx
        __import__("shutil").rmtree(tmp_path / d)
    group = _ThreadRanks(2)
    monkeypatch.setattr(restore, "all_gather", group.all_gather)
    monkeypatch.setattr(restore, "all_ok", group.all_ok)
    fresh = [Checkpointer(cks[0].cfg, rank=r, world_size=2, local_world_size=1, node_id=f"n{r}",
                          scratch_dir=tmp_path / f"scratch-r{r}") for r in range(2)]
    models = [make_model(seed=99) for _ in range(2)]
    infos = group.run([lambda r=r: fresh[r].restore(*models[r]) for r in range(2)])
    assert [(i.step, i.source) for i in infos] == [(2, f"fsx:{tmp_path}/fsx")] * 2
    for ck in fresh:
        ck.close()
