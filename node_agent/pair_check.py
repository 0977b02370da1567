"""Two-node all-reduce check: a pair of nodes of one group all-reduce across the network, and the bus
bandwidth is compared with a floor derived from the instance table.

The single-node deep check (node_agent/deep_check.py) proves a node's GPUs and NVLink; only
traffic between nodes proves its EFA devices, cabling and fabric path. :func:`job` renders an
Indexed Job of two pods, one pinned to each node, that runs one of two tools:

- ``nccl-tests`` (NVIDIA groups): nccl-tests' ``all_reduce_perf`` launched by ``mpirun`` from the
  pod of index 0 over SSH to the other pod (nccl-tests runs across nodes only under MPI:
  NVIDIA/nccl-tests@v2.19.6:README.md:30,40-46). The image must carry nccl-tests built with ``MPI=1``,
  Open MPI, ``sshd`` and NCCL's EFA plugin; the platform builds none (``image`` is the caller's).
  A per-check SSH key pair and host key are rendered into a Secret.
- ``torch`` (CPU groups; NVIDIA by choice): ``python -m training.allreduce_bench`` under ``torchrun`` in the
  training image (CUDA, NCCL and aws-ofi-nccl over EFA: training/Dockerfile) with the NCCL backend on NVIDIA
  groups, gloo on CPU groups. It prints nccl-tests' table, so one parser reads both.

- ``nccom-test`` (Neuron groups): ``nccom-test -r <ranks> -N 2 ... allr --hosts <pod 0> <pod 1>`` from the
  pod of index 0, with ``NEURON_RT_ROOT_COMM_ID`` set to its own IP and a free port; it starts
  ``neuron-bench`` on both hosts through MPI over SSH (aws-neuron/aws-neuron-sdk@v2.32.0:
  tools/neuron-sys-tools/nccom-test.rst:170-172,319-336). Open MPI takes the SSH port and key from
  ``OMPI_MCA_plm_rsh_args``. The image must carry the Neuron tools (aws-neuronx-tools), Open MPI and ``sshd``.

Thresholds: :func:`floor_gbs` is ``FLOOR_FRACTION`` of the node's EFA bandwidth from the instance
table (cards x Gbps per card / 8). The fraction is an engineering estimate, not a measured or published
figure: no vendor number for two-node all_reduce_perf bus bandwidth per instance type was found. Treat a
failure as "investigate this pair", and replace the fraction with measurements from healthy pairs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from node_agent.deep_check import NEURON_CORES_PER_DEVICE, check_nccl, parse_all_reduce_perf
from node_agent.findings import Finding
from node_agent.rules import rule
from openpod_core import labels as L
from openpod_core.instance_types import Accelerator, InstanceType

NAMESPACE = "openpod-system"
SELECTOR = f"{L.DOMAIN}/pair-check"
FLOOR_FRACTION = 0.5      # of the node's EFA bandwidth; an estimate (module docstring)
RENDEZVOUS_PORT = 29500
SSH_PORT = 2222
SSH_DIR = "/etc/openpod-ssh"
MAX_BYTES = "8G"


def floor_gbs(itype: InstanceType) -> float:
    """Minimum bus bandwidth (GB/s) of a two-node all-reduce on ``itype``; 0 without EFA (not checked)."""
    return FLOOR_FRACTION * itype.efa_count * itype.efa_gbps_per_card / 8


@dataclass
class PairCheckResult:
    passed: bool
    busbw_gbs: float
    floor_gbs: float
    findings: list[Finding] = field(default_factory=list)


def decide(output: str, itype: InstanceType) -> PairCheckResult:
    """Pass when no size has wrong results and the largest size's bus bandwidth reaches :func:`floor_gbs`.

    ``output`` is the stdout of the pod of index 0 (any tool); ValueError when it holds no result table.
    """
    floor = floor_gbs(itype)
    if itype.accelerator is Accelerator.NEURON:
        rows = parse_nccom_test(output)
        if not rows:
            raise ValueError("nccom-test printed no result rows")
        busbw = max(rows)[1]
        findings = [] if busbw >= floor else [rule("neuron-check-fail").finding(
            f"nccom-test two-node busbw {busbw:.1f} GB/s at {max(rows)[0]} B < floor {floor} GB/s",
            busbw_gbs=busbw, floor_gbs=floor)]
        return PairCheckResult(passed=not findings, busbw_gbs=busbw, floor_gbs=floor, findings=findings)
    rows, _ = parse_all_reduce_perf(output)
    findings = check_nccl(output, floor)
    top = max(rows, key=lambda r: r.size)
    return PairCheckResult(passed=not findings, busbw_gbs=max(top.busbw_oop, top.busbw_ip), floor_gbs=floor,
                           findings=findings)


TOOLS = ("nccl-tests", "nccom-test", "torch")


def tool_for(itype: InstanceType) -> str:
    return {Accelerator.NVIDIA: "nccl-tests", Accelerator.NEURON: "nccom-test"}.get(itype.accelerator, "torch")


def parse_nccom_test(text: str) -> list[tuple[int, float]]:
    """(size in bytes, busbw GB/s) per row of ``nccom-test``'s table
    (aws-neuron/aws-neuron-sdk@v2.32.0:tools/neuron-sys-tools/nccom-test.rst:29-33,620-634: size(B) count(elems)
    type time(us) algbw(GB/s) busbw(GB/s), then "Avg bus bandwidth"). ValueError on a failed run."""
    header = next((line.split() for line in text.splitlines() if "busbw(GB/s)" in line and "size(B)" in line), None)
    if header is None:
        raise ValueError("not nccom-test output (no 'size(B) ... busbw(GB/s)' header)")
    if re.search(r"\d+ errors? found|Failure running", text):
        last = [line.strip() for line in text.splitlines() if line.strip()][-1]
        raise ValueError(f"nccom-test failed: {last}")
    size_i, bus_i = header.index("size(B)"), header.index("busbw(GB/s)")
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == len(header) and parts[size_i].isdigit():
            rows.append((int(parts[size_i]), float(parts[bus_i])))
    return rows


def _ranks_per_node(itype: InstanceType) -> int:
    if itype.accelerator is Accelerator.NEURON:
        return NEURON_CORES_PER_DEVICE.get(itype.accelerator_model, 2) * itype.accelerator_count
    return itype.accelerator_count if itype.accelerator is Accelerator.NVIDIA else 1


def _resources(itype: InstanceType) -> dict:
    limits: dict[str, str] = {"memory": "64Gi"}
    if itype.is_accelerated:
        limits[itype.device_resource] = str(itype.accelerator_count)
    if itype.efa_supported:
        limits[L.EFA_RESOURCE] = str(itype.efa_count)
        limits[L.HUGEPAGES_RESOURCE] = f"{L.EFA_HUGEPAGES_MI}Mi"
    return {"requests": dict(limits), "limits": dict(limits)}


def _torch_command(name: str, itype: InstanceType) -> list[str]:
    backend = "nccl" if itype.accelerator is Accelerator.NVIDIA else "gloo"
    return ["torchrun", "--nnodes", "2", "--nproc-per-node", str(_ranks_per_node(itype)),
            "--node-rank", "$(JOB_COMPLETION_INDEX)", "--master-addr", f"{name}-0.{name}",
            "--master-port", str(RENDEZVOUS_PORT),
            "-m", "training.allreduce_bench", "--backend", backend, "-b", "8", "-e", MAX_BYTES]


SSH_ARGS = f"-p {SSH_PORT} -i {SSH_DIR}/id_ed25519 -o UserKnownHostsFile={SSH_DIR}/known_hosts"
NCCOM_PORT = 45654  # NEURON_RT_ROOT_COMM_ID's port (nccom-test.rst:334 uses this one)


def _ssh_launch(name: str, launch: str) -> list[str]:
    """Both pods serve SSH; index 0 waits until its peer answers, then runs ``launch``; index 1 only serves."""
    sshd = (f"mkdir -p /run/sshd && /usr/sbin/sshd -p {SSH_PORT} -h {SSH_DIR}/ssh_host_ed25519_key "
            f"-o AuthorizedKeysFile={SSH_DIR}/authorized_keys -o PasswordAuthentication=no")
    wait = (f"for i in $(seq 120); do (exec 3<>/dev/tcp/{name}-1.{name}/{SSH_PORT}) 2>/dev/null && break; "
            f"sleep 5; done")
    return ["/bin/bash", "-c",
            f'{sshd} && if [ "$JOB_COMPLETION_INDEX" = 0 ]; then {wait}; {launch}; else sleep infinity; fi']


def _nccl_tests_command(name: str, itype: InstanceType) -> list[str]:
    n = _ranks_per_node(itype)
    hosts = f"{name}-0.{name}:{n},{name}-1.{name}:{n}"
    mpirun = ["mpirun", "--allow-run-as-root", "-np", str(2 * n), "-H", hosts, "--bind-to", "none",
              "--mca", "plm_rsh_args", SSH_ARGS, "-x", "FI_PROVIDER=efa", "-x", "FI_EFA_USE_DEVICE_RDMA=1",
              "-x", "NCCL_DEBUG=INFO", "all_reduce_perf", "-b", "8", "-e", MAX_BYTES, "-f", "2", "-g", "1"]
    return _ssh_launch(name, f"exec {shlex.join(mpirun)}")


def _nccom_test_command(name: str, itype: InstanceType) -> list[str]:
    nccom = ["nccom-test", "-r", str(2 * _ranks_per_node(itype)), "-N", "2", "-d", "fp32",
             "--minbytes", "8", "--maxbytes", "1gb", "--stepfactor", "2", "allr",
             "--hosts", f"{name}-0.{name}", f"{name}-1.{name}"]
    env = (f'export NEURON_RT_ROOT_COMM_ID="$(hostname -i | cut -d" " -f1):{NCCOM_PORT}" '
           f"OMPI_MCA_plm_rsh_args={shlex.quote(SSH_ARGS)} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
    return _ssh_launch(name, f"{env}; exec {shlex.join(nccom)}")


def ssh_secret(name: str) -> dict:
    """A Secret with a fresh SSH client key pair and host key for one check (never reused)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    def pair() -> tuple[str, str]:
        k = Ed25519PrivateKey.generate()
        private = k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                  serialization.NoEncryption()).decode()
        public = k.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        return private, public.decode()

    client, client_pub = pair()
    host, host_pub = pair()
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": f"{name}-ssh", "namespace": NAMESPACE, "labels": {SELECTOR: name}},
            "stringData": {"id_ed25519": client, "authorized_keys": client_pub + "\n",
                           "ssh_host_ed25519_key": host, "known_hosts": f"[{name}-1.{name}]:{SSH_PORT} {host_pub}\n"
                           f"[{name}-0.{name}]:{SSH_PORT} {host_pub}\n"}}


