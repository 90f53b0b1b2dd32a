"""The pods of a Kubeflow Trainer ``TrainJob`` (trainer.kubeflow.org/v1alpha1, Trainer v2.3.0).

A TrainJob names a runtime (``spec.runtimeRef``: a ClusterTrainingRuntime by default, or a TrainingRuntime in its
namespace) whose JobSet template the Trainer controller instantiates. The runtime is looked up in the graph; a
runtime the Kubeflow Trainer Helm chart creates from its values (``runtimes.torchDistributed.enabled: true`` ->
``torch-distributed``) is not an object of the graph and is taken as present.

Assumption, kept simple: a chart runtime is one replicated job ``node`` of ``numNodes`` pods (default 1) whose
container ``node`` runs the runtime's image (the chart's torch-distributed runtime: ``pytorch/pytorch`` on Docker
Hub, kubeflow/trainer charts/kubeflow-trainer/templates/runtimes). For a runtime in the graph its whole JobSet
template is used. In both, ``spec.trainer`` is applied to the trainer step's ``node`` container: ``numNodes`` sets
the pod count, ``resourcesPerNode`` the container's resources, ``image``, ``command``, ``args`` replace and ``env``
is merged by name (Trainer's "trainer" ancestor step, label ``trainer.kubeflow.org/trainjob-ancestor-step``).

``spec.runtimePatches`` are then laid over the template as Trainer v2.3.0 does (pkg/runtime/core/trainingruntime.go
mergeRuntimePatches: a strategic merge patch of the JobSet spec per patch, in order): replicated jobs by name; in the
pod template, volumes, containers, init containers, image pull secrets and scheduling gates by name, a container's
volume mounts by mount path, maps (labels, annotations, nodeSelector, security contexts) merged, the rest replaced.
It is the only way a TrainJob adds volumes, a service account or a node selector to its pods, so admit must see it.
The Trainer webhook's checks on patches are applied too (pkg/runtime/framework/plugins/jobset/jobset.go: a
domain-prefixed ``manager``, only replicated jobs and containers the runtime has, no env for the ``node`` container).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from blueprint.admit.cluster import ClusterView, as_list, as_mapping
from blueprint.admit.workloads import Derivation, Submitted, jobset_pod_sets

TRAINER_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_CONTAINER = "node"
# Runtimes the kubeflow-trainer chart can create (its values key -> runtime name, default image). Images the chart
# builds from its own registry settings are given as the chart's defaults.
CHART_RUNTIMES: dict[str, tuple[str, str | None]] = {
    "torchDistributed": ("torch-distributed", "pytorch/pytorch"),
    "deepspeedDistributed": ("deepspeed-distributed", "ghcr.io/kubeflow/trainer/deepspeed-runtime"),
    "mlxDistributed": ("mlx-distributed", "ghcr.io/kubeflow/trainer/mlx-runtime"),
    "jaxDistributed": ("jax-distributed", None),
    "xgboostDistributed": ("xgboost-distributed", "ghcr.io/kubeflow/trainer/xgboost-runtime"),
    "fluxDistributed": ("flux-distributed", None),
}


def chart_runtimes(view: ClusterView) -> tuple[str | None, dict[str, str | None]]:
    """The Trainer release's ref and the runtimes its values enable (name -> default image)."""
    release = view.release(("kubeflow-trainer",))
    if release is None:
        return None, {}
    values = as_mapping(release.values.get("runtimes"))
    everything = values.get("defaultEnabled") is True
    enabled = {name: image for key, (name, image) in CHART_RUNTIMES.items()
               if everything or as_mapping(values.get(key)).get("enabled") is True}
    return release.ref, enabled


def _apply_trainer(container: dict[str, Any], trainer: dict[str, Any]) -> None:
    for key in ("image", "command", "args"):
        if key in trainer:
            container[key] = copy.deepcopy(trainer[key])
    if "resourcesPerNode" in trainer:
        container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    if "env" in trainer:
        names = {str(e.get("name")) for e in as_list(trainer["env"]) if isinstance(e, dict)}
        kept = [e for e in as_list(container.get("env")) if not (isinstance(e, dict) and e.get("name") in names)]
        container["env"] = kept + copy.deepcopy(as_list(trainer["env"]))


# k8s.io/apimachinery validation.IsDomainPrefixedPath: a DNS subdomain, a slash, then a path.
_DOMAIN_PREFIXED = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
                              r"/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")
# Pod spec lists a strategic merge patch merges by a key (k8s.io/api core/v1 patchMergeKey), the rest are replaced.
_MERGE_KEYS = {"volumes": "name", "containers": "name", "initContainers": "name", "imagePullSecrets": "name",
               "schedulingGates": "name", "env": "name", "volumeMounts": "mountPath", "replicatedJobs": "name"}
