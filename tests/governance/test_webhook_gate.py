"""The Kueue webhook readiness gate's handler against a TLS API-server stand-in.

The stand-in answers like the API server does while Kueue's certificates bootstrap:
HTTP 500 with a Status whose message is the one kubernetes-sigs/kueue#13036 quotes
("failed calling webhook ... 502 Bad Gateway"), then 201 for the dry-run create.
The handler verifies the server against the CA it is given, as in a real cluster.
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import subprocess
import threading
from urllib.parse import parse_qs, urlparse

import pytest

from infra.governance import install
from platform_constructs.handlers.kueue_webhook_gate import index as gate
from tests.http_reply import reply

BOOTSTRAP_502 = ('Internal error occurred: failed calling webhook "mresourceflavor.kb.io": failed to call webhook: '
                 'Post "https://kueue-webhook-service.kueue-system.svc:443/mutate-kueue-x-k8s-io-v1beta2-'
                 'resourceflavor?timeout=10s": proxy error from localhost:9443 while dialing 10.244.0.7:9443, '
                 'code 502: 502 Bad Gateway')


def _status(code: int, reason: str, message: str) -> dict:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": message}


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 and its PEM, base64 as EKS reports certificateAuthority.data."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=kube",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "key.pem"), "-out",
                    str(d / "cert.pem")], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem", base64.b64encode((d / "cert.pem").read_bytes()).decode()


class ApiServer:
    """Answers POSTs with the next (status, body) of ``answers`` (the last one repeats) and records requests."""

    def __init__(self, tls, answers: list[tuple[int, dict]]) -> None:
        self.answers, self.requests = list(answers), []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, dict(self.headers), body))
                status, payload = server.answers.pop(0) if len(server.answers) > 1 else server.answers[0]
                reply(self, status, payload)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls[0]), str(tls[1]))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.endpoint = f"https://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def _wait(api_endpoint, ca, clock, timeout_s=600, token=lambda: "k8s-aws-v1.test"):
    return gate.wait_ready(endpoint=api_endpoint, ca_data=ca, path=install.KUEUE_WEBHOOK_PROBE_PATH,
                           probe=install.KUEUE_WEBHOOK_PROBE, token=token, timeout_s=timeout_s, interval_s=5,
                           clock=clock, sleep=clock.sleep, log=lambda m: None)


def test_retries_while_the_webhook_bootstraps_then_passes(tls):
    created = dict(install.KUEUE_WEBHOOK_PROBE, metadata={"name": "openpod-webhook-probe", "uid": "x"})
    answers = [(500, _status(500, "InternalError", BOOTSTRAP_502))] * 3 + [(201, created)]
    clock = FakeClock()
    with ApiServer(tls, answers) as api:
        assert _wait(api.endpoint, tls[2], clock) == 4
    assert clock.now == 15  # three pauses of 5 s
    for path, headers, body in api.requests:
        url = urlparse(path)
        assert url.path == "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"
        assert parse_qs(url.query) == {"dryRun": ["All"]}  # nothing is ever stored
        assert headers["Authorization"] == "Bearer k8s-aws-v1.test"
        assert body == install.KUEUE_WEBHOOK_PROBE


def test_an_existing_probe_name_counts_as_ready(tls):
    # The API server checks for a name clash only after admission, so 409 means the webhooks answered.
    with ApiServer(tls, [(409, _status(409, "AlreadyExists", 'resourceflavors "openpod-webhook-probe" already '
                                                               "exists"))]) as api:
        assert _wait(api.endpoint, tls[2], FakeClock()) == 1


def test_deadline_fails_the_deploy_with_the_last_answer(tls):
    clock = FakeClock()
    with ApiServer(tls, [(500, _status(500, "InternalError", BOOTSTRAP_502))]) as api:
        with pytest.raises(gate.GateFailed) as e:
            _wait(api.endpoint, tls[2], clock, timeout_s=60)
    assert "within 60 s (13 attempts)" in str(e.value) and "502 Bad Gateway" in str(e.value)
    assert clock.now == 60  # attempts at 0, 5, ..., 60 s


def test_an_answer_retrying_cannot_change_fails_at_once(tls):
    msg = "the server could not find the requested resource"
    with ApiServer(tls, [(404, _status(404, "NotFound", msg))]) as api:
        with pytest.raises(gate.GateFailed, match=f"HTTP 404, which retrying cannot change: {msg}"):
            _wait(api.endpoint, tls[2], FakeClock())
    assert len(api.requests) == 1


def test_no_answer_and_rbac_propagation_are_retried(tls):
    forbidden = _status(403, "Forbidden", 'resourceflavors.kueue.x-k8s.io is forbidden: User "gate" cannot create')
    with ApiServer(tls, [(403, forbidden), (201, install.KUEUE_WEBHOOK_PROBE)]) as api:
        assert _wait(api.endpoint, tls[2], FakeClock()) == 2
    clock = FakeClock()
    with pytest.raises(gate.GateFailed, match="no answer"):  # nothing listens on port 9 of this host
        _wait("https://127.0.0.1:9", tls[2], clock, timeout_s=10)


def test_a_server_the_ca_does_not_vouch_for_is_never_trusted(tls, tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other",
                    "-keyout", str(tmp_path / "k"), "-out", str(tmp_path / "c")], check=True, capture_output=True)
    other_ca = base64.b64encode((tmp_path / "c").read_bytes()).decode()
    with ApiServer(tls, [(201, install.KUEUE_WEBHOOK_PROBE)]) as api:
        status, message = gate.dry_run_create(api.endpoint, other_ca, install.KUEUE_WEBHOOK_PROBE_PATH,
                                              install.KUEUE_WEBHOOK_PROBE, "t")
    assert status == 0 and "CERTIFICATE_VERIFY_FAILED" in message


def test_bearer_token_is_the_eks_presigned_sts_url(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    token = gate.bearer_token("openpod-dev", "us-west-2")
    prefix, _, b64 = token.partition(".")
    assert prefix == "k8s-aws-v1" and "=" not in b64
    url = urlparse(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode())
    q = parse_qs(url.query)
    assert url.netloc == "sts.us-west-2.amazonaws.com"
    assert q["Action"] == ["GetCallerIdentity"] and q["X-Amz-Expires"] == ["60"]
    assert q["X-Amz-SignedHeaders"] == ["host;x-k8s-aws-id"]  # the cluster name is signed into the token
    assert q["X-Amz-Credential"][0].startswith("AKIDEXAMPLE/")


def test_on_event_delete_touches_nothing_and_create_reports_attempts(tls, monkeypatch):
    assert gate.on_event({"RequestType": "Delete", "PhysicalResourceId": "p",
                          "ResourceProperties": {"ClusterName": "c"}}) == {"PhysicalResourceId": "p"}
    monkeypatch.setattr(gate, "bearer_token", lambda cluster, region: f"k8s-aws-v1.{cluster}.{region}")
    with ApiServer(tls, [(201, install.KUEUE_WEBHOOK_PROBE)]) as api:
        out = gate.on_event({"RequestType": "Create", "ResourceProperties": {
            "ClusterName": "openpod-dev", "Region": "us-west-2", "Endpoint": api.endpoint,
            "CertificateAuthorityData": tls[2], "Path": install.KUEUE_WEBHOOK_PROBE_PATH,
            "Probe": json.dumps(install.KUEUE_WEBHOOK_PROBE), "TimeoutSeconds": "600", "IntervalSeconds": "5",
            "KueueVersion": "0.19.2"}})
    assert out == {"PhysicalResourceId": "kueue-webhook-gate-openpod-dev", "Data": {"Attempts": "1"}}
    assert api.requests[0][1]["Authorization"] == "Bearer k8s-aws-v1.openpod-dev.us-west-2"
