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


def _switch_to_automatic(capacity_gib: int, iops: int) -> list[str]:
    lustre = {"StorageCapacity": capacity_gib,
              "LustreConfiguration": {"MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": iops}}}
    head = {"StorageCapacity": capacity_gib,
            "LustreConfiguration": {"MetadataConfiguration": {"Mode": "AUTOMATIC"}}}
    ctx = plan_rules.Context(base={"Fs": {"Type": "AWS::FSx::FileSystem", "Properties": lustre}},
                             head={"Fs": {"Type": "AWS::FSx::FileSystem", "Properties": head}},
                             old_of={}, replaced=set(), changed={"Fs": ["LustreConfiguration"]})
    return [m for m in plan_rules._file_system(ctx, "Fs") if "-> automatic" in m]


def test_switching_to_automatic_is_refused_only_above_what_automatic_gives_that_capacity():
    # fact fsx.lustre.metadata-automatic-iops: 1500 at 1200 GiB, 3000 at 2400, 6000 at 4800-9600, 12000 at
    # 12000-45600, then 12000 per 24000 GiB
    assert [plan_rules.automatic_metadata_iops(c) for c in (1200, 2400, 4800, 9600, 12000, 45600, 48000, 96000)] \
        == [1500, 3000, 6000, 6000, 12000, 12000, 24000, 48000]
    assert _switch_to_automatic(12000, 12000) == []          # what automatic gives: FSx takes the switch
    assert _switch_to_automatic(1200, 1500) == []
    assert _switch_to_automatic(4800, 12000)                  # above it: refused
    assert _switch_to_automatic(48000, 36000)
