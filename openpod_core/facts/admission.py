"""Admission (``infra/governance/admission.py``, ``pod_baseline.py``, ``device_env.py``): Pod Security Admission's
Baseline and its update rule, the controllers' identities the policies name, what selects accelerators."""

from __future__ import annotations

from openpod_core.facts.record import Fact

PSA = "kubernetes/pod-security-admission@v0.34.0"   # the published copy of kubernetes/kubernetes@v1.34.0 staging

FACTS: tuple[Fact, ...] = (
    Fact(
        "psa.baseline.controls", "12 checks at Level Baseline: appArmorProfile, capabilities_baseline, "
        "hostNamespaces, hostPathVolumes, hostPorts, hostProbesAndHostLifecycle (1.34+), privileged, procMount, "
        "seLinuxOptions, seccompProfile_baseline, sysctls, windowsHostProcess",
        f"{PSA}:policy/check_*.go (the Check{{ID, Level: api.LevelBaseline}} of each; file:line per control in "
        "infra/governance/pod_baseline.py CONTROLS)", "2026-11-28",
        "the platform judges all 12 (hostPath narrowed to the runtime's job directories, IPC_LOCK added); the "
        "spec's default EKS version is 1.34",
    ),
    Fact(
        "psa.update.significant", "a pod UPDATE is evaluated only when the number of containers or init containers, "
        "a container's image, or an ephemeral container changes; other updates are allowed unevaluated",
        f"{PSA}:admission/admission.go:370-387 (ValidatePod), :632-671 (isSignificantPodUpdate)", "2026-11-28",
        "the platform's pod-security policies judge an UPDATE when a field they read changes "
        "(admission.guarded_fields_changed), a superset of PSA's trigger",
    ),
    Fact(
        "kueue.controller.service-account", "kueue-controller-manager (<fullname>-controller-manager; fullname = "
        "the release name when it contains the chart name)",
        "kubernetes-sigs/kueue@v0.19.2:charts/kueue/templates/manager/manager.yaml:111, "
        "charts/kueue/templates/_helpers.tpl:29-35", "2026-11-28",
        "installed as release kueue in kueue-system: the only identity openpod-kueue-starts-jobs lets start a JobSet",
    ),
    Fact(
        "kueue.podset.merge", "on admission Kueue merges the flavor's node labels, tolerations, its annotations and "
        "scheduling gates into each pod template, and restores them on suspension",
        "kubernetes-sigs/kueue@v0.19.2:pkg/podset/podset.go:45-54,56-93,179-200", "2026-11-28",
        "so the pod-security policies compare only the instance-group selector, the refused tolerations and the "
        "AppArmor annotations of those parts",
    ),
    Fact(
        "jobset.controller.service-account", "jobset-controller (<fullname>-controller)",
        "kubernetes-sigs/jobset@0b906eb:charts/jobset/templates/controller/_helpers.tpl:20-22,40-45", "2026-11-28",
        "it creates child Jobs unsuspended and resumes them for an admitted JobSet",
    ),
    Fact(
        "neuron.oci-hook.visible-devices", "with the Neuron OCI hook installed, AWS_NEURON_VISIBLE_DEVICES=<ALL | "
        "list> in a container's environment exposes those Neuron devices; device plugin >= 1.8 no longer needs "
        "the hook",
        "aws-neuron/aws-neuron-sdk@1b6c798:containers/faq.rst:16-26", "2026-11-28",
        "whether the EKS Neuron AMI installs the hook is not established here; admission refuses the variable "
        "either way, as it refuses NVIDIA_*",
    ),
)
