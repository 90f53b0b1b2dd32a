"""What the API server's validation refuses in a workload's counts that no JSON schema says: a negative
parallelism, completions, backoffLimit, replicas or node count.

Without this check a negative count would be read as the default (1) and the workload admitted; the API server
refuses it (kubernetes pkg/apis/batch/validation and pkg/apis/apps/validation, ``ValidateNonnegativeField``: "must
be greater than or equal to 0"). For custom kinds (JobSet, MPIJob, RayJob, TrainJob), whose CRDs set no minimum,
the controller's webhook or the Jobs and pods it creates are refused instead. (Negative requests and limits are
refused with the other resource checks, :mod:`blueprint.admit.resources`.)
"""

from __future__ import annotations

from typing import Any

from blueprint.admit.cluster import as_mapping

_JOB = ("parallelism", "completions", "backoffLimit")
# Count fields by kind, as paths: "[*]" is every item of a list, "*" every value of a mapping.
COUNT_FIELDS: dict[str, tuple[str, ...]] = {
    "Job": tuple(f"spec.{f}" for f in _JOB),
    "Deployment": ("spec.replicas",),
    "StatefulSet": ("spec.replicas",),
    "JobSet": ("spec.replicatedJobs[*].replicas", *(f"spec.replicatedJobs[*].template.spec.{f}" for f in _JOB)),
    "MPIJob": ("spec.mpiReplicaSpecs.*.replicas", "spec.slotsPerWorker"),
    "RayJob": tuple(f"spec.rayClusterSpec.workerGroupSpecs[*].{f}"
                    for f in ("replicas", "minReplicas", "maxReplicas", "numOfHosts")),
    "TrainJob": ("spec.trainer.numNodes",),
}


def _values(node: Any, parts: list[str], where: str) -> list[tuple[str, Any]]:
    """(path, value) of every field a pattern path reaches in ``node``."""
    if not parts:
        return [(where, node)]
    head, rest = parts[0], parts[1:]
    if head.endswith("[*]"):
        items = as_mapping(node).get(head[:-3])
        if not isinstance(items, list):
            return []
        return [found for i, item in enumerate(items)
                for found in _values(item, rest, f"{where}.{head[:-3]}[{i}]".lstrip("."))]
    if head == "*":
        return [found for key, value in as_mapping(node).items()
                for found in _values(value, rest, f"{where}.{key}")]
    mapping = as_mapping(node)
    if head not in mapping:
        return []
    return _values(mapping[head], rest, f"{where}.{head}".lstrip("."))


def count_problems(kind: str, manifest: dict[str, Any]) -> list[str]:
    """The count fields of the workload (:data:`COUNT_FIELDS`) that are negative integers, each with its path.
    A count of another type is the schema's to refuse."""
    problems = []
    for pattern in COUNT_FIELDS.get(kind, ()):
        for where, value in _values(manifest, pattern.split("."), ""):
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                problems.append(f"{where}: {value} is negative: a count must be greater than or equal to 0")
    return problems
