"""A multi-node `--restart in-process` job survives the loss of a node other than node 0 without a JobSet restart.

The launchers (training/ft/inprocess.py) declare a node lost whose launcher went silent, keep the other nodes'
processes and wait (`--node-wait`) for a launcher with the lost node's `--node-rank`. On EKS that launcher is
the replacement pod the Job controller creates for the lost pod's completion index - which it does only if
the lost pod does not fail the child Job: with `backoffLimit: 0` and no pod failure policy, the first failed
pod fails the Job and the JobSet restarts every pod. A pod lost with its node gets the `DisruptionTarget`
condition (the taint manager on an unreachable node, PodGC for a node that is gone: KEP-3329,
kubernetes/enhancements keps/sig-apps/3329-retriable-and-non-retriable-failures/README.md, "New PodConditions";
checked 2026-11-23), and a pod failure policy rule `Ignore` on that condition creates a replacement pod
without counting a failure (same KEP, "JobSpec API"; the JobSet v0.12.0 CRD carries
`replicatedJobs[].template.spec.podFailurePolicy`).
"""

from __future__ import annotations

from tests.governance import k8s_schema
from tests.governance.test_submit_openpod import dry_run

TRAINING_ARGS = ("--", "--steps", "100", "--global-batch", "64")
JOB = ("--name", "llama", "--team", "research", "--group", "p5", "--runtime", "openpod")


def trainer_job(js: dict) -> dict:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]


def test_a_pod_lost_with_its_node_is_replaced_alone_in_a_multi_node_in_process_job():
    js = dry_run(*JOB, "--nodes", "2", "--restart", "in-process", *TRAINING_ARGS)
    job = trainer_job(js)
    assert job["podFailurePolicy"] == {"rules": [{"action": "Ignore",
                                                  "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    assert job["backoffLimit"] == 0            # a launcher that exits with an error still fails the Job
    assert job["template"]["spec"]["restartPolicy"] == "Never"  # required by podFailurePolicy (the CRD's text)
    assert k8s_schema.validate(js) == []


def test_other_jobs_keep_failing_their_job_on_any_pod_failure():
    for args in (("--nodes", "1", "--restart", "in-process"), ("--nodes", "2")):
        assert "podFailurePolicy" not in trainer_job(dry_run(*JOB, *args, *TRAINING_ARGS)), args
