"""The ``containers`` step of ``blueprint admit`` on an sbatch script: each ``--container-image`` (read by
blueprint/admit/sbatch_images.py) judged as the cluster's pyxis importer will judge it when the step starts."""

from __future__ import annotations

from blueprint.admit.cluster import ClusterView, as_mapping
from blueprint.admit.results import Step
from blueprint.admit.sbatch import SbatchJob
from blueprint.admit.sbatch_images import Image
from blueprint.admit.slurm import SLURM_NAMESPACE, Partition
from components.kubernetes.enroot import (
    ENROOT_HOOKS_DIR,
    FABRIC_HOOK,
    IMPORTER_CONFIG_MAP,
    IMPORTER_KEY,
    NOT_ALLOWED,
    allowed_prefixes,
    importer_refusal,
    is_squashfs,
)


def fabric_note(view: ClusterView, job: SbatchJob, part: Partition, step: Step) -> None:
    """On a partition whose NodeSets carry the GPUDirect fabric's enroot hook (objects/slurm_fabric.py), an srun
    outside a container gets none of the fabric's NCCL environment: named, with the fix."""
    hook = f"{ENROOT_HOOKS_DIR}/{FABRIC_HOOK}"
    fabric = [name for name in part.nodesets
              if (ns := view.get("NodeSet", name, SLURM_NAMESPACE)) is not None
              and any(as_mapping(m).get("mountPath") == hook
                      for m in as_mapping(ns.spec.get("slurmd")).get("volumeMounts") or [])]
    if fabric and job.bare_sruns:
        step.notes.append(f"{', '.join(job.bare_sruns)}: srun without --container-image on GPUDirect nodes "
                          f"({', '.join(fabric)}): its tasks get none of the fabric's NCCL environment (the enroot "
                          "hook gives it to containers only) and NCCL falls back to its TCP sockets; run them in a "
                          "container, or source the plugin's profile in the script first (docs/slurm.md)")


def judge_images(view: ClusterView, images: list[Image], step: Step) -> None:
    """The ``containers`` step: each image against the registries the cluster's pyxis importer allows (read from its
    ConfigMap in the graph, the script slurmd runs), with the importer's own reasons. A refused image fails the step:
    Slurm starts the job, and that step fails in pyxis before the program runs."""
    if not images:
        step.detail = "no --container-image: the steps run in the slurmd pod's own environment"
        return
    cm = view.get("ConfigMap", IMPORTER_CONFIG_MAP, SLURM_NAMESPACE)
    data = as_mapping(cm.manifest.get("data")) if cm is not None else {}
    allowed = allowed_prefixes(str(data.get(IMPORTER_KEY) or ""))
    if cm is None or allowed is None:
        step.detail = "pyxis imports any image here"
        step.notes.append("no registry importer in this cluster's pyxis (its node groups' architectures differ, so "
                          "pyxis's own configuration is used): the images are not held to platform.allowedRegistries")
        return
    checked: list[str] = []
    for image in images:
        if image.value is None:
            step.notes.append(f"{image.where}: --container-image={image.written} is known only when the script runs "
                              "(not checked)")
        elif is_squashfs(image.value):
            step.notes.append(f"{image.where}: --container-image={image.value} is a squashfs file on the node: pyxis "
                              "starts it without the importer, so no registry rule applies")
        elif (why := importer_refusal(image.value, allowed)) is not None:
            fix = ("push the image to one of those registries, or add its registry to platform.allowedRegistries"
                   if why.endswith(NOT_ALLOWED) else
                   "write it as enroot reads it ([USER@][REGISTRY#]IMAGE[:TAG], a lowercase image path) from one "
                   "of those registries")
            step.fail(cm.ref, "pyxis-registries",
                      f"{image.where}: --container-image={image.value}: {why} ({', '.join(allowed)}: "
                      "platform.allowedRegistries); Slurm starts the job and this step fails in pyxis's importer "
                      f"before the program runs; {fix}")
        else:
            checked.append(image.value)
    if checked:
        step.detail = (f"{len(checked)} image{'s' if len(checked) > 1 else ''} from the registries pyxis imports "
                       f"from: {', '.join(sorted(set(checked)))}")
