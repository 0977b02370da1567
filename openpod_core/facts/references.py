"""The grammar of the strings a job submission passes on: container image references and environment variable
names (``infra/governance/references.py``)."""

from __future__ import annotations

from openpod_core.facts.record import Fact

FACTS: tuple[Fact, ...] = (
    Fact(
        "image.reference-grammar", "name [':' tag] ['@' digest]; name = [domain[:port] '/'] path-component "
        "['/' path-component]*, path-component = [a-z0-9]+ ([._]|__|-+ [a-z0-9]+)*, tag = [\\w][\\w.-]{0,127}, "
        "digest = algorithm ':' hex{32,}; repository path at most 255 characters",
        "distribution/reference@v0.6.0:reference.go:6-24,39; regexp.go:44-110,136", "2026-11-28",
        "the grammar containerd and the kubelet parse an image with; `openpod submit --image` checks it first",
    ),
    Fact(
        "k8s.env-var-name", "[-._a-zA-Z][-._a-zA-Z0-9]*, not '.', '..' or starting with '..' (IsEnvVarName); "
        "with the RelaxedEnvironmentVariableValidation gate any printable ASCII but '='",
        "kubernetes/apimachinery@v0.34.0:pkg/util/validation/validation.go:398-430,494-505 (Kubernetes 1.34)",
        "2026-11-28",
        "`openpod submit --env` takes the strict form, which API servers accept with the gate on or off",
    ),
)
