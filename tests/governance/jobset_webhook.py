"""JobSet v0.12.0's webhook check of ``spec.failurePolicy``, re-implemented for offline tests.

A line-for-line port of ``validateFailurePolicy``
(kubernetes-sigs/jobset@v0.12.0:pkg/webhooks/jobset_webhook.go:425-494) with the feature gates the controller
was started with passed in: the default gate table is pkg/features/features.go:68-76 (``RestartJob``
alpha, off: line 73), and the controller reads overrides only from its configuration file's
``featureGates`` (main.go:111-120, api/config/v1alpha1/configuration_types.go:39-41).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

# pkg/features/features.go:68-76
DEFAULT_GATES = {"InPlaceRestart": False, "TLSOptions": True, "RestartJob": False, "ElasticJobSet": False}
# pkg/webhooks/jobset_webhook.go:73-76
MAX_REPLICAS_PER_REPLICATED_JOB = 1024
# pkg/webhooks/jobset_webhook.go:85-91 (batchv1.JobReason* constants)
VALID_ON_JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes",
                                "MaxFailedIndexesExceeded", "PodFailurePolicy")
# pkg/webhooks/jobset_webhook.go:415-422
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
RESTART_JOB_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")  # api/jobset/v1alpha2/jobset_types.go:429,434


def gates(config: Mapping[str, Any] | None) -> dict[str, bool]:
    """The controller's gates from its Configuration (main.go:117: SetFromMap(cfg.FeatureGates))."""
    return {**DEFAULT_GATES, **((config or {}).get("featureGates") or {})}


def failure_policy_errors(js: Mapping[str, Any], gate: Mapping[str, bool]) -> list[str]:
    """The errors ``validateFailurePolicy`` returns for ``js`` (jobset_webhook.go:425-494)."""
    errs: list[str] = []
    fp = js["spec"].get("failurePolicy")
    if fp is None:  # :428-430
        return errs
    rules = fp.get("rules") or []
    rjob_names = {r["name"] for r in js["spec"]["replicatedJobs"]}
    if any(r["action"] in RESTART_JOB_ACTIONS for r in rules):  # :432-439
        if not gate["RestartJob"]:  # :440-444
            return ["RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when "
                    "RestartJob feature gate is disabled"]
        if any(r["replicas"] > MAX_REPLICAS_PER_REPLICATED_JOB for r in js["spec"]["replicatedJobs"]):  # :445-450
            errs.append(f"JobSet cannot have a failure policy rule with RestartJob or RestartJobAndIgnoreMaxRestarts "
                        f"action and a replicated job with replicas > {MAX_REPLICAS_PER_REPLICATED_JOB}")
    names: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):  # :455-483
        name = rule.get("name", "")
        if not 1 <= len(name) <= 128:
            errs.append(f"invalid failure policy rule name of length {len(name)}")
        names.setdefault(name, []).append(i)
        if not RULE_NAME.match(name):
            errs.append(f"invalid failure policy rule name '{name}'")
        errs += [f"invalid replicatedJob name '{n}' in failure policy does not appear in .spec.ReplicatedJobs"
                 for n in rule.get("targetReplicatedJobs") or [] if n not in rjob_names]
        errs += [f"invalid job failure reason '{r}' in failure policy is not a recognized job failure reason"
                 for r in rule.get("onJobFailureReasons") or [] if r not in VALID_ON_JOB_FAILURE_REASONS]
    errs += [f"rule names are not unique, rules with indices {ix} all have the same name '{n}'"  # :485-491
             for n, ix in names.items() if len(ix) > 1]
    return errs
