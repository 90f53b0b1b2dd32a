"""Is the object valid for this cluster's API? The API server's strict field validation, offline.

Built-in kinds are checked with ``kubernetes-validate`` in strict mode (unknown fields are errors) for the cluster's
Kubernetes minor. Custom kinds (JobSet, TrainJob, MPIJob, Kueue) are checked against the openAPIV3Schema of the CRD
the cluster installs, shipped in ``blueprint/schemas/crds/<project>/`` with its source, made strict the way the API
server's strict field validation is: a field no schema names is an error unless the schema preserves unknown
fields. (tests/k8s_checks.py keeps its own copy of this for the program's objects.)

Names and labels are checked as the API server does for every object (DNS-1123 names, label syntax), since a
JSON schema does not say it.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils as kv_utils
import yaml

from blueprint.admit.cluster import as_mapping

CRD_ROOT = Path(__file__).resolve().parent.parent / "schemas" / "crds"
MAX_PROBLEMS = 3
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GROUP = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_API_VERSION = re.compile(rf"^({_GROUP}/)?v[0-9]+((alpha|beta)[0-9]+)?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Kinds whose name becomes a label value (job-name, jobset-name) or a DNS label of their pods' hostnames.
_LABEL_LENGTH_NAMES = {"Job", "JobSet", "MPIJob", "TrainJob", "RayJob", "StatefulSet"}


def is_builtin(api_version: str) -> bool:
    """Whether the API group is one of Kubernetes' own (``v1``, ``apps/v1``, ``*.k8s.io`` but not ``x-k8s.io``, nor a
    SIG project's group served by CRDs that ship here: the Gateway API's and its Inference Extension's)."""
    group = api_version.rpartition("/")[0]
    return group == "" or "." not in group or (group.endswith(".k8s.io") and not group.endswith("x-k8s.io")
                                                and not _crd_group(group))


@cache
def _crd_group(group: str) -> bool:
    """Whether CRDs of the group ship in blueprint/schemas/crds."""
    return any(CRD_ROOT.glob(f"*/{group}_*.yaml"))


# Value-validation branches of a structural schema: they constrain the fields their node declares and declare none of
# their own (Kubernetes, "Extend the Kubernetes API with CustomResourceDefinitions", structural schemas), so unknown
# fields are judged at the node (a Gateway address's oneOf names "type" alone in a branch that must admit "value").
_BRANCHES = ("oneOf", "anyOf", "allOf", "not")


def _strict(schema: Any, branch: bool = False) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v, branch or k in _BRANCHES) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not branch \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v, branch) for v in schema]
    return schema


# The format of a group's derived schemas on disk (blueprint.files.derived). The key also holds this module's own
# bytes, so a change to _strict or the derivation is another key even if this is not bumped.
SCHEMA_FORMAT = 1


