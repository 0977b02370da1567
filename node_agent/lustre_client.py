"""Readiness: can this node mount FSx for Lustre?

The node's user data installs the Lustre client (``platform_constructs/instance_group.py``; the EKS
AL2023 AMIs ship none: fact fsx.lustre.client-al2023). A node where that failed joins the cluster anyway,
and the first job that mounts the team's FSx volume hangs in ContainerCreating. This check finds such a
node before it takes work.

The client registers the file system type ``lustre``: it is listed in ``/proc/filesystems`` once the
module is loaded, and ``MODULE_ALIAS_FS("lustre")`` lets a mount load it on demand (fact lustre.fs-type),
so a node is ready when either the type is registered or the module file is installed for the running
kernel. Detection only: what to do with the finding is the remediation controller's business.
"""

from __future__ import annotations

from pathlib import Path

from node_agent.findings import Action, Finding, Severity

RULE = "lustre-client-missing"
SOURCE = "fact fsx.lustre.client-al2023; fact lustre.fs-type"


def registered(proc_filesystems: str) -> bool:
    """Whether ``/proc/filesystems`` (lines ``[nodev]<TAB>name``) lists the ``lustre`` type."""
    return any(line.split()[-1] == "lustre" for line in proc_filesystems.splitlines() if line.split())


def module_files(modules_root: Path, kernel_release: str) -> list[Path]:
    """The Lustre client module files installed for ``kernel_release`` (``lustre.ko``, compressed or not)."""
    base = Path(modules_root) / kernel_release
    return sorted(base.rglob("lustre.ko*")) if base.is_dir() else []


def check_lustre_client(proc_filesystems: str, modules: list[Path]) -> list[Finding]:
    """No finding when the node can mount Lustre; one (replace: the user data that installs the client runs
    only on a new instance) when it cannot."""
    if registered(proc_filesystems) or modules:
        return []
    return [Finding(RULE, "lustre-client-missing", Severity.CRITICAL, Action.REPLACE,
                    "no 'lustre' in /proc/filesystems and no lustre.ko for the running kernel", SOURCE,
                    device="lustre")]


def read_and_check(proc: Path = Path("/proc"), modules_root: Path = Path("/lib/modules")) -> list[Finding]:
    """The check on a node: the host's ``/proc`` at ``proc`` and its ``/lib/modules`` at ``modules_root``."""
    proc = Path(proc)
    text = (proc / "filesystems").read_text() if (proc / "filesystems").exists() else ""
    release_file = proc / "sys" / "kernel" / "osrelease"
    release = release_file.read_text().strip() if release_file.exists() else ""
    return check_lustre_client(text, module_files(Path(modules_root), release) if release else [])
