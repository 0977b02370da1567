"""Offline validation of generated Kubernetes objects, as the API server would see them.

* Custom resources (Kueue, JobSet): the CRD's ``openAPIV3Schema`` for the
  object's version, with jsonschema; plus a pruning walk: a field the structural
  schema does not declare (and no ``x-kubernetes-preserve-unknown-fields``
  covers) would be silently dropped by the API server, so it is an error here.
* Core objects and every object's ``metadata``: the kubernetes Python client's
  generated models. Each model's ``openapi_types`` (attribute -> type) and
  ``attribute_map`` (attribute -> JSON key) are the Kubernetes OpenAPI schema
  in Python form; walking an object against them finds unknown fields and wrong
  types, and deserializing through the client raises on missing required fields.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import jsonschema
import yaml

from tests.conftest import SHARED

SCHEMAS = SHARED / "schemas"
CRD_FILES = {
    "kueue.x-k8s.io": ("kueue-v0.19.2", {
        "ClusterQueue": "clusterqueues.yaml", "Cohort": "cohorts.yaml", "LocalQueue": "localqueues.yaml",
        "ResourceFlavor": "resourceflavors.yaml", "Topology": "topologies.yaml",
        "WorkloadPriorityClass": "workloadpriorityclasses.yaml",
    }),
    "jobset.x-k8s.io": ("jobset-v0.12.0", {"JobSet": "jobsets.yaml"}),
}
CORE_MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): "V1ValidatingAdmissionPolicy",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): "V1ValidatingAdmissionPolicyBinding",
}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def schemas_present() -> bool:
    return SCHEMAS.is_dir() and all((SCHEMAS / d).is_dir() for d, _ in CRD_FILES.values())


@lru_cache(maxsize=None)
def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    group, version = api_version.split("/")
    directory, files = CRD_FILES[group]
    crd = yaml.safe_load((SCHEMAS / directory / files[kind]).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            assert v["served"], f"{api_version} {kind} is not served"
            return v["schema"]["openAPIV3Schema"]
    raise AssertionError(f"{kind} has no version {version}")


def prunable(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields of ``obj`` the API server would prune under structural ``schema``."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            where = f"{path}.{key}" if path else key
            if props is not None and key in props:
                out += prunable(value, props[key], where)
            elif isinstance(extra, dict):
                out += prunable(value, extra, where)
            elif extra is True:
                continue
            else:
                out.append(where)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            out += prunable(item, schema["items"], f"{path}[{i}]")
    return out


# ------------------------------------------------------------------ core models


def _models():
    import kubernetes.client.models as models

    return models


_PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}


def model_errors(obj: Any, type_name: str, path: str = "") -> list[str]:
    """Unknown fields and wrong types of ``obj`` against a kubernetes client model type."""
    if type_name in _PRIMITIVES:
        ok = isinstance(obj, _PRIMITIVES[type_name]) and not (type_name == "int" and isinstance(obj, bool))
        return [] if ok else [f"{path}: expected {type_name}, got {type(obj).__name__}"]
    if type_name == "datetime":
        return [] if isinstance(obj, str) else [f"{path}: expected a timestamp string"]
    m = re.fullmatch(r"(?:list|List)\[(.+)\]", type_name)
    if m:
        if not isinstance(obj, list):
            return [f"{path}: expected a list"]
        return [e for i, x in enumerate(obj) for e in model_errors(x, m.group(1), f"{path}[{i}]")]
    m = re.fullmatch(r"(?:dict\((\w+), (.+)\)|Dict\[(\w+), (.+)\])", type_name)
    if m:
        if not isinstance(obj, dict):
            return [f"{path}: expected a mapping"]
        value_type = m.group(2) or m.group(4)
        return [e for k, v in obj.items() for e in model_errors(v, value_type, f"{path}.{k}")]
    cls = getattr(_models(), type_name)
    if not isinstance(obj, dict):
        return [f"{path}: expected an object ({type_name})"]
    by_json = {json_key: attr for attr, json_key in cls.attribute_map.items()}
    errors = []
    for key, value in obj.items():
        where = f"{path}.{key}" if path else key
        if key not in by_json:
            errors.append(f"{where}: unknown field of {type_name}")
        else:
            errors += model_errors(value, cls.openapi_types[by_json[key]], where)
    return errors


def required_errors(obj: dict[str, Any], type_name: str) -> list[str]:
    """Missing required fields: deserializing through the client raises on them."""
    from kubernetes.client import ApiClient

    try:
        ApiClient()._ApiClient__deserialize(obj, type_name)
    except ValueError as e:  # pydantic's ValidationError (client >= 35) is a ValueError too
        return [f"{type_name}: {' '.join(str(e).split())}"]
    return []


# ------------------------------------------------- CEL rules (create time only)


def cel_errors(obj: dict[str, Any]) -> list[str]:
    """The CRDs' x-kubernetes-validations that apply on create, re-stated in Python.

    jsonschema does not run CEL; these are the rules of the Kueue v0.19.2 CRDs
    for the kinds we generate (update-only rules, ``oldSelf``, are left out),
    plus Kueue's webhook rule that flavor resources follow coveredResources.
    """
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    errors: list[str] = []
    if kind in ("ClusterQueue", "Cohort"):  # one validateResourceGroups for both (pkg/webhooks/cohort_webhook.go:67-77)
        for rg in spec.get("resourceGroups", []):
            for f in rg["flavors"]:
                names = [r["name"] for r in f["resources"]]
                if names != rg["coveredResources"]:
                    errors.append(f"flavor {f['name']}: resources {names} do not follow coveredResources")
                for r in f["resources"]:
                    if "borrowingLimit" in r and not (spec.get("cohortName") or spec.get("parentName")):
                        errors.append("borrowingLimit must be nil when cohort is empty")
        p = spec.get("preemption", {})
        if p.get("reclaimWithinCohort") == "Never" and p.get("borrowWithinCohort", {}).get("policy", "Never") != "Never":
            errors.append("reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
        fung = spec.get("flavorFungibility", {})
        if "preference" in fung and not (fung.get("whenCanBorrow") == fung.get("whenCanPreempt") == "TryNextFlavor"):
            errors.append("flavorFungibility.preference needs both when* = TryNextFlavor")
    if kind == "ResourceFlavor":
        if spec.get("topologyName") and not spec.get("nodeLabels"):
            errors.append("at least one nodeLabel is required when topology is set")
        for t in spec.get("tolerations", []):
            if "key" not in t and t.get("operator") != "Exists":
                errors.append("operator must be Exists when key is empty")
            if "tolerationSeconds" in t and t.get("effect") != "NoExecute":
                errors.append("tolerationSeconds needs effect NoExecute")
            if t.get("operator", "Equal") not in ("Equal", "Exists"):
                errors.append(f"toleration operator {t.get('operator')!r}")
            if t.get("operator") == "Exists" and "value" in t:
                errors.append("a value must be empty when operator is Exists")
            if t.get("effect", "NoSchedule") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                errors.append(f"toleration effect {t.get('effect')!r}")
    if kind == "Topology":
        levels = [lv["nodeLabel"] for lv in spec.get("levels", [])]
        if len(set(levels)) != len(levels):
            errors.append("topology levels must be unique")
        if "kubernetes.io/hostname" in levels and levels[-1] != "kubernetes.io/hostname":
            errors.append("kubernetes.io/hostname can only be the lowest level")
    return errors


# ---------------------------------------------------------------------- public


def validate(obj: dict[str, Any]) -> list[str]:
    """Every problem the API server would find with ``obj`` (empty = valid, nothing pruned)."""
    api, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    where = f"{kind}/{obj.get('metadata', {}).get('name')}"
    errors: list[str] = []
    meta = obj.get("metadata", {})
    if not DNS_SUBDOMAIN.match(meta.get("name", "")) or len(meta.get("name", "")) > 253:
        errors.append(f"metadata.name {meta.get('name')!r} is not a DNS subdomain")
    group = api.split("/")[0] if "/" in api else ""
    if group in CRD_FILES:
        errors += model_errors(meta, "V1ObjectMeta", "metadata")
        schema = crd_schema(api, kind)
        validator = jsonschema.Draft7Validator(schema)
        errors += [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(obj)]
        body = {k: v for k, v in obj.items() if k != "metadata"}
        errors += [f"{p}: would be pruned (not in the {kind} schema)" for p in prunable(body, schema)]
        errors += cel_errors(obj)
    elif (api, kind) in CORE_MODELS:
        model = CORE_MODELS[(api, kind)]
        errors += model_errors(obj, model)
        errors += required_errors(obj, model)
    else:
        errors.append(f"no schema known for {api} {kind}")
    return [f"{where}: {e}" for e in errors]


SKIP_REASON = f"CRD schemas not found at {SCHEMAS} (expected ../shared/schemas next to the repository)"


def jobset_pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


