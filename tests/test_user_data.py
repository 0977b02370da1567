"""Launch template user data: nodeadm MIME parts and the RAID0 of instance-store NVMe."""

from __future__ import annotations

import email
import shutil
import subprocess

import pytest

from openpod_core import labels
from infra.governance import job_request
from platform_constructs.instance_group import HUGEPAGES_SYSCTL_FILE, LOCAL_NVME_MOUNT, hugepages_count, user_data


def _parts(text: str) -> dict[str, str]:
    msg = email.message_from_string(text)
    assert msg.is_multipart()
    return {p.get_content_type(): p.get_payload() for p in msg.get_payload()}


def _scripts(text: str) -> list[str]:
    """The shell script parts, in the order cloud-init runs them."""
    return [p.get_payload() for p in email.message_from_string(text).get_payload()
            if p.get_content_type() == "text/x-shellscript"]


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


def test_efa_nodes_preallocate_the_hugepages_pods_request_before_anything_else():
    # One constant: what `openpod submit` requests by default is what EFA nodes preallocate.
    assert job_request.DEFAULT_HUGEPAGES_MI == labels.EFA_HUGEPAGES_MI
    pages = hugepages_count(labels.EFA_HUGEPAGES_MI)
    assert pages * labels.HUGEPAGE_SIZE_MI >= job_request.DEFAULT_HUGEPAGES_MI and pages == 2560
    scripts = _scripts(user_data(local_nvme_raid0=True, hugepages_mib=labels.EFA_HUGEPAGES_MI))
    assert len(scripts) == 2 and "mdadm" in scripts[1]  # hugepages first: least fragmented memory
    script = scripts[0]
    assert script.startswith("#!/bin/bash")
    # Persisted for systemd-sysctl (every reboot, before kubelet) and applied now (first boot: cloud-init
    # runs user scripts before nodeadm-run starts kubelet).
    assert f'echo "vm.nr_hugepages = {pages}" > {HUGEPAGES_SYSCTL_FILE}' in script
    assert f"sysctl -q -p {HUGEPAGES_SYSCTL_FILE}" in script
    assert HUGEPAGES_SYSCTL_FILE.startswith("/etc/sysctl.d/") and HUGEPAGES_SYSCTL_FILE.endswith(".conf")
    if shutil.which("bash"):
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_no_hugepages_part_without_hugepages_and_odd_sizes_refused():
    assert _scripts(user_data(local_nvme_raid0=False)) == []
    assert _scripts(user_data(local_nvme_raid0=False, hugepages_mib=0)) == []
    for bad in (-2, 5121):
        with pytest.raises(ValueError, match="hugepages_mib must be 0 or more and a multiple of 2"):
            user_data(local_nvme_raid0=False, hugepages_mib=bad)


def test_the_lustre_client_is_installed_before_kubelet_when_asked():
    """The EKS AL2023 AMIs ship no Lustre client (awslabs/amazon-eks-ami#2696); the package name is the FSx
    guide's for AL2023 (fact fsx.lustre.client-al2023)."""
    from openpod_core.facts.register import fact
    from platform_constructs.instance_group import LUSTRE_CLIENT_PACKAGE

    assert "dnf install -y lustre-client" in fact("fsx.lustre.client-al2023").value
    [script] = _scripts(user_data(local_nvme_raid0=False, lustre_client=True))
    assert f"dnf install -y -q {LUSTRE_CLIENT_PACKAGE}" in script and "modprobe lustre" in script
    assert "grep -qw lustre /proc/filesystems" in script     # a reboot with the client loaded does nothing
    assert _scripts(user_data(local_nvme_raid0=False)) == []