@cache
def _group_schemas(group: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> strict JSON schema, for every served version of the group's shipped CRDs; derived from
    the CRD files once per machine and content (:func:`blueprint.files.derived.cached_json`)."""
    from blueprint.files.derived import cached_json

    paths = sorted(CRD_ROOT.glob(f"*/{group}_*.yaml"))
    sources = [*paths, Path(__file__)] if paths else []  # a group with no shipped CRD: nothing to derive or keep
    rows = cached_json(f"crd-schemas{SCHEMA_FORMAT}-{group}", sources, lambda: _derive_group_schemas(group, paths))
    return {(api_version, kind): schema for api_version, kind, schema in rows}


def _derive_group_schemas(group: str, paths: list[Path]) -> list[tuple[str, str, dict[str, Any]]]:
    """[apiVersion, kind, strict schema] for every served version of the CRD files."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for path in paths:
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
                out.append((f"{group}/{version['name']}", kind, _strict(schema)))
    return out


def crd_versions(group: str, kind: str) -> list[str]:
    """The apiVersions the shipped CRD of a kind serves."""
    return sorted(v for (v, k) in _group_schemas(group) if k == kind)


def _where(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the object)"


def _metadata_problems(manifest: dict[str, Any]) -> list[str]:
    meta = as_mapping(manifest.get("metadata"))
    kind = str(manifest.get("kind"))
    problems = []
    name, namespace = meta.get("name"), meta.get("namespace")
    if isinstance(name, str):
        limit = 63 if kind in _LABEL_LENGTH_NAMES else 253
        if len(name) > limit or not _DNS_SUBDOMAIN.match(name) or (limit == 63 and "." in name):
            problems.append(f"metadata.name {name!r}: a {kind} name is lower-case letters, digits and '-'"
                            f"{'' if limit == 63 else ' or .'}, at most {limit} characters, starting and ending "
                            "with a letter or digit")
    if isinstance(namespace, str) and (len(namespace) > 63 or not _DNS_LABEL.match(namespace)):
        problems.append(f"metadata.namespace {namespace!r} is not a DNS label (lower-case letters, digits, '-')")
    for field in ("labels", "annotations"):
        for key, value in as_mapping(meta.get(field)).items():
            prefix, _, short = str(key).rpartition("/")
            if len(short) > 63 or not _LABEL_NAME.match(short) or (prefix and not _DNS_SUBDOMAIN.match(prefix)):
                problems.append(f"metadata.{field} key {key!r} is not a valid qualified name")
            if field == "labels" and (not isinstance(value, str) or len(value) > 63
                                      or (value and not _LABEL_NAME.match(value))):
                problems.append(f"metadata.labels[{key!r}] value {value!r}: label values are text of at most 63 "
                                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
    return problems


def _minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _schema_version(kubernetes_version: str) -> tuple[str, list[str]]:
    """The Kubernetes minor kubernetes-validate checks against: the cluster's, else the newest older one it carries
    (else its oldest), with a note saying so."""
    available = sorted({m for m in (_minor(v) for v in kv_utils.all_versions()) if m is not None})
    want = _minor(kubernetes_version)
    if want in available:
        return kubernetes_version, []
    older = [m for m in available if want is not None and m <= want]
    chosen = older[-1] if older else (available[0] if want is not None else available[-1])
    text = f"{chosen[0]}.{chosen[1]}"
    return text, [f"kubernetes-validate has no schemas for Kubernetes {kubernetes_version}; checked against {text}"]


def _builtin_problems(manifest: dict[str, Any], kubernetes_version: str) -> tuple[list[str], list[str]]:
    version, notes = _schema_version(kubernetes_version)
    problems: list[str] = []
    try:
        kubernetes_validate.validate(manifest, version, strict=True)
    except kubernetes_validate.ValidationError as err:
        problems.append(f"{_where(err.path)}: {str(err.message)[:300]}")
    except (kv_utils.SchemaNotFoundError, kv_utils.VersionNotSupportedError, FileNotFoundError):
        problems.append(f"Kubernetes {version} serves no {manifest.get('kind')} in {manifest.get('apiVersion')}")
    return problems, notes


def schema_problems(manifest: dict[str, Any], kubernetes_version: str) -> tuple[list[str], list[str]]:
    """What the API server would refuse in the object (problems), and what could not be checked (notes)."""
    api_version, kind = str(manifest.get("apiVersion")), str(manifest.get("kind"))
    if not _API_VERSION.match(api_version) or not _KIND.match(kind):
        return [f"apiVersion {api_version!r} and kind {kind!r} do not name a Kubernetes type (group/version and a "
                "CamelCase kind)"], []
    problems = _metadata_problems(manifest)
    if is_builtin(api_version):
        found, notes = _builtin_problems(manifest, kubernetes_version)
        return problems + found, notes
    group = api_version.rpartition("/")[0]
    schema = _group_schemas(group).get((api_version, kind))
    if schema is None:
        served = crd_versions(group, kind)
        if served:
            return [*problems, f"the installed {kind} CRD serves {', '.join(served)}, not {api_version}"], []
        return problems, [f"no CRD schema for {api_version} {kind} ships with blueprint: its fields are not checked"]
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(manifest), key=lambda e: (len(e.path), _where(e.path)))
    problems += [f"{_where(e.path)}: {e.message[:300]}" for e in errors[:MAX_PROBLEMS]]
    if len(errors) > MAX_PROBLEMS:
        problems.append(f"and {len(errors) - MAX_PROBLEMS} more")
    return problems, []


def pod_spec_problems(spec: dict[str, Any]) -> list[str]:
    """What the API server's pod validation refuses that no JSON schema says (kubernetes pkg/apis/core/validation,
    ValidateVolumeMounts and validateLocalDescendingPath): a mount of a volume the pod does not declare, a mount path
    used twice in a container, ``subPath`` and ``subPathExpr`` together, and a subPath that is absolute or climbs
    with ``..``."""
    problems: list[str] = []
    volumes = {str(as_mapping(v).get("name")) for v in spec.get("volumes") or [] if isinstance(v, dict)}
    if not spec.get("containers"):
        problems.append("spec.containers: a pod needs at least one container")
    for field in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(field) or []):
            container = as_mapping(container)
            if not container.get("image"):
                problems.append(f"spec.{field}[{i}].image: required (container {container.get('name')!r})")
            paths: set[str] = set()
            for j, mount in enumerate(container.get("volumeMounts") or []):
                mount = as_mapping(mount)
                where = f"spec.{field}[{i}].volumeMounts[{j}]"
                if str(mount.get("name")) not in volumes:
                    problems.append(f"{where}.name: {mount.get('name')!r} is not a volume of the pod")
                path = str(mount.get("mountPath") or "")
                if path in paths:
                    problems.append(f"{where}.mountPath: {path} is mounted twice in the container")
                paths.add(path)
                if mount.get("subPath") and mount.get("subPathExpr"):
                    problems.append(f"{where}: subPath and subPathExpr are mutually exclusive")
                for key in ("subPath", "subPathExpr"):
                    sub = mount.get(key)
                    if not isinstance(sub, str) or not sub:
                        continue
                    if sub.startswith("/"):
                        problems.append(f"{where}.{key}: {sub!r} must be a relative path")
                    if ".." in sub.replace("\\", "/").split("/"):
                        problems.append(f"{where}.{key}: {sub!r} must not contain '..'")
    return problems
