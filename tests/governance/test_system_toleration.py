"""Teams cannot opt in to the system group (issue 28): ``openpod-pod-security`` refuses a toleration of the system
taint in team namespaces - any operator, value or effect, and the key-less Exists toleration that tolerates every
taint - on Pods and on JobSet templates; and a team pod as ``openpod submit`` builds it does not fit a system node.
"""

from __future__ import annotations

import pytest

from infra.governance import jobset
from infra.governance.system_group import SYSTEM_TAINT, system_tolerations
from openpod_core import labels
from tests.governance.test_pod_security import JOBSETS, SPEC, TEAM_NS, admit_pod, request, standard_pod
from tests.governance import vap
from tests.scheduling import tolerates, untolerated

SYSTEM = "tolerations of the system group's taint CriticalAddonsOnly"
NODE_TAINT = {"key": SYSTEM_TAINT.key, "value": SYSTEM_TAINT.value, "effect": SYSTEM_TAINT.effect.value}

OPT_INS = [
    {"key": labels.SYSTEM_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"},  # the controllers'
    {"key": labels.SYSTEM_TAINT, "operator": "Exists"},                                       # AWS's own example
    {"key": labels.SYSTEM_TAINT, "operator": "Exists", "effect": "NoExecute"},
    {"key": labels.SYSTEM_TAINT, "value": "true"},                                            # operator defaults
]


@pytest.mark.parametrize("toleration", OPT_INS, ids=["equal", "exists", "other-effect", "no-operator"])
def test_a_team_pod_tolerating_the_system_taint_is_denied(toleration):
    pod = standard_pod()
    pod["spec"].setdefault("tolerations", []).append(toleration)
    denied = admit_pod(pod)
    assert len(denied) == 1 and SYSTEM in denied[0] and "openpod-pod-security" in denied[0], denied


def test_a_team_pod_tolerating_every_taint_is_denied():
    """``operator: Exists`` without a key tolerates the system taint too (tests/scheduling.py)."""
    everything = {"operator": "Exists"}
    assert tolerates(everything, NODE_TAINT)
    pod = standard_pod()
    pod["spec"].setdefault("tolerations", []).append(everything)
    assert any("nor an Exists toleration without a key" in m for m in admit_pod(pod))


@pytest.mark.parametrize("toleration", OPT_INS[:2], ids=["equal", "exists"])
def test_a_jobset_whose_template_tolerates_the_system_taint_is_refused_at_submission(toleration):
    js = jobset.build(SPEC, request("p5", "openpod"))
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].setdefault(
        "tolerations", []).append(toleration)
    denied = vap.admit(JOBSETS, js, namespace_labels=TEAM_NS)
    assert len(denied) == 1 and SYSTEM in denied[0], denied


def test_every_toleration_that_passes_admission_leaves_the_system_taint_untolerated():
    """What admission lets through cannot reach a system node: the opt-ins it refuses tolerate the taint (the one
    with another effect would once the taint's effect changed, so it is refused too), and the pods
    ``openpod submit`` builds (which it admits) do not."""
    assert [tolerates(t, NODE_TAINT) for t in OPT_INS] == [True, True, False, True]
    for group, runtime in (("p5", "openpod"), ("p5", "torchrun"), ("trn2", "torchrun")):
        spec = jobset.build(SPEC, request(group, runtime))["spec"]["replicatedJobs"][0]["template"]["spec"][
            "template"]["spec"]
        assert untolerated([NODE_TAINT], spec.get("tolerations")) == [NODE_TAINT], (group, runtime)


def test_the_controllers_toleration_is_exactly_the_system_taint():
    assert {"key": labels.SYSTEM_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"} in \
        system_tolerations(SPEC)
