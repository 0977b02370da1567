"""The FSx facts openpod plan's rules stand on, against botocore's FSx model at the pinned version."""

from __future__ import annotations

import botocore
import botocore.loaders

from infra.deploy import plan_rules


def _model() -> dict:
    assert botocore.__version__ == "1.44.8"
    return botocore.loaders.create_loader().load_service_model("fsx", "service-2")


def _members(shape: str) -> dict:
    return _model()["shapes"][shape]["members"]


def test_efa_is_a_creation_setting_only():   # fact fsx.lustre.efa-create-only
    assert "EfaEnabled" in _members("CreateFileSystemLustreConfiguration")
    assert "EfaEnabled" not in _members("UpdateFileSystemLustreConfiguration")
    assert any(r.pointer.endswith("/EfaEnabled") and r.verdict == "replace" for r in plan_rules.UPDATE_REQUIRES)


def test_throughput_per_tib_is_updated_in_place():   # fact fsx.lustre.throughput-in-place
    doc = _members("UpdateFileSystemLustreConfiguration")["PerUnitStorageThroughput"]["documentation"]
    assert "increase or decrease" in doc
    assert not any(r.pointer.endswith("/PerUnitStorageThroughput") for r in plan_rules.UPDATE_REQUIRES)


def test_switching_to_automatic_metadata_iops_is_refused_above_what_automatic_gives():
    doc = _members("UpdateFileSystemLustreMetadataConfiguration")["Mode"]["documentation"]
    assert "rejects a switch to AUTOMATIC mode" in doc
    iops = _members("FileSystemLustreMetadataConfiguration")["Iops"]["documentation"]
    assert f"valid values are <code>{plan_rules.AUTOMATIC_METADATA_IOPS_MIN}</code>," in iops


def test_data_repository_associations_need_their_own_directory_and_s3_prefix():
    doc = _model()["operations"]["CreateDataRepositoryAssociation"]["documentation"]
    assert "must have a unique Amazon FSx file system directory and a unique S3 bucket or prefix" in doc
