import os
import socket
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "examples"

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def example_data(name: str = "default.yaml") -> dict:
    """An example spec as plain data, to edit in a test."""
    return yaml.safe_load((EXAMPLES / name).read_text())


def on_kubernetes(data: dict, version: str) -> dict:
    """``data`` at ``eks.version`` ``version``, without the groups (and their quotas) that version cannot run
    (multi-node NVLink needs Kubernetes >= 1.33: openpod_core/accelerator_stack.py)."""
    from openpod_core import accelerator_stack, instance_types

    data["eks"]["version"] = version
    dropped = {g["name"] for g in data["instance_groups"]
               if not accelerator_stack.kubernetes_supports(instance_types.get(g["instance_type"]), version)}
    data["instance_groups"] = [g for g in data["instance_groups"] if g["name"] not in dropped]
    for t in data.get("teams", []):
        for name in dropped:
            t.get("quotas", {}).pop(name, None)
    return data


def spec_problems(data) -> list[str]:
    """The problems parse_spec reports for ``data`` (it must refuse it), one string each."""
    from infra.spec.base import SpecError
    from infra.spec.loading import parse_spec

    with pytest.raises(SpecError) as e:
        parse_spec(data, "bad.yaml")
    return [str(p) for p in e.value.problems]


# Ports handed out by free_port(): below Linux's ephemeral range (32768-60999 by default, where the OS picks
# outgoing and port-0 sockets), split between the xdist workers, handed out in turn. Two multi-process tests on
# different workers then never get the same port, which "bind to port 0 and close" could not promise: CI once
# saw EADDRINUSE on a torchrun rendezvous port another worker's test had been given a moment before.
_PORTS = (15000, 32000)


def _port_sequence():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index, count = int(worker[2:] or 0), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    span = (_PORTS[1] - _PORTS[0]) // max(count, 1)
    low = _PORTS[0] + span * (index % max(count, 1))
    start = os.getpid() % span
    return (low + (start + i) % span for i in range(span))


_ports = None


def free_port() -> int:
    """A loopback TCP port nothing listens on, from this xdist worker's own range (never another worker's)."""
    global _ports
    for _ in range(2):
        if _ports is None:
            _ports = _port_sequence()
        for port in _ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use, or lingering after an earlier test
                return port
        _ports = None  # wrapped around: start again
    raise RuntimeError(f"no free loopback port in {_PORTS} for this worker")


def write_kubeconfig(path: Path, server: str, token: str) -> Path:
    """A minimal kubeconfig: one cluster at ``server``, one user authenticating with ``token``."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": token}}],
    }))
    return path


@pytest.fixture(scope="session")
def moto_endpoint():
    """A real moto HTTP server (server mode) on loopback for this test process."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` run first (otherwise in collection order): CI's workers take tests one at a time, so
    a minutes-long multi-process test does not start last while the other worker has nothing left to do.
    Tried on the 2-core VM, 2026-11-27 (full suite, one run each): this order 709 s; the synthesis group and the
    training tests first, then the rest, 731 s; the other tests spread between the training tests, 764 s."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
