"""Every job the platform renders for the openpod runtime carries its peer Secret, and its pods fail closed without it.

The peer server refuses to start on the pod IP without ``OPENPOD_PEER_SECRET``
(training/checkpoint/peer.py); a non-optional ``secretKeyRef`` keeps the kubelet from starting the
container while the Secret is missing ("optional: Specify whether the Secret or its key must be
defined", Kubernetes v1.34 API reference, SecretKeySelector,
https://kubernetes.io/docs/reference/generated/kubernetes-api/v1.34/#secretkeyselector-v1-core, checked 2026-11-25).
"""

from __future__ import annotations

import yaml

from tests.governance.test_submit_openpod import P5, TRAINING_ARGS, submit


def test_dry_run_output_holds_the_jobs_peer_secret_and_the_pods_require_it():
    result = submit(*P5, "--runtime", "openpod", "--", *TRAINING_ARGS)
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in docs] == ["JobSet", "Secret"]
    js, secret = docs
    assert secret["metadata"] == {"name": "llama-p5-peer", "namespace": "research",
                                  "labels": {"openpod.io/team": "research", "app.kubernetes.io/name": "llama-p5"}}
    assert len(bytes.fromhex(secret["stringData"]["OPENPOD_PEER_SECRET"])) == 32
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    refs = [e["valueFrom"]["secretKeyRef"] for c in pod["containers"] for e in c.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {})]
    assert refs == [{"name": "llama-p5-peer", "key": "OPENPOD_PEER_SECRET", "optional": False}]
    again = submit(*P5, "--runtime", "openpod", "--", *TRAINING_ARGS)
    assert list(yaml.safe_load_all(again.stdout))[-1]["stringData"] != secret["stringData"]  # one per rendering
    assert "the last document is Secret llama-p5-peer" in result.stderr
