"""Kueue webhook readiness gate: a CloudFormation custom resource run by CDK's Provider framework.

Right after Kueue installs, its webhook can answer 502 for tens of seconds while the
built-in certificate bootstrap runs, although the Deployment is Ready and the Service
has endpoints (kubernetes-sigs/kueue#13036, open, checked 2026-11-23). Every Kueue
object applied in that window is refused ("failed calling webhook ..."), and the
first deploy rolls back. This handler asks the API server itself: a server-side
dry-run create (``?dryRun=All``) of a probe ResourceFlavor, which runs the admission
chain, Kueue's mutating and validating webhooks included (both declare
``sideEffects=None``, so the API server calls them on dry-run requests:
kubernetes-sigs/kueue@v0.19.2:pkg/webhooks/resourceflavor_webhook.go:46,61), and
persists nothing. It retries until the answer is 201 (or 409: a flavor of that name
exists, which the API server reports only after admission) or the deadline passes.

Authentication is the EKS bearer token: ``k8s-aws-v1.`` + unpadded base64url of an
STS GetCallerIdentity URL presigned with the ``x-k8s-aws-id: <cluster>`` header
(kubernetes-sigs/aws-iam-authenticator README, "API Authorization from Outside a
Cluster", checked 2026-11-23). Presigning is local; the function needs no IAM
permission for it, only an EKS access entry whose Kubernetes group may create
ResourceFlavors (the construct binds exactly that).
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import time
import urllib.error
import urllib.request
from typing import Callable

READY = frozenset({200, 201, 409})
# Answers that retrying cannot change: the probe or the path is wrong (no Kueue CRD at that
# version, a schema error). Everything else (5xx from a webhook not yet serving, 401/403 while
# a new access entry propagates, connection errors) is retried until the deadline.
PERMANENT = frozenset({400, 404, 405, 422})
TOKEN_TTL_SECONDS = 60


def bearer_token(cluster_name: str, region: str, session=None) -> str:
    """The EKS API bearer token for the function's own credentials."""
    import botocore.session
    from botocore.signers import RequestSigner

    session = session or botocore.session.get_session()
    sts = session.create_client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4",
                           session.get_credentials(), session.get_component("event_emitter"))
    url = signer.generate_presigned_url(
        {"method": "GET", "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
         "body": {}, "headers": {"x-k8s-aws-id": cluster_name}, "context": {}},
        region_name=region, expires_in=TOKEN_TTL_SECONDS, operation_name="")
    return "k8s-aws-v1." + re.sub(r"=+$", "", base64.urlsafe_b64encode(url.encode()).decode())


def dry_run_create(endpoint: str, ca_data: str, path: str, probe: dict, token: str,
                   timeout: float = 10.0) -> tuple[int, str]:
    """POST ``probe`` to ``endpoint + path`` (a ``dryRun=All`` URL); (HTTP status, message). Status 0: no answer."""
    context = ssl.create_default_context(cadata=base64.b64decode(ca_data).decode())
    req = urllib.request.Request(endpoint.rstrip("/") + path, data=json.dumps(probe).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, "accepted"
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")
        try:
            message = json.loads(body).get("message", body)
        except ValueError:
            message = body
        return e.code, message.strip()[:500]
    except (urllib.error.URLError, OSError) as e:
        return 0, f"no answer: {getattr(e, 'reason', e)}"


class GateFailed(RuntimeError):
    """The webhook was not ready by the deadline, or answered in a way retrying cannot fix."""


def wait_ready(*, endpoint: str, ca_data: str, path: str, probe: dict, token: Callable[[], str],
               timeout_s: float, interval_s: float, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] = print) -> int:
    """Retry the dry-run until accepted; returns the number of attempts. Raises GateFailed with the last answer."""
    deadline = clock() + timeout_s
    attempt = 0
    while True:
        attempt += 1
        status, message = dry_run_create(endpoint, ca_data, path, probe, token())
        if status in READY:
            log(f"attempt {attempt}: HTTP {status}: Kueue's webhook answers")
            return attempt
        log(f"attempt {attempt}: HTTP {status or '-'}: {message}")
        if status in PERMANENT:
            raise GateFailed(f"dry-run create of {path} answered HTTP {status}, which retrying cannot change: "
                             f"{message}")
        if clock() + interval_s > deadline:
            raise GateFailed(f"Kueue's webhook did not accept a dry-run {probe.get('kind', 'object')} within "
                             f"{timeout_s:.0f} s ({attempt} attempts); last answer: HTTP {status or '-'}: {message}")
        sleep(interval_s)


def on_event(event: dict, context=None) -> dict:
    """Provider framework entry point: Create and Update wait for the webhook; Delete does nothing."""
    props = event["ResourceProperties"]
    physical_id = event.get("PhysicalResourceId") or f"kueue-webhook-gate-{props['ClusterName']}"
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": physical_id}
    attempts = wait_ready(
        endpoint=props["Endpoint"], ca_data=props["CertificateAuthorityData"], path=props["Path"],
        probe=json.loads(props["Probe"]), token=lambda: bearer_token(props["ClusterName"], props["Region"]),
        timeout_s=float(props["TimeoutSeconds"]), interval_s=float(props["IntervalSeconds"]),
    )
    return {"PhysicalResourceId": physical_id, "Data": {"Attempts": str(attempts)}}
