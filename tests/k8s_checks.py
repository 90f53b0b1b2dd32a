"""Offline schema checks for the Kubernetes objects the program creates.

Built-in kinds: kubernetes-validate in strict mode (unknown fields are errors) for the cluster's
Kubernetes version. Custom kinds (Kueue, MPIJob, JobSet, Kubeflow Trainer, Slinky, External Secrets): the CRD's
openAPIV3Schema from blueprint/schemas/crds (each folder says its source), made strict the way the API server's
strict field validation is (unknown fields are errors), plus the CEL rules of the ClusterQueue schema that a
JSON-schema check cannot run. A missing fixture is an error, never a skip.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The CRDs ship with the tool (blueprint admit validates workloads against them): blueprint/schemas/crds.
CRD_ROOT = Path(__file__).resolve().parent.parent / "blueprint" / "schemas" / "crds"
CRD_DIRS = tuple(CRD_ROOT / name for name in ("kueue", "mpi-operator", "jobset", "kubeflow-trainer", "slinky",
                                              "node-readiness-controller",
                                              "prometheus-operator", "external-secrets", "keda",
                                              "gateway-api", "gateway-api-inference-extension", "agentgateway",
                                              "gke-gateway"))
BUILTIN_GROUPS = ("v1", "rbac.authorization.k8s.io/", "networking.k8s.io/", "storage.k8s.io/",
                  "admissionregistration.k8s.io/", "apps/", "batch/")


def is_builtin(manifest: dict[str, Any]) -> bool:
    api = str(manifest["apiVersion"])
    return api == "v1" or api.startswith(BUILTIN_GROUPS)


def validate_builtin(manifest: dict[str, Any], kubernetes_version: str) -> None:
    """Raise kubernetes_validate.ValidationError when the object is not valid for the version."""
    kubernetes_validate.validate(manifest, kubernetes_version, strict=True)


def _python_pattern(pattern: Any) -> bool:
    """Whether a CRD's (Go RE2) pattern compiles in Python: RE2 allows a flag group such as ``(?i)`` mid-pattern
    (AlertmanagerConfig's month and weekday names), Python does not; such a pattern is left unchecked here."""
    try:
        re.compile(str(pattern))
    except re.error:
        return False
    return True


# Value-validation branches of a structural schema (Kubernetes "Extend the Kubernetes API with
# CustomResourceDefinitions", structural schemas): they may constrain the fields the node's properties declare but
# declare none of their own, so unknown fields are judged at the node, not in a branch (a Gateway address's oneOf
# names "type" alone in a branch that must still admit "value").
_BRANCHES = ("oneOf", "anyOf", "allOf", "not")


def _strict(schema: Any, branch: bool = False) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v, branch or k in _BRANCHES) for k, v in schema.items()
               if k != "pattern" or _python_pattern(v)}
        if "properties" in out and "additionalProperties" not in out and not branch \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v, branch) for v in schema]
    return schema


class _CrdLoader(yaml.CSafeLoader):
    """YAML as Kubernetes reads it: a bare ``=`` (an enum value of the AlertmanagerConfig matchers) is a string, not
    YAML 1.1's ``!!value`` tag, which PyYAML cannot construct."""


_CrdLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:value"]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> strict JSON schema, for every served version of the reference CRDs."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for folder in CRD_DIRS:
        paths = sorted(folder.glob("*.yaml"))
        if not paths:
            raise FileNotFoundError(f"{folder}: no CRD fixture here (tests/fixtures/README.md)")
        for path in paths:
            (crd,) = [d for d in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_CrdLoader) if d]
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
                out[(f"{group}/{version['name']}", kind)] = _strict(schema)
    return out


def validate_crd_object(manifest: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError (or KeyError for an unknown kind) for a CRD object."""
    schema = crd_schemas()[(manifest["apiVersion"], manifest["kind"])]
    jsonschema.validate(manifest, schema, cls=jsonschema.Draft7Validator)


def cluster_queue_cel(manifest: dict[str, Any]) -> list[str]:
    """The ClusterQueue CEL rules the schema check cannot run; returns the messages of broken ones."""
    spec = manifest.get("spec", {})
    problems = []
    groups = spec.get("resourceGroups", [])
    if "cohortName" not in spec and any(
            "borrowingLimit" in r for g in groups for f in g.get("flavors", []) for r in f.get("resources", [])):
        problems.append("borrowingLimit must be nil when cohort is empty")
    for g in groups:
        covered = list(g.get("coveredResources", []))
        for f in g.get("flavors", []):
            names = [r["name"] for r in f.get("resources", [])]
            if names != covered:
                problems.append(f"flavor {f.get('name')} must list exactly the covered resources {covered}, "
                                f"in order; got {names}")
    return problems
