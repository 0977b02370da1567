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
    from infra.spec import SpecError, parse_spec

    with pytest.raises(SpecError) as e:
        parse_spec(data, "bad.yaml")
    return [str(p) for p in e.value.problems]


def free_port() -> int:
    """A loopback TCP port nothing listens on (the OS picked it free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
