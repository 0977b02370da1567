"""``openpod queues --live`` and ``openpod jobs``: from a recorded cluster state (fixtures/live_cluster.json:
API objects as the API server lists them, Kueue v0.19.2 ClusterQueues and Workloads with status filled
in, JobSets of ``openpod submit``), through the in-memory boundary and through the real kubernetes
client against an HTTP endpoint that replays them."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from infra.cli import jobs as jobs_cli
from infra.cli.main import main
from infra.governance import live
from infra.spec.loading import load_spec
from tests.conftest import EXAMPLES, write_kubeconfig
from tests.governance import k8s_schema

RECORDED = json.loads(Path(__file__).with_name("fixtures").joinpath("live_cluster.json").read_text())
SPEC = str(EXAMPLES / "default.yaml")


def memory_api() -> live.InMemoryQueueApi:
    logs = {tuple(k.split("/")): v for k, v in RECORDED["logs"].items()}
    return live.InMemoryQueueApi(RECORDED["objects"], logs)


@pytest.fixture
def api(monkeypatch):
    a = memory_api()
    monkeypatch.setattr(jobs_cli, "connect", lambda kubeconfig, context: a)
    return a


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.skipif(not k8s_schema.schemas_present(), reason=k8s_schema.SKIP_REASON)
def test_recorded_cluster_queues_are_valid_kueue_objects_with_status():
    for o in RECORDED["objects"]:
        if o["kind"] == "ClusterQueue":
            assert k8s_schema.validate(o) == [], o["metadata"]["name"]


def test_queue_usage_from_cluster_queue_status():
    rows = {(u.team, u.group): u for u in live.queue_usage(load_spec(SPEC), memory_api().cluster_queues())}
    r = rows[("research", "trn2")]
    assert (r.nominal, r.in_use, r.borrowed, r.idle) == (1, 2, 1, 0)
    p = rows[("product", "trn2")]
    assert (p.nominal, p.in_use, p.borrowed, p.idle) == (2, 0, 0, 2)
    assert (rows[("research", "p5")].in_use, rows[("research", "p5")].pending) == (2, 1)


def test_openpod_queues_live(api):
    result = run("queues", "--spec", SPEC, "--live")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["TEAM", "GROUP", "NOMINAL", "IN", "USE", "BORROWED", "IDLE", "ADMITTED", "PENDING"]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines[1:7]}
    assert rows[("research", "trn2")] == ["1", "2", "1", "0", "2", "1"]
    assert rows[("product", "p5")] == ["1", "1", "0", "0", "1", "0"]


def test_openpod_queues_live_as_data(api):
    import yaml

    result = run("queues", "--spec", SPEC, "--live", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {(u["team"], u["group"]): u for u in data["usage"]}
    assert rows[("research", "trn2")] == {"team": "research", "group": "trn2", "nominal_nodes": 1, "in_use_nodes": 2,
                                          "borrowed_nodes": 1, "idle_nodes": 0, "admitted": 2, "pending": 1}
    assert yaml.safe_load(run("queues", "--spec", SPEC, "--live", "-o", "yaml").stdout) == data


def test_openpod_jobs_list_shows_kueue_state_flavor_and_preemptor(api):
    result = run("jobs", "list", "--team", "research")
    assert result.exit_code == 0, result.output
    by = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert by["sweep-p5"].split()[:5] == ["sweep-p5", "fine-tuning", "2", "Running", "p5"]
    assert by["trn-pretrain"].split()[3:5] == ["Admitted", "trn2"]
    assert "waiting for all pods to be ready" in by["trn-pretrain"]
    llama = by["llama-p5"]
    assert llama.split()[:5] == ["llama-p5", "training", "3", "Requeued", "-"]
    assert "evicted (Preempted); couldn't assign flavors to pod set" in llama
    assert "insufficient unused quota for nvidia.com/gpu in flavor p5" in llama
    assert llama.endswith("preempted by /openpod/product (reclamation within the cohort)")


def test_openpod_jobs_status_and_unknown_job(api):
    result = run("jobs", "status", "eval-p5", "--team", "product")
    assert result.exit_code == 0, result.output
    assert "state:     Running" in result.stdout and "flavor:    p5" in result.stdout
    bad = run("jobs", "status", "nope", "--team", "product")
    assert bad.exit_code == 2
    assert bad.stderr.strip() == "error: no job 'nope' in namespace product; jobs are: eval-p5"


def test_openpod_jobs_cancel_and_logs(api):
    result = run("jobs", "logs", "sweep-p5", "--team", "research", "--tail", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout == ("==> sweep-p5-node-0-0-x7k0q <==\nstep 1190 loss 2.109 tokens/s 415k\n"
                             "==> sweep-p5-node-0-1-x7k1q <==\nstep 1190 loss 2.109 tokens/s 415k\n")
    result = run("jobs", "cancel", "llama-p5", "--team", "research")
    assert result.exit_code == 0 and api.deleted == [("research", "llama-p5")]
    assert run("jobs", "cancel", "llama-p5", "--team", "research").stderr.strip() == \
        "error: no JobSet 'llama-p5' in namespace research"


# ----------------------------------------------------------------- the real client, replayed


class Replay(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def _send(self, code, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _items(self, kind, ns=None):
        return {"apiVersion": "v1", "kind": f"{kind}List", "metadata": {"resourceVersion": "483100"},
                "items": [o for o in RECORDED["objects"] if o["kind"] == kind
                          and (ns is None or o["metadata"].get("namespace") == ns)]}

    def do_GET(self):  # noqa: N802
        Replay.requests.append(("GET", self.path))
        path = self.path.split("?")[0]
        parts = path.strip("/").split("/")
        if path == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues":
            return self._send(200, self._items("ClusterQueue"))
        if path.startswith("/apis/kueue.x-k8s.io/v1beta2/namespaces/") and parts[-1] == "workloads":
            return self._send(200, self._items("Workload", parts[4]))
        if path.startswith("/apis/jobset.x-k8s.io/v1alpha2/namespaces/") and parts[-1] == "jobsets":
            return self._send(200, self._items("JobSet", parts[4]))
        return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

    def log_message(self, *args):
        pass


@pytest.fixture
def replay(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Replay.requests = []
    yield write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{server.server_address[1]}", "t")
    server.shutdown()
    server.server_close()


def test_the_kubernetes_client_reads_the_same_state(replay):
    result = run("jobs", "list", "--team", "research", "--kubeconfig", str(replay))
    assert result.exit_code == 0, result.output
    assert ("GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/research/workloads") in Replay.requests
    assert ("GET", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/research/jobsets") in Replay.requests
    assert "preempted by /openpod/product" in result.stdout
    result = run("queues", "--spec", SPEC, "--live", "--kubeconfig", str(replay))
    assert result.exit_code == 0, result.output
    assert ("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues") in Replay.requests
    assert any(line.split()[:2] == ["research", "trn2"] for line in result.stdout.splitlines())


def test_an_unreachable_cluster_is_one_error_line(tmp_path):
    from tests.conftest import free_port

    cfg = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}", "t")
    result = run("jobs", "list", "--team", "research", "--kubeconfig", str(cfg))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the cluster API server"), lines
