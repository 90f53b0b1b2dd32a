"""Workload files in, pod sets out.

A workload file is YAML, possibly several documents (``---``) or a ``kind: List``, each a Kubernetes object; or an
sbatch script (a shebang, then ``#SBATCH`` lines), recognised before any YAML parsing and read by
:mod:`blueprint.admit.sbatch`. Every
workload kind is turned into its pod sets (Kueue's word): the pods its controller will create, as many as run at
once, from its pod templates:

- ``Pod``: itself; ``Job``: ``spec.template`` x parallelism (at most completions);
- ``JobSet``: each replicated job's template x replicas x parallelism;
- ``MPIJob``: the Launcher and Worker replica specs;
- ``TrainJob``: its runtime's JobSet template, with ``spec.trainer`` (numNodes, resourcesPerNode, image, command,
  args, env) applied to the trainer's ``node`` container (see :mod:`blueprint.admit.trainjob`);
- ``RayJob``: the head and each worker group of ``spec.rayClusterSpec``;
- ``Deployment`` / ``StatefulSet``: the template x replicas.

Pods carry the labels their controller adds (job name, JobSet and replicated-job names, MPI role), because network
policies, anti-affinity and admission policies select on them.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from blueprint.admit.cluster import as_list, as_mapping, as_str_map, matches_selector, object_ref
from blueprint.admit.sbatch import SbatchError, SbatchJob, is_sbatch_script, parse_sbatch
from blueprint.files.input import UnreadableInputError, read_input_text

MAX_WORKLOAD_FILE_BYTES = 16 * 1024 * 1024
MAX_INTEGER_DIGITS = 40  # as a graph's integers (blueprint/graph/model.py): more than any quantity has
MAX_YAML_DEPTH = 64
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class WorkloadFileError(ValueError):
    """A workload file that cannot be read, is not YAML, or holds something that is not a Kubernetes object
    (``blueprint admit`` exits 2 with this message)."""


@dataclass(frozen=True)
class KindInfo:
    """How admit treats one workload kind."""

    kueue_framework: str  # the name in Kueue's integrations.frameworks
    controller: tuple[str, ...]  # words naming the release or manifest that installs the controller; () = built in
    controller_name: str  # what to install, for messages
    pod_based: bool = False  # Kueue's pod-based integrations: only managed in managedJobsNamespaceSelector namespaces


# Keyed by (API group, kind); the version is checked by the schema step.
WORKLOAD_KINDS: dict[tuple[str, str], KindInfo] = {
    ("", "Pod"): KindInfo("pod", (), "", pod_based=True),
    ("batch", "Job"): KindInfo("batch/job", (), ""),
    ("apps", "Deployment"): KindInfo("deployment", (), "", pod_based=True),
    ("apps", "StatefulSet"): KindInfo("statefulset", (), "", pod_based=True),
    ("jobset.x-k8s.io", "JobSet"): KindInfo("jobset.x-k8s.io/jobset", ("jobset",), "the JobSet controller"),
    ("kubeflow.org", "MPIJob"): KindInfo("kubeflow.org/mpijob", ("mpi-operator",), "the Kubeflow MPI Operator"),
    ("trainer.kubeflow.org", "TrainJob"): KindInfo("trainer.kubeflow.org/trainjob", ("kubeflow-trainer",),
                                                   "Kubeflow Trainer"),
    ("ray.io", "RayJob"): KindInfo("ray.io/rayjob", ("kuberay",), "the KubeRay operator"),
}


@dataclass(frozen=True)
class Submitted:
    """One object of a workload file."""

    source: str  # path, with #n when the file holds several objects
    manifest: dict[str, Any]

    @property
    def api_version(self) -> str:
        """``apiVersion``."""
        return str(self.manifest.get("apiVersion"))

    @property
    def group(self) -> str:
        """The API group (``""`` for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def kind(self) -> str:
        """``kind``."""
        return str(self.manifest.get("kind"))

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(as_mapping(self.manifest.get("metadata")).get("name"))

    @property
    def namespace(self) -> str:
        """``metadata.namespace``, ``default`` when unset (as kubectl submits it without ``-n``)."""
        ns = as_mapping(self.manifest.get("metadata")).get("namespace")
        return ns if isinstance(ns, str) and ns else "default"

    @property
    def labels(self) -> dict[str, str]:
        """``metadata.labels``."""
        return as_str_map(as_mapping(self.manifest.get("metadata")).get("labels"))

    @property
    def ref(self) -> str:
        """``Kind/namespace/name``."""
        return object_ref(self.kind, self.name, self.namespace)

    @property
    def info(self) -> KindInfo | None:
        """The workload kind's facts, or None when the object is not a workload admit knows."""
        return WORKLOAD_KINDS.get((self.group, self.kind))


@dataclass
class PodSet:
    """Pods of one template that run at the same time."""

    name: str
    count: int
    pod: dict[str, Any]  # a Pod manifest: apiVersion, kind, metadata (name, namespace, labels, annotations), spec
    one_per_node: bool = False  # required anti-affinity on kubernetes.io/hostname against its own pods

    @property
    def spec(self) -> dict[str, Any]:
        """The pod's ``spec``."""
        spec = self.pod.setdefault("spec", {})
        assert isinstance(spec, dict)
        return spec

    @property
    def labels(self) -> dict[str, str]:
        """The pod's labels."""
        return as_str_map(as_mapping(self.pod.get("metadata")).get("labels"))

    def containers(self) -> list[dict[str, Any]]:
        """Init and app containers (ephemeral ones are never in a template)."""
        return [c for key in ("initContainers", "containers") for c in as_list(self.spec.get(key))
                if isinstance(c, dict)]


@dataclass
class Derivation:
    """The pod sets of a workload, or why they cannot be known."""

    pod_sets: list[PodSet] = field(default_factory=list)
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (object, rule, message)
    notes: list[str] = field(default_factory=list)


# --- reading the files ------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML as ``kubectl`` reads manifests, minus what only hurts: duplicate keys are refused (kubectl's strict
    decoding refuses them too), and so are aliases (which make billion-laughs bombs possible) and nesting deeper
    than :data:`MAX_YAML_DEPTH`. Timestamps stay strings, as they do once kubectl turns YAML into JSON."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.MarkedYAMLError(problem="aliases (*name) are not allowed; write the value out",
                                       problem_mark=mark)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.MarkedYAMLError(problem=f"nested deeper than {MAX_YAML_DEPTH} levels",
                                           problem_mark=self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An integer of at most :data:`MAX_INTEGER_DIGITS` digits (Kubernetes quantities are int64; Python's own
        limit on converting longer ones is an error, not a refusal)."""
        if sum(c.isdigit() for c in str(node.value)) > MAX_INTEGER_DIGITS:
            raise yaml.MarkedYAMLError(problem=f"an integer of more than {MAX_INTEGER_DIGITS} digits",
                                       problem_mark=node.start_mark)
        value: int = super().construct_yaml_int(node)
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        """A finite number: NaN and infinity have no JSON form, so the API server never receives them."""
        value: float = super().construct_yaml_float(node)
        if value != value or value in (float("inf"), float("-inf")):
            raise yaml.MarkedYAMLError(problem=f"{node.value!r} is not a finite number (JSON has no NaN or infinity)",
                                       problem_mark=node.start_mark)
        return value

    def construct_yaml_str(self, node: yaml.ScalarNode) -> str:
        """A string without NUL characters (no Kubernetes field holds one; they end C strings where they land)."""
        value: str = super().construct_yaml_str(node)
        if "\0" in value:
            raise yaml.MarkedYAMLError(problem="a NUL character in a string", problem_mark=node.start_mark)
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if not (isinstance(key_node, yaml.ScalarNode) and key_node.tag == "tag:yaml.org,2002:str"):
                raise yaml.MarkedYAMLError(
                    problem=f"the key {str(key_node.value)[:60]!r} is not a string (a Kubernetes object's keys are "
                    "JSON strings; quote it)", problem_mark=key_node.start_mark)
            key = key_node.value
            if key in seen:
                raise yaml.MarkedYAMLError(problem=f"duplicate key {str(key)[:60]!r} (kubectl refuses it)",
                                           problem_mark=key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)
_Loader.add_constructor("tag:yaml.org,2002:str", _Loader.construct_yaml_str)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _documents(text: str, shown: str) -> list[Any]:
    loader = _Loader(text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            docs.append(loader.construct_document(node) if node is not None else None)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise WorkloadFileError(f"{shown}: {where}not valid YAML: {err.problem or err}") from None
    except yaml.YAMLError as err:
        raise WorkloadFileError(f"{shown}: not valid YAML: {str(err)[:200]}") from None
    except RecursionError:
        raise WorkloadFileError(f"{shown}: nested too deeply") from None
    finally:
        loader.dispose()
    return docs


def _check_object(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise WorkloadFileError(f"{where}: not a Kubernetes object (a mapping with apiVersion, kind and "
                                "metadata.name)")
    meta = doc.get("metadata")
    missing = [k for k in ("apiVersion", "kind") if not isinstance(doc.get(k), str) or not doc.get(k)]
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        missing.append("metadata.name")
    if missing:
        raise WorkloadFileError(f"{where}: not a Kubernetes object: {', '.join(missing)} missing (a generateName "
                                "alone is not enough: admit names objects by their name)")
    return doc


def load_workloads(paths: Sequence[Path]) -> list[Submitted | SbatchJob]:
    """Every object of the files, in order, and each sbatch script (a shebang and ``#SBATCH`` lines, recognised
    before any YAML parsing); any file that cannot be read, parsed or is neither is a :class:`WorkloadFileError`
    naming it."""
    out: list[Submitted | SbatchJob] = []
    for path in paths:
        shown = str(path)
        try:
            text = read_input_text(path, MAX_WORKLOAD_FILE_BYTES, shown)
        except UnreadableInputError as err:
            raise WorkloadFileError(str(err)) from None
        if text.startswith("#!"):
            if not is_sbatch_script(text):
                raise WorkloadFileError(f"{shown}: a script without #SBATCH lines: admit reads sbatch scripts (a "
                                        "shebang, then #SBATCH options) and Kubernetes YAML")
            try:
                out.append(parse_sbatch(text, shown, path.name))
            except SbatchError as err:
                raise WorkloadFileError(str(err)) from None
            continue
        objects: list[dict[str, Any]] = []
        for i, doc in enumerate(_documents(text, shown), start=1):
            if doc is None:
                continue
            where = f"{shown} (document {i})"
            obj = _check_object(doc, where) if not (isinstance(doc, dict) and doc.get("kind") == "List") else doc
            if obj.get("kind") == "List":
                objects += [_check_object(item, f"{where} items[{j}]")
                            for j, item in enumerate(as_list(obj.get("items")))]
            else:
                objects.append(obj)
        if not objects:
            raise WorkloadFileError(f"{shown}: no Kubernetes object in the file")
        many = len(objects) > 1
        out += [Submitted(f"{shown}#{i}" if many else shown, obj) for i, obj in enumerate(objects, start=1)]
    return out


# --- pod sets -----------------------------------------------------------------------------------------------------


def pod_template(template: Any, name: str, namespace: str, extra_labels: dict[str, str]) -> dict[str, Any]:
    """A Pod manifest from a pod template, with the labels its controller adds."""
    tmpl = as_mapping(template)
    meta = as_mapping(tmpl.get("metadata"))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {**as_str_map(meta.get("labels")), **extra_labels},
                         "annotations": as_str_map(meta.get("annotations"))},
            "spec": copy.deepcopy(as_mapping(tmpl.get("spec")))}


def int_or(value: Any, default: int) -> int:
    """A non-negative integer field, or the default."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def job_pod_count(job_spec: dict[str, Any]) -> int:
    """Pods of a Job that run at once: parallelism (default 1), at most completions when set."""
    parallelism = int_or(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    return min(parallelism, completions) if isinstance(completions, int) and completions >= 0 else parallelism


def one_per_node(pod: dict[str, Any], annotations: dict[str, str]) -> bool:
    """Whether at most one of these pods runs per node: required pod anti-affinity on ``kubernetes.io/hostname``
    that selects the pod itself, or JobSet's exclusive placement per host."""
    if annotations.get("alpha.jobset.sigs.k8s.io/exclusive-topology") == "kubernetes.io/hostname":
        return True
    labels = as_str_map(as_mapping(pod.get("metadata")).get("labels"))
    anti = as_mapping(as_mapping(as_mapping(pod.get("spec")).get("affinity")).get("podAntiAffinity"))
    for term in as_list(anti.get("requiredDuringSchedulingIgnoredDuringExecution")):
        if isinstance(term, dict) and term.get("topologyKey") == "kubernetes.io/hostname" \
                and matches_selector(as_mapping(term.get("labelSelector")), labels):
            return True
    return False


def jobset_pod_sets(spec: dict[str, Any], name: str, namespace: str,
                    annotations: dict[str, str]) -> list[PodSet]:
    """The pod sets of a JobSet spec: one per replicated job."""
    out = []
    for rj in as_list(spec.get("replicatedJobs")):
        if not isinstance(rj, dict):
            continue
        rj_name = str(rj.get("name") or "job")
        job = as_mapping(rj.get("template"))
        job_spec = as_mapping(job.get("spec"))
        labels = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": rj_name,
                  "batch.kubernetes.io/job-name": f"{name}-{rj_name}-0", "job-name": f"{name}-{rj_name}-0",
                  **as_str_map(as_mapping(job.get("metadata")).get("labels"))}
        pod = pod_template(job_spec.get("template"), f"{name}-{rj_name}-0-0", namespace, labels)
        count = int_or(rj.get("replicas"), 1) * job_pod_count(job_spec)
        exclusive = {**annotations, **as_str_map(as_mapping(job.get("metadata")).get("annotations"))}
        out.append(PodSet(rj_name, count, pod, one_per_node(pod, exclusive)))
    return out
