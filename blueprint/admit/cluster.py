"""What ``blueprint admit`` knows of the cluster: the Kubernetes objects, Helm releases and node groups of one
ResourceGraph, indexed for the questions a workload's path asks (does this namespace exist, which LocalQueue is
``default`` there, which controller serves JobSets). Nothing here is a second model of the cluster: every answer is
read from the graph the program registered, or from the instance catalogs for per-node figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import yaml

from blueprint.graph.model import SECRET, UNKNOWN, GraphResource, ResourceGraph

KUBERNETES_PREFIX = "kubernetes:"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
MANIFEST_FILES = ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup", "kubernetes:yaml:ConfigFile")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace (1.22+)


def as_mapping(value: Any) -> dict[str, Any]:
    """A mapping from a graph value: providers send nested objects as JSON strings at times; anything else is
    empty."""
    if isinstance(value, str) and value not in (UNKNOWN, SECRET):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """A list from a graph or manifest value; anything else is empty."""
    return value if isinstance(value, list) else []


def as_str_map(value: Any) -> dict[str, str]:
    """Labels, annotations, selectors: a string-to-string mapping (values that are not strings are dropped)."""
    return {str(k): v for k, v in as_mapping(value).items() if isinstance(v, str)}


@dataclass(frozen=True)
class K8sObject:
    """One Kubernetes object the program creates, as its manifest."""

    api_version: str
    kind: str
    name: str
    namespace: str | None
    manifest: dict[str, Any]
    resource: str  # the graph resource's name, for messages that point at the program

    @property
    def ref(self) -> str:
        """``Kind/namespace/name`` (``Kind/name`` for cluster-scoped objects), the form every reason uses."""
        return object_ref(self.kind, self.name, self.namespace)

    @property
    def labels(self) -> dict[str, str]:
        """``metadata.labels``."""
        return as_str_map(as_mapping(self.manifest.get("metadata")).get("labels"))

    @property
    def spec(self) -> dict[str, Any]:
        """``spec`` (empty when absent)."""
        return as_mapping(self.manifest.get("spec"))


def object_ref(kind: str, name: str, namespace: str | None = None) -> str:
    """The ``Kind/namespace/name`` form of an object reference."""
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


@dataclass(frozen=True)
class Release:
    """A Helm release: which chart runs in the cluster, with which values."""

    name: str
    chart: str
    namespace: str
    values: dict[str, Any]
    resource: str

    @property
    def ref(self) -> str:
        """``Release/namespace/name``."""
        return object_ref("Release", self.name, self.namespace)

    def mentions(self, keywords: Iterable[str]) -> bool:
        """Whether the release's name or chart contains one of the keywords (lower case)."""
        text = f"{self.name} {self.chart}".lower()
        return any(k in text for k in keywords)


@dataclass(frozen=True)
class ManifestFile:
    """A set of manifests applied from a file or URL (``kubernetes:yaml/v2:ConfigFile``), e.g. an operator."""

    resource: str
    file: str

    @property
    def ref(self) -> str:
        """``ConfigFile/<resource name>``."""
        return object_ref("ConfigFile", self.resource)

    def mentions(self, keywords: Iterable[str]) -> bool:
        """Whether the resource name or file contains one of the keywords (lower case)."""
        text = f"{self.resource} {self.file}".lower()
        return any(k in text for k in keywords)


@dataclass(frozen=True)
class KueueConfig:
    """The parts of Kueue's ``Configuration`` (the chart's ``managerConfig.controllerManagerConfigYaml``) that decide
    which jobs it manages and which resources it counts."""

    release: str
    manage_jobs_without_queue_name: bool
    managed_namespace_selector: dict[str, Any] | None
    frameworks: tuple[str, ...]
    excluded_resource_prefixes: tuple[str, ...]


# The integrations Kueue's own manager ConfigMap enables (kubernetes-sigs/kueue config/components/manager), used only
# when the release's configuration names none.
KUEUE_DEFAULT_FRAMEWORKS = ("batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster",
                            "jobset.x-k8s.io/jobset", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob",
                            "kubeflow.org/tfjob", "kubeflow.org/xgboostjob")


