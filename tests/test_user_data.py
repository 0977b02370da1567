"""Launch template user data: nodeadm MIME parts and the RAID0 of instance-store NVMe."""

from __future__ import annotations

import email
import shutil
import subprocess

import pytest

from platform_constructs.instance_group import LOCAL_NVME_MOUNT, user_data


def _parts(text: str) -> dict[str, str]:
    msg = email.message_from_string(text)
    assert msg.is_multipart()
    return {p.get_content_type(): p.get_payload() for p in msg.get_payload()}


def test_user_data_is_a_mime_multipart_nodeadm_understands():
    parts = _parts(user_data(local_nvme_raid0=True))
    assert set(parts) == {"application/node.eks.aws", "text/x-shellscript"}
    import yaml

    cfg = yaml.safe_load(parts["application/node.eks.aws"])
    assert cfg["kind"] == "NodeConfig" and cfg["apiVersion"] == "node.eks.aws/v1alpha1"
    assert cfg["spec"]["kubelet"]["config"]["shutdownGracePeriod"] == "120s"


def test_raid0_part_is_left_out_without_instance_store():
    assert set(_parts(user_data(local_nvme_raid0=False))) == {"application/node.eks.aws"}


def test_raid0_script_is_valid_bash_and_persists_across_reboots():
    script = _parts(user_data(local_nvme_raid0=True))["text/x-shellscript"]
    assert script.startswith("#!/bin/bash")
    assert f"MOUNT={LOCAL_NVME_MOUNT}" in script
    assert "mdadm --create" in script and "--level=0" in script and "mkfs.xfs" in script
    assert "systemctl enable --now openpod-local-nvme.service" in script
    if not shutil.which("bash"):
        pytest.skip("no bash")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    inner = script.split("<<'SCRIPT'\n", 1)[1].split("\nSCRIPT\n", 1)[0]
    subprocess.run(["bash", "-n"], input=inner, text=True, check=True)