_MAPS = ("labels", "annotations", "nodeSelector", "securityContext")


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> None:
    """Lay ``patch`` over ``base`` the way a strategic merge patch of these types does: an item of a keyed list
    (core/v1 and JobSet patchMergeKey) merges field by field with the item of the same key, or is added; mappings
    merge; anything else is replaced."""
    for key, value in patch.items():
        if key in _MERGE_KEYS and isinstance(value, list):
            merge_key = _MERGE_KEYS[key]
            items = [i for i in as_list(base.get(key)) if isinstance(i, dict)]
            for new in value:
                if not isinstance(new, dict):
                    continue
                old = next((i for i in items if i.get(merge_key) == new.get(merge_key)), None)
                if old is None:
                    items.append(copy.deepcopy(new))
                else:
                    _merge(old, new)
            base[key] = items
        elif key in (*_MAPS, "metadata", "spec", "template") and isinstance(value, dict) \
                and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def _apply_patches(item: Submitted, template: dict[str, Any], out: Derivation) -> bool:
    """Lay the TrainJob's runtimePatches over the runtime's JobSet template as the Trainer does, in order; False (with
    problems) when its webhook refuses them. The webhook checks replicated job and container names against the
    template after the patches are merged (plugins/jobset Validate reads the merged runtime info), so a patch that
    names a new one is merged in, not refused: the pods it makes are then judged like any other (a container
    without an image, a job without containers)."""
    ok = True
    for i, patch in enumerate(as_list(as_mapping(item.manifest.get("spec")).get("runtimePatches"))):
        where = f"spec.runtimePatches[{i}]"
        patch = as_mapping(patch)
        manager = str(patch.get("manager") or "")
        if not _DOMAIN_PREFIXED.match(manager):
            out.problems.append((item.ref, "runtime-patch", f"{where}.manager {manager!r} must be a domain-prefixed "
                                 "path (example.com/submitter): the Trainer webhook refuses the TrainJob"))
            ok = False
        spec = as_mapping(as_mapping(as_mapping(patch.get("trainingRuntimeSpec")).get("template")).get("spec"))
        for rj_patch in as_list(spec.get("replicatedJobs")):
            pod_spec = as_mapping(as_mapping(as_mapping(as_mapping(as_mapping(rj_patch).get("template")).get(
                "spec")).get("template")).get("spec"))
            for c in as_list(pod_spec.get("containers")):
                if as_mapping(c).get("name") == TRAINER_CONTAINER and as_mapping(c).get("env"):
                    out.problems.append((item.ref, "runtime-patch", f"{where}: no env for the {TRAINER_CONTAINER} "
                                         "container in a patch (the Trainer webhook refuses it): set "
                                         "spec.trainer.env"))
                    ok = False
        _merge(template, {"replicatedJobs": as_list(spec.get("replicatedJobs"))})
    return ok


def trainjob_pod_sets(item: Submitted, view: ClusterView, out: Derivation) -> None:
    """Fill ``out`` with the TrainJob's pod sets, or the reason its runtime cannot be found."""
    spec = as_mapping(item.manifest.get("spec"))
    ref = as_mapping(spec.get("runtimeRef"))
    kind = str(ref.get("kind") or "ClusterTrainingRuntime")
    name = str(ref.get("name") or "")
    trainer = as_mapping(spec.get("trainer"))
    runtime = view.get(kind, name, item.namespace if kind == "TrainingRuntime" else None)
    release, from_chart = chart_runtimes(view)
    if runtime is not None:
        template = as_mapping(as_mapping(runtime.spec.get("template")).get("spec"))
        default_nodes = as_mapping(runtime.spec.get("mlPolicy")).get("numNodes")
        source = runtime.ref
    elif kind == "ClusterTrainingRuntime" and name in from_chart:
        image = from_chart[name]
        container: dict[str, Any] = {"name": TRAINER_CONTAINER}
        if image is not None:
            container["image"] = image
        elif "image" not in trainer:
            out.notes.append(f"the {name} runtime's default image is not known to admit: set spec.trainer.image")
        template = {"replicatedJobs": [{"name": "node", "template": {
            "metadata": {"labels": {TRAINER_STEP_LABEL: "trainer"}},
            "spec": {"template": {"spec": {"containers": [container]}}}}}]}
        default_nodes = 1
        source = f"{release} (runtime {name} created by the chart)"
        out.notes.append(f"runtime {name} comes from {release}: assumed one replicated job 'node' of numNodes pods")
    else:
        enabled = ", ".join(sorted(from_chart)) or "none"
        where = f"{release} enables: {enabled}" if release else "Kubeflow Trainer is not installed"
        out.problems.append((f"{kind}/{name}" if kind == "ClusterTrainingRuntime" else f"{kind}/{item.namespace}/"
                             f"{name}", "runtime-missing",
                             f"the TrainJob's runtime {kind} {name!r} is not in the cluster ({where}): name one of "
                             "those in spec.runtimeRef, or enable it in the kubeflow-trainer release values "
                             "(runtimes.<name>.enabled) or create it"))
        return
    template = copy.deepcopy(template)
    num_nodes = trainer.get("numNodes", default_nodes)
    num_nodes = num_nodes if isinstance(num_nodes, int) and num_nodes >= 1 else 1
    found = False
    for rj in as_list(template.get("replicatedJobs")):
        if not isinstance(rj, dict):
            continue
        job = as_mapping(rj.get("template"))
        step = as_mapping(as_mapping(job.get("metadata")).get("labels")).get(TRAINER_STEP_LABEL)
        if step != "trainer" and rj.get("name") != "node":
            continue
        job_spec = job.setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = num_nodes
        rj["replicas"] = 1
        pod_spec = as_mapping(as_mapping(job_spec.get("template")).get("spec"))
        for container in as_list(pod_spec.get("containers")):
            if isinstance(container, dict) and container.get("name") == TRAINER_CONTAINER:
                _apply_trainer(container, trainer)
                found = True
    if not found:
        out.problems.append((source, "runtime-missing", f"{source} has no trainer step with a container "
                             f"{TRAINER_CONTAINER!r} for spec.trainer: fix the runtime's JobSet template"))
        return
    if not _apply_patches(item, template, out):
        return
    out.pod_sets += jobset_pod_sets(template, item.name, item.namespace, {})
