"""`submit` without --dry-run talks to the API server through the real kubernetes client.

The server here is a local HTTP endpoint that records what the client sends and answers
like the API server (201 with the object, or a Status on refusal).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from infra.cli.main import main
from tests.conftest import EXAMPLES, write_kubeconfig
from tests.http_reply import reply


@pytest.fixture
def api_server(tmp_path):
    seen: list[tuple[str, str, dict]] = []
    answer = {"status": 201, "secrets": 201}

    class Handler(BaseHTTPRequestHandler):
        def do_DELETE(self):  # noqa: N802
            seen.append((f"DELETE {self.path}", self.headers.get("Authorization", ""), {}))
            data = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, self.headers.get("Authorization", ""), body))
            status = answer.get(self.path.rsplit("/", 1)[-1], answer["status"])  # per collection, e.g. "secrets"
            if status == 201:
                payload = {**body, "metadata": {**body["metadata"], "uid": "6f1c0e2a-uid"}}
            else:
                payload = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                           "message": "admission webhook \"vjobset.kb.io\" denied the request: bad"}
            reply(self, status, payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cfg = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{server.server_address[1]}", "secret-token")
    yield cfg, seen, answer
    server.shutdown()
    server.server_close()


ARGS = ["submit", "--spec", str(EXAMPLES / "default.yaml"), "--image", "i", "--name", "llama", "--team", "research",
        "--group", "p5", "--nodes", "2"]


def test_creates_the_jobset_in_the_team_namespace(api_server):
    cfg, seen, _ = api_server
    result = CliRunner().invoke(main, [*ARGS, "--kubeconfig", str(cfg), "--", "train.py"])
    assert result.exit_code == 0, result.output
    assert "jobset.jobset.x-k8s.io/llama created in namespace research" in result.stdout
    ((path, auth, body),) = seen
    assert path == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/research/jobsets"
    assert auth == "Bearer secret-token"
    assert body["kind"] == "JobSet" and body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"


def test_refusal_is_one_error_line(api_server):
    cfg, _, answer = api_server
    answer["status"] = 422
    result = CliRunner().invoke(main, [*ARGS, "--kubeconfig", str(cfg), "--", "train.py"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        'error: the API server refused the JobSet (422): admission webhook "vjobset.kb.io" denied the request: bad']


OPENPOD = ["--runtime", "openpod", "--", "--steps", "10", "--global-batch", "64"]


def test_openpod_jobs_get_a_peer_secret_owned_by_the_jobset(api_server):
    """The peer server authenticates every request with the job's secret (training/checkpoint/peer_auth.py)."""
    cfg, seen, _ = api_server
    result = CliRunner().invoke(main, [*ARGS, "--kubeconfig", str(cfg), *OPENPOD])
    assert result.exit_code == 0, result.output
    (js_path, _, js), (secret_path, _, secret) = seen
    assert js_path.endswith("/namespaces/research/jobsets")
    assert secret_path == "/api/v1/namespaces/research/secrets"
    assert secret["metadata"]["name"] == "llama-peer"
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "llama", "uid": "6f1c0e2a-uid"}]
    key = secret["stringData"]["OPENPOD_PEER_SECRET"]
    assert len(bytes.fromhex(key)) == 32
    env = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    ref = next(e for e in env if e["name"] == "OPENPOD_PEER_SECRET")["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "llama-peer", "key": "OPENPOD_PEER_SECRET", "optional": False}
    again = CliRunner().invoke(main, [*ARGS, "--kubeconfig", str(cfg), *OPENPOD])
    assert again.exit_code == 0, again.output
    assert seen[-1][2]["stringData"]["OPENPOD_PEER_SECRET"] != key  # one per job, never reused


def test_a_refused_secret_deletes_the_jobset_again(api_server):
    cfg, seen, answer = api_server
    answer["secrets"] = 403
    result = CliRunner().invoke(main, [*ARGS, "--kubeconfig", str(cfg), *OPENPOD])
    assert result.exit_code == 1
    assert "refused the Secret llama-peer (403)" in result.stderr and "the JobSet llama was deleted again" in result.stderr
    assert seen[-1][0] == "DELETE /apis/jobset.x-k8s.io/v1alpha2/namespaces/research/jobsets/llama"