def job(name: str, itype: InstanceType, nodes: tuple[str, str], image: str, *, tool: str | None = None,
        timeout_seconds: int = 1800) -> list[dict]:
    """The objects of one check of ``nodes`` (node names), in apply order: [Secret,] Service, Job.

    ``tool`` defaults to :func:`tool_for`; ``torch`` is allowed on NVIDIA groups too, never on Neuron.
    """
    if len(nodes) != 2 or nodes[0] == nodes[1]:
        raise ValueError(f"nodes must be two different node names, got {list(nodes)}")
    chosen = tool or tool_for(itype)
    if chosen not in TOOLS:
        raise ValueError(f"tool must be one of {', '.join(TOOLS)}, got {chosen!r}")
    needs = {"nccl-tests": Accelerator.NVIDIA, "nccom-test": Accelerator.NEURON}.get(chosen)
    if needs is not None and itype.accelerator is not needs:
        raise ValueError(f"tool {chosen} needs a {needs.value} instance type, {itype.name} is not")
    if chosen == "torch" and itype.accelerator is Accelerator.NEURON:
        raise ValueError(f"tool torch does not drive Neuron devices ({itype.name}); use nccom-test")
    if not image:
        raise ValueError("image is required (the training image for torch; an nccl-tests + MPI image otherwise)")
    match = {SELECTOR: name}
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    objects: list[dict] = []
    if chosen in ("nccl-tests", "nccom-test"):
        secret = ssh_secret(name)
        objects.append(secret)
        volumes.append({"name": "ssh", "secret": {"secretName": secret["metadata"]["name"], "defaultMode": 0o400}})
        mounts.append({"name": "ssh", "mountPath": SSH_DIR, "readOnly": True})
        command = (_nccl_tests_command if chosen == "nccl-tests" else _nccom_test_command)(name, itype)
    else:
        command = _torch_command(name, itype)
    objects.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(match)},
                    "spec": {"clusterIP": "None", "selector": dict(match), "publishNotReadyAddresses": True}})
    pod_spec = {
        "subdomain": name, "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # the check needs no Kubernetes API
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": L.HOSTNAME, "operator": "In", "values": list(nodes)}]}]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": dict(match)}, "topologyKey": L.HOSTNAME}]},
        },
        # a node fresh from its single-node check may still carry the startup taint, and the controller holds
        # it with the pair-check taint until this check passes; a spare is a fine peer
        "tolerations": [{"key": L.STARTUP_TAINT, "operator": "Exists", "effect": "NoSchedule"},
                        {"key": L.PAIR_CHECK_TAINT, "operator": "Exists", "effect": "NoSchedule"},
                        {"key": L.HOT_SPARE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "all-reduce", "image": image, "command": command,
                        "resources": _resources(itype), "volumeMounts": mounts,
                        "ports": [{"containerPort": RENDEZVOUS_PORT if chosen == "torch" else SSH_PORT}]}],
        "volumes": volumes,
    }
    objects.append({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(match)},
        "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimit": 0,
                 "activeDeadlineSeconds": timeout_seconds, "ttlSecondsAfterFinished": 3600,
                 # index 0 holds the result; the other pod only serves (nccl-tests) or is a peer (torch)
                 "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
                 "template": {"metadata": {"labels": dict(match)}, "spec": pod_spec}},
    })
    return objects
