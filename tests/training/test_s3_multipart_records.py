"""Unfinished S3 multipart uploads are aborted by id, from records the writer keeps, never by listing the bucket's
uploads (s3:ListBucketMultipartUploads, which the platform does not grant teams). moto in server mode."""

from __future__ import annotations

import logging
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.training.conftest import PY, ROOT, cli_env
from training.checkpoint.storage import Marker, S3Tier, describe_dir

KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from training.checkpoint.storage import Marker, S3Tier, describe_dir

    uri, endpoint, src, step, rank, world = sys.argv[1:]
    tier = S3Tier(uri, endpoint_url=endpoint)
    parts = []

    def kill_at_the_second_part(**kw):
        parts.append(1)
        if len(parts) == 2:
            os.kill(os.getpid(), signal.SIGKILL)

    tier.s3.meta.events.register("before-call.s3.UploadPart", kill_at_the_second_part)
    src = Path(src)
    tier.put(src, Marker(step=int(step), rank=int(rank), world_size=int(world), files=describe_dir(src)))
""")


def _snapshot(tmp_path: Path, name: str = "snap", size: int = 12 << 20) -> Path:
    src = tmp_path / name
    src.mkdir()
    (src / "__0_0.distcp").write_bytes(bytes(range(256)) * (size // 256))  # above the 8 MiB multipart threshold
    return src


def _uploads(s3, bucket) -> list[str]:
    return sorted(u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def _deny_listing(tier: S3Tier, calls: list) -> None:
    """What IAM answers the platform's training role: it holds no s3:ListBucketMultipartUploads."""
    from botocore.exceptions import ClientError

    def deny(**kw):
        calls.append(1)
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListMultipartUploads")

    tier.s3.meta.events.register("before-call.s3.ListMultipartUploads", deny)


