"""``eks:``: the Kubernetes version, endpoint access, access entries, and the pinned add-on and chart versions."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, field_validator

import re

from infra.spec.base import IAM_PRINCIPAL_ARN, SpecModel, log_retention
from openpod_core.facts.register import value as fact_value

# Pinned by default; a spec may pin its own. Versions are EKS add-on versions
# (``aws eks describe-addon-versions``) and Helm chart versions. The add-on pins are rows of the facts register
# (openpod_core/facts/eks_addons.py, eks.addon.*: the EKS user guide's latest version per Kubernetes version).
DEFAULT_ADDONS: dict[str, str] = {
    "vpc-cni": fact_value("eks.addon.vpc-cni"),
    "coredns": fact_value("eks.addon.coredns.1.34"),
    "kube-proxy": fact_value("eks.addon.kube-proxy.1.34"),
    "eks-pod-identity-agent": "v1.3.9-eksbuild.3",  # unverified: see openpod_core.facts.unverified.UNVERIFIED
    "aws-fsx-csi-driver": fact_value("eks.addon.aws-fsx-csi-driver"),
}
# kube-proxy runs the cluster's own minor version, and CoreDNS's latest add-on differs by Kubernetes version, so
# both defaults follow eks.version (the DEFAULT_ADDONS entries are the 1.34 rows).
KUBE_PROXY_ADDON: dict[str, str] = {v: fact_value(f"eks.addon.kube-proxy.{v}") for v in ("1.32", "1.33", "1.34")}
COREDNS_ADDON: dict[str, str] = {v: fact_value(f"eks.addon.coredns.{v}") for v in ("1.32", "1.33", "1.34")}
DEFAULT_CHARTS: dict[str, str] = {
    "aws-efa-k8s-device-plugin": "v0.5.14",
    "nvidia-device-plugin": "0.17.4",
    # The newest version whose values were read (facts: chart.neuron-helm-chart.device-plugin-affinity); 1.3.0's
    # were never found.
    "neuron-helm-chart": "1.1.2",
    "nvidia-dra-driver-gpu": "25.12.0",  # facts: chart.nvidia-dra-driver-gpu
    "kueue": "0.19.2",
    "jobset": "0.12.0",
    "prometheus-node-exporter": "4.56.1",
    "kube-state-metrics": "8.4.0",
    "dcgm-exporter": "4.8.2",
}


class AccessEntry(SpecModel):
    principal_arn: str = Field(pattern=IAM_PRINCIPAL_ARN)
    access: Literal["cluster-admin", "admin", "edit", "view"] = "view"
    namespaces: list[str] = Field([], description="empty = whole cluster")


# Helm chart versions are SemVer 2 (https://helm.sh/docs/topics/charts/#charts-and-versioning, checked 2026-11-28);
# the pins here are exact versions, never ranges or tags such as "latest".
CHART_VERSION = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")

EksVersion = Literal["1.32", "1.33", "1.34"]
EKS_VERSIONS: tuple[str, ...] = EksVersion.__args__


class EksSpec(SpecModel):
    version: EksVersion = Field("1.34", description="Kubernetes minor version; P6e-GB200 groups need >= 1.33 "
                                                     "(DRA, for NVIDIA's IMEX ComputeDomains)")
    endpoint_public: bool = Field(False, description="private endpoint only unless set")
    endpoint_public_cidrs: list[str] = Field(
        [], validate_default=True,
        description="IPv4 CIDRs allowed to reach the public endpoint; required with endpoint_public")
    access_entries: list[AccessEntry] = []
    addons: dict[str, str] = {}
    charts: dict[str, str] = {}
    log_retention_days: int = Field(90, description="days CloudWatch keeps control-plane logs: one of CloudWatch "
                                                    "Logs' values (1, 3, 5, 7, 14, 30, 60, 90, ... 3653)")

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        return log_retention(v)

    @field_validator("charts")
    @classmethod
    def _exact_chart_versions(cls, v: dict[str, str]) -> dict[str, str]:
        for name, version in v.items():
            if name in DEFAULT_CHARTS and not CHART_VERSION.match(version):   # an unknown name: _known_names
                raise ValueError(f"{name}: {version!r} is not an exact chart version; allowed: a SemVer 2 version "
                                 "such as 0.19.2 or v0.5.14 (no ranges, no 'latest': a deploy must be repeatable)")
        return v

    @field_validator("addons", "charts")
    @classmethod
    def _known_names(cls, v: dict[str, str], info) -> dict[str, str]:
        what, known = ("add-on", DEFAULT_ADDONS) if info.field_name == "addons" else ("chart", DEFAULT_CHARTS)
        unknown = sorted(set(v) - set(known))
        if unknown:
            raise ValueError(f"unknown {what} {', '.join(unknown)}; allowed: {', '.join(known)}")
        return v

    @field_validator("addons")
    @classmethod
    def _kube_proxy_matches(cls, v: dict[str, str], info) -> dict[str, str]:
        version = info.data.get("version")
        pinned = v.get("kube-proxy")
        if version and pinned and not pinned.startswith(f"v{version}."):
            raise ValueError(f"kube-proxy {pinned} does not match eks.version {version}; kube-proxy runs the "
                             f"cluster's minor version (e.g. {KUBE_PROXY_ADDON.get(version, 'v' + version + '.x')}), "
                             "or leave it unset to follow eks.version")
        return v

    @field_validator("endpoint_public_cidrs")
    @classmethod
    def _public_cidrs(cls, v: list[str], info) -> list[str]:
        public = info.data.get("endpoint_public", False)
        if public and not v:
            raise ValueError("a public endpoint needs the CIDRs allowed to reach it; allowed: IPv4 CIDRs such as "
                             "203.0.113.0/24 (0.0.0.0/0 only when listed explicitly)")
        if v and not public:
            raise ValueError("set only with endpoint_public: true (the endpoint is private otherwise)")
        for cidr in v:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError:
                raise ValueError(f"{cidr} is not an IPv4 network; allowed: CIDRs like 203.0.113.0/24 "
                                 "with no host bits set") from None
        return v

    @property
    def addon_versions(self) -> dict[str, str]:
        return {**DEFAULT_ADDONS, "coredns": COREDNS_ADDON[self.version], "kube-proxy": KUBE_PROXY_ADDON[self.version],
                **self.addons}

    @property
    def chart_versions(self) -> dict[str, str]:
        return {**DEFAULT_CHARTS, **self.charts}