@dataclass
class ClusterView:
    """The graph's Kubernetes objects, releases and cloud facts, indexed once."""

    graph: ResourceGraph
    objects: list[K8sObject] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    manifest_files: list[ManifestFile] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index: dict[tuple[str, str | None, str], K8sObject] = {}
        for res in sorted(self.graph.resources, key=lambda r: r.urn):
            if res.type == HELM_RELEASE:
                self.releases.append(_release(res))
            elif res.type in MANIFEST_FILES:
                self.manifest_files.append(ManifestFile(res.name, str(res.inputs.get("file") or "")))
            elif res.type.startswith(KUBERNETES_PREFIX):
                obj = _object(res)
                if obj is not None and (obj.kind, obj.namespace, obj.name) not in self._index:
                    self.objects.append(obj)
                    self._index[(obj.kind, obj.namespace, obj.name)] = obj

    def add(self, obj: K8sObject) -> None:
        """An object applied with the workloads (a ConfigMap in the same file): their pods may use it."""
        if (obj.kind, obj.namespace, obj.name) not in self._index:
            self.objects.append(obj)
            self._index[(obj.kind, obj.namespace, obj.name)] = obj

    # --- objects -------------------------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> K8sObject | None:
        """The object of this kind and name (in the namespace, for namespaced kinds)."""
        return self._index.get((kind, namespace, name))

    def of_kind(self, kind: str, namespace: str | None = None) -> list[K8sObject]:
        """Every object of a kind, in one namespace when given."""
        return [o for o in self.objects if o.kind == kind and (namespace is None or o.namespace == namespace)]

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        """A namespace's labels, with the name label the API server adds; None when the graph has no such
        Namespace."""
        ns = self.get("Namespace", name)
        if ns is None:
            return None
        return {**ns.labels, NAMESPACE_NAME_LABEL: name}

    def installed_by(self, keywords: Iterable[str]) -> str | None:
        """The release or manifest file that installs a controller named by one of the keywords, if any."""
        words = tuple(keywords)
        for release in self.releases:
            if release.mentions(words):
                return release.ref
        for manifest in self.manifest_files:
            if manifest.mentions(words):
                return manifest.ref
        return None

    def release(self, keywords: Iterable[str]) -> Release | None:
        """The first Helm release whose name or chart contains one of the keywords."""
        words = tuple(keywords)
        return next((r for r in self.releases if r.mentions(words)), None)

    # --- the cluster ---------------------------------------------------------------------------------------------

    @cached_property
    def kueue(self) -> KueueConfig | None:
        """Kueue's configuration from its Helm release; None when Kueue is not installed."""
        release = next((r for r in self.releases if r.mentions(("kueue",))), None)
        if release is None:
            return None
        text = as_mapping(release.values.get("managerConfig")).get("controllerManagerConfigYaml")
        config: dict[str, Any] = {}
        if isinstance(text, str):
            try:
                loaded = yaml.safe_load(text)
            except yaml.YAMLError:
                loaded = None
            config = loaded if isinstance(loaded, dict) else {}
        frameworks = as_list(as_mapping(config.get("integrations")).get("frameworks"))
        prefixes = as_list(as_mapping(config.get("resources")).get("excludeResourcePrefixes"))
        selector = config.get("managedJobsNamespaceSelector")
        return KueueConfig(
            release=release.ref,
            manage_jobs_without_queue_name=config.get("manageJobsWithoutQueueName") is True,
            managed_namespace_selector=selector if isinstance(selector, dict) else None,
            frameworks=tuple(str(f) for f in frameworks) if frameworks else KUEUE_DEFAULT_FRAMEWORKS,
            excluded_resource_prefixes=tuple(str(p) for p in prefixes),
        )

    def resources_of(self, type_: str) -> list[GraphResource]:
        """Graph resources of one type token (cloud resources: pod identity, IAM, security groups)."""
        return self.graph.of_type(type_)


def _object(res: GraphResource) -> K8sObject | None:
    inputs = res.inputs
    kind, api_version = inputs.get("kind"), inputs.get("apiVersion")
    meta = as_mapping(inputs.get("metadata"))
    name, namespace = meta.get("name"), meta.get("namespace")
    if not (isinstance(kind, str) and isinstance(api_version, str) and isinstance(name, str)):
        return None
    return K8sObject(api_version, kind, name, namespace if isinstance(namespace, str) and namespace else None,
                     inputs, res.name)


def _release(res: GraphResource) -> Release:
    inputs = res.inputs
    return Release(name=str(inputs.get("name") or res.name), chart=str(inputs.get("chart") or ""),
                   namespace=str(inputs.get("namespace") or "default"), values=as_mapping(inputs.get("values")),
                   resource=res.name)


def matches_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector`` (matchLabels and matchExpressions In, NotIn, Exists, DoesNotExist) against labels.

    An empty or absent selector matches everything, as the API does for namespace and pod selectors."""
    if not selector:
        return True
    for key, value in as_str_map(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for expr in as_list(selector.get("matchExpressions")):
        if not isinstance(expr, dict):
            return False
        key, op = str(expr.get("key")), str(expr.get("operator"))
        values = [str(v) for v in as_list(expr.get("values"))]
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True
