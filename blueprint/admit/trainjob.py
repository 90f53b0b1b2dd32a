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
"""

from __future__ import annotations

import copy
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
    out.pod_sets += jobset_pod_sets(template, item.name, item.namespace, {})
