"""The Lustre client readiness check against /proc/filesystems and /lib/modules trees.

The /proc/filesystems format (``[nodev]<TAB>name`` per line) is the kernel's (fs/filesystems.c,
filesystems_proc_show); the lines below are a node's, the ``lustre`` line as the client's
``lustre_fs_type`` registers it (fact lustre.fs-type).
"""

from __future__ import annotations

from node_agent.findings import Action
from node_agent.lustre_client import check_lustre_client, read_and_check, registered

WITHOUT = "nodev\tsysfs\nnodev\ttmpfs\nnodev\tproc\n\txfs\n\text4\nnodev\toverlay\n"
WITH = WITHOUT + "nodev\tlustre\n"


def test_a_loaded_client_is_ready():
    assert registered(WITH) and check_lustre_client(WITH, []) == []


def test_an_installed_but_unloaded_module_is_ready(tmp_path):
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "filesystems").write_text(WITHOUT)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text("6.12.46-66.121.amzn2023.x86_64\n")
    ko = tmp_path / "lib/modules/6.12.46-66.121.amzn2023.x86_64/extra/lustre-client/fs/lustre.ko.xz"
    ko.parent.mkdir(parents=True)
    ko.write_bytes(b"")
    assert read_and_check(tmp_path / "proc", tmp_path / "lib" / "modules") == []


def test_a_node_without_the_client_is_reported(tmp_path):
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "filesystems").write_text(WITHOUT)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text("6.12.46-66.121.amzn2023.x86_64\n")
    [f] = read_and_check(tmp_path / "proc", tmp_path / "lib" / "modules")
    assert f.rule == "lustre-client-missing" and f.action is Action.REPLACE
    assert not registered("nodev\tlustre_foo\n")