def _kill_a_writer(tmp_path, moto_s3, bucket, *, step: int, rank: int, world: int) -> None:
    src = _snapshot(tmp_path, f"killed-{step}-{rank}")
    env = cli_env(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    r = subprocess.run([PY, "-c", KILLED_WRITER, f"s3://{bucket}/job1", moto_s3, str(src), str(step), str(rank),
                        str(world)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr[-2000:]


def test_a_killed_writers_upload_is_aborted_by_id_without_listing_the_buckets_uploads(tmp_path, moto_s3, bucket,
                                                                                       caplog):
    """Ranks 0 and 1 are SIGKILLed in the middle of a multipart copy to S3. The next process's rank 0 aborts its
    own upload at its first copy, with s3:ListBucketMultipartUploads denied, and leaves rank 1's alone while the
    job has 2 ranks (rank 1 may be uploading); on 1 rank, rank 0 aborts rank 1's too. Failed on the old code: it
    found the uploads only by listing the bucket's, which IAM refuses, so both stayed until the lifecycle rule."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_s3)
    _kill_a_writer(tmp_path, moto_s3, bucket, step=4, rank=0, world=2)
    _kill_a_writer(tmp_path, moto_s3, bucket, step=4, rank=1, world=2)
    assert _uploads(s3, bucket) == ["job1/step_000000004/rank_00000/__0_0.distcp",
                                    "job1/step_000000004/rank_00001/__0_0.distcp"]

    small = _snapshot(tmp_path, "next", size=1024)
    tier = S3Tier(f"s3://{bucket}/job1", endpoint_url=moto_s3)
    listed: list = []
    _deny_listing(tier, listed)
    with caplog.at_level(logging.INFO, logger="training.checkpoint"):
        tier.put(small, Marker(step=5, rank=0, world_size=2, files=describe_dir(small)))
    assert _uploads(s3, bucket) == ["job1/step_000000004/rank_00001/__0_0.distcp"]
    assert "aborted incomplete multipart upload" in caplog.text and "cannot abort" not in caplog.text

    resized = S3Tier(f"s3://{bucket}/job1", endpoint_url=moto_s3)  # the job restarts on one rank
    _deny_listing(resized, listed)
    resized.put(small, Marker(step=6, rank=0, world_size=1, files=describe_dir(small)))
    assert _uploads(s3, bucket) == []
    assert listed == []  # never asked
    assert s3.list_objects_v2(Bucket=bucket, Prefix="job1/_multipart/").get("KeyCount", 0) == 0
    assert [m.step for m in tier.markers()] == [6, 5]  # the records are not steps


def test_a_failed_copys_upload_is_aborted_by_id(tmp_path, moto_s3, bucket):
    """A copy fails after some parts reached S3; the promoter's delete() aborts its upload by id, listing
    denied. Failed on the old code (the abort listed the bucket's uploads)."""
    import boto3

    src = _snapshot(tmp_path)
    tier = S3Tier(f"s3://{bucket}/job1", endpoint_url=moto_s3)
    listed: list = []
    _deny_listing(tier, listed)
    tier._swept.add(0)  # this process swept already: only the failed copy's own upload is left to abort
    parts = {"n": 0}
    abort_by_transfer = []

    def fail_second_part(**kwargs):
        parts["n"] += 1
        if parts["n"] == 2:
            raise ConnectionError("connection reset while uploading a part")

    def s3transfer_gives_up_without_aborting(**kwargs):  # as if its own abort call had failed too
        abort_by_transfer.append(1)
        raise ConnectionError("connection reset")

    tier.s3.meta.events.register("before-call.s3.UploadPart", fail_second_part)
    tier.s3.meta.events.register("before-call.s3.AbortMultipartUpload", s3transfer_gives_up_without_aborting)
    with pytest.raises(Exception):
        tier.put(src, Marker(step=3, rank=0, world_size=1, files=describe_dir(src)))
    s3 = boto3.client("s3", endpoint_url=moto_s3)
    assert _uploads(s3, bucket) == ["job1/step_000000003/rank_00000/__0_0.distcp"]
    tier.s3.meta.events.unregister("before-call.s3.AbortMultipartUpload", s3transfer_gives_up_without_aborting)
    tier.delete(3, 0)  # what the promoter does after a failed copy
    assert _uploads(s3, bucket) == [] and listed == [] and tier.markers() == []
    assert s3.list_objects_v2(Bucket=bucket, Prefix="job1/_multipart/").get("KeyCount", 0) == 0


def test_a_completed_copy_leaves_no_record_and_records_are_read_once_per_process(tmp_path, moto_s3, bucket):
    src = _snapshot(tmp_path)
    tier = S3Tier(f"s3://{bucket}/job1", endpoint_url=moto_s3)
    reads = []
    tier.s3.meta.events.register("before-call.s3.ListObjectsV2",
                                 lambda params, **kw: reads.append(1) if "_multipart" in str(params) else None)
    for step in (1, 2, 3):
        tier.put(src, Marker(step=step, rank=0, world_size=1, files=describe_dir(src)))
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_s3)
    assert _uploads(s3, bucket) == []
    assert s3.list_objects_v2(Bucket=bucket, Prefix="job1/_multipart/").get("KeyCount", 0) == 0
    assert len(reads) == 1
    assert [m.step for m in tier.markers()] == [3, 2, 1]


def test_a_sweep_that_cannot_run_is_tried_again_at_the_next_copy(tmp_path, moto_s3, bucket, caplog):
    """S3 fails while a failed copy's upload is being aborted: one warning, the copy path goes on, and the next
    copy reads the records again and aborts it."""
    import boto3

    src = _snapshot(tmp_path)
    tier = S3Tier(f"s3://{bucket}/job1", endpoint_url=moto_s3)
    tier.put(_snapshot(tmp_path, "first", size=1024), Marker(step=1, rank=0, world_size=1,
                                                             files=describe_dir(tmp_path / "first")))
    parts = {"n": 0}

    def fail_second_part(**kwargs):
        parts["n"] += 1
        if parts["n"] == 2:
            raise ConnectionError("connection reset while uploading a part")

    def outage(**kwargs):
        raise ConnectionError("S3 unreachable")

    tier.s3.meta.events.register("before-call.s3.UploadPart", fail_second_part)
    tier.s3.meta.events.register("before-call.s3.AbortMultipartUpload", outage)
    with pytest.raises(Exception):
        tier.put(src, Marker(step=2, rank=0, world_size=1, files=describe_dir(src)))
    with caplog.at_level(logging.WARNING, logger="training.checkpoint"):
        tier.delete(2, 0)
    assert "cannot abort incomplete multipart uploads" in caplog.text
    s3 = boto3.client("s3", endpoint_url=moto_s3)
    assert _uploads(s3, bucket) == ["job1/step_000000002/rank_00000/__0_0.distcp"]
    tier.s3.meta.events.unregister("before-call.s3.AbortMultipartUpload", outage)
    tier.s3.meta.events.unregister("before-call.s3.UploadPart", fail_second_part)
    small = _snapshot(tmp_path, "next", size=1024)
    tier.put(small, Marker(step=3, rank=0, world_size=1, files=describe_dir(small)))
    assert _uploads(s3, bucket) == []
    assert s3.list_objects_v2(Bucket=bucket, Prefix="job1/_multipart/").get("KeyCount", 0) == 0


def test_parametrized_tests_get_buckets_of_their_own():
    """Failed on the old fixture (found on the GPU machine): it took the first 40 characters of the test's name, so
    both cases of ``test_world1_fsdp_resume_from_s3_is_exact`` wrote to one bucket; the second, on the same worker's
    moto server, restored the first's step 30 and its kill never fired."""
    import re

    from tests.training.conftest import bucket_name

    ids = ["tests/gpu/test_resume_cuda.py::test_world1_fsdp_resume_from_s3_is_exact[overlap]",
           "tests/gpu/test_resume_cuda.py::test_world1_fsdp_resume_from_s3_is_exact[no-overlap]",
           "tests/training/test_x.py::test_" + "a" * 80, "tests/training/test_y.py::test_" + "a" * 80]
    names = [bucket_name(i) for i in ids]
    assert len(set(names)) == len(names), names
    for n in names:
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", n), n
