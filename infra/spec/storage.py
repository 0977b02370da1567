"""``storage:``: FSx for Lustre and the S3 buckets (datasets, checkpoints, logs)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from infra.spec.base import SpecModel


class FsxSpec(SpecModel):
    storage_capacity_gib: int = Field(1200, ge=1200)
    throughput_per_tib: Literal[125, 250, 500, 1000] = 250
    compression: Literal["LZ4", "NONE"] = "LZ4"
    metadata_iops: int | None = Field(
        None, description="PERSISTENT_2 metadata IOPS; unset = AUTOMATIC mode"
    )
    mount_path: str = Field("/fsx", pattern=r"^/[A-Za-z0-9/_-]*$")
    data_repository_path: str = Field("/datasets", pattern=r"^/[A-Za-z0-9/_-]+$",
                                      description="FSx path linked to the datasets bucket")
    availability_zone: str | None = Field(None, description="defaults to the first spec AZ")
    automatic_backup_retention_days: int = Field(
        7, ge=0, le=90, description="days FSx keeps its daily automatic backups; 0 turns them off "
                                    "(range: FSx API LustreFileSystemConfiguration)")
    export_deletions: bool = Field(
        False, description="export deletions on the data repository path to the datasets bucket; off so "
                           "that deleting files on FSx never deletes dataset objects in S3")

    @field_validator("storage_capacity_gib")
    @classmethod
    def _capacity(cls, v: int) -> int:
        if v != 1200 and v % 2400:
            raise ValueError(f"{v} GiB not allowed; PERSISTENT_2 takes 1200 GiB or a multiple of 2400 GiB "
                             f"(nearest: {max(2400, round(v / 2400) * 2400)})")
        return v

    @field_validator("metadata_iops")
    @classmethod
    def _metadata(cls, v: int | None) -> int | None:
        allowed = (1500, 3000, 6000, 12000) + tuple(range(24000, 192001, 12000))
        if v is not None and v not in allowed:
            raise ValueError(f"{v} not allowed; use 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000")
        return v


class BucketSpec(SpecModel):
    versioned: bool = False
    transition_to_infrequent_access_days: int | None = Field(None, ge=30)
    transition_to_glacier_ir_days: int | None = Field(None, ge=1)
    expire_days: int | None = Field(None, ge=1)
    noncurrent_expire_days: int | None = Field(None, ge=1)
    object_lock_days: int | None = Field(
        None, ge=1, le=36500,
        description="S3 Object Lock default retention (days) for every new object version: no version can be "
                    "deleted or overwritten before then, whoever asks (deletes add delete markers; the "
                    "versions stay). Needs versioned: true; off by default")
    object_lock_mode: Literal["governance", "compliance"] = Field(
        "governance", description="governance: principals with s3:BypassGovernanceRetention may shorten it; "
                                  "compliance: nobody can, not even the account root")


class BucketsSpec(SpecModel):
    datasets: BucketSpec = BucketSpec(versioned=True, noncurrent_expire_days=30)
    checkpoints: BucketSpec = BucketSpec(
        versioned=True, transition_to_infrequent_access_days=30, transition_to_glacier_ir_days=90,
        noncurrent_expire_days=30,
    )
    logs: BucketSpec = BucketSpec(versioned=True, transition_to_infrequent_access_days=30, expire_days=365,
                                  noncurrent_expire_days=30)
    abort_incomplete_multipart_days: int = Field(7, ge=1)


class StorageSpec(SpecModel):
    fsx: FsxSpec = FsxSpec()
    buckets: BucketsSpec = BucketsSpec()
