"""The pods a submitted workload makes, by kind (Pod, Job, Deployment, StatefulSet, JobSet, MPIJob, TrainJob, RayJob),
as the controller that serves the kind would make them: one pod set per role, with its count and pod template."""

from __future__ import annotations

import copy
from typing import Any

from blueprint.admit.cluster import as_list, as_mapping, as_str_map
from blueprint.admit.trainjob import trainjob_pod_sets
from blueprint.admit.workloads import (
    Derivation,
    PodSet,
    Submitted,
    int_or,
    job_pod_count,
    jobset_pod_sets,
    one_per_node,
    pod_template,
)


def derive_pod_sets(item: Submitted, view: Any) -> Derivation:
    """The pod sets of a submitted workload (``view`` is the :class:`~blueprint.admit.cluster.ClusterView`, which a
    TrainJob's runtime is looked up in)."""
    spec = as_mapping(item.manifest.get("spec"))
    name, ns, kind = item.name, item.namespace, item.kind
    meta = as_mapping(item.manifest.get("metadata"))
    annotations = as_str_map(meta.get("annotations"))
    out = Derivation()
    if kind == "Pod":
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": ns, "labels": item.labels, "annotations": annotations},
               "spec": copy.deepcopy(spec)}
        out.pod_sets.append(PodSet("main", 1, pod))
    elif kind == "Job":
        labels = {"batch.kubernetes.io/job-name": name, "job-name": name}
        pod = pod_template(spec.get("template"), f"{name}-0", ns, labels)
        out.pod_sets.append(PodSet("main", job_pod_count(spec), pod, one_per_node(pod, {})))
    elif kind in ("Deployment", "StatefulSet"):
        pod = pod_template(spec.get("template"), f"{name}-0", ns, {})
        out.pod_sets.append(PodSet("main", int_or(spec.get("replicas"), 1), pod, one_per_node(pod, {})))
    elif kind == "JobSet":
        out.pod_sets += jobset_pod_sets(spec, name, ns, annotations)
    elif kind == "MPIJob":
        for role, replica in sorted(as_mapping(spec.get("mpiReplicaSpecs")).items()):
            replica = as_mapping(replica)
            labels = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/job-role": role.lower(),
                      "training.kubeflow.org/operator-name": "mpi-operator"}
            pod = pod_template(replica.get("template"), f"{name}-{role.lower()}-0", ns, labels)
            out.pod_sets.append(PodSet(role.lower(), int_or(replica.get("replicas"), 1), pod, one_per_node(pod, {})))
    elif kind == "TrainJob":
        trainjob_pod_sets(item, view, out)
    elif kind == "RayJob":
        cluster = as_mapping(spec.get("rayClusterSpec"))
        head = as_mapping(cluster.get("headGroupSpec"))
        labels = {"ray.io/cluster": name, "ray.io/node-type": "head"}
        out.pod_sets.append(PodSet("head", 1, pod_template(head.get("template"), f"{name}-head", ns, labels)))
        for group in as_list(cluster.get("workerGroupSpecs")):
            group = as_mapping(group)
            group_name = str(group.get("groupName") or "workers")
            count = int_or(group.get("replicas"), int_or(group.get("minReplicas"), 1))
            labels = {"ray.io/cluster": name, "ray.io/node-type": "worker", "ray.io/group": group_name}
            out.pod_sets.append(PodSet(group_name, count * int_or(group.get("numOfHosts"), 1),
                                       pod_template(group.get("template"), f"{name}-{group_name}-0", ns, labels)))
    for pod_set in out.pod_sets:
        if not as_list(pod_set.spec.get("containers")):
            out.problems.append((item.ref, "schema", f"pod set {pod_set.name} has no containers: its pod template "
                                 "must list at least one container"))
        restart = pod_set.spec.get("restartPolicy", "Always")
        if kind in ("Job", "JobSet") and restart not in ("Never", "OnFailure"):
            out.problems.append((item.ref, "schema", f"pod set {pod_set.name}: restartPolicy {restart}: the pods of "
                                 "a Job restart Never or OnFailure (the API refuses Always, the default); set "
                                 "restartPolicy in the pod template"))
    return out
