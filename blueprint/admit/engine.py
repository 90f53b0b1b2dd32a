"""Walk each workload through the cluster the graph describes, in the order the cluster would, and say at each step
whether it passes and, if not, which object blocks it and how to fix it.

Steps: ``schema`` (the API accepts the object and a controller serves its kind), ``namespace``, ``pod-security``,
``admission-policy`` (ValidatingAdmissionPolicies), ``limits`` (LimitRange defaults, ResourceQuota), ``kueue``
(queue, quota, flavor), ``scheduling`` (node groups at max size), ``volumes``, ``identity`` (service account, bucket
access), ``network`` (NetworkPolicies, the node network for Lustre). Each step reports every problem it finds; a
step that cannot be judged because an earlier one failed is skipped, with the cause named. A workload is admitted
when no step reports a problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from blueprint.admit.cloud import cloud_admit, cluster_cloud, every_cloud, kubernetes_version, node_groups
from blueprint.admit.cluster import NAMESPACE_NAME_LABEL, ClusterView, K8sObject, as_list, as_mapping
from blueprint.admit.identity import check_identity, service_account
from blueprint.admit.kueue import KueueResult, admit_with_kueue, slurm_owns_gpus_short
from blueprint.admit.network import check_network
from blueprint.admit.nodes import GPU, NODE_GROUP_LABEL, NodeGroup
from blueprint.admit.podsecurity import enforced_level, pod_security_problems
from blueprint.admit.podsets import derive_pod_sets
from blueprint.admit.policies import evaluate_policies
from blueprint.admit.quantity import show
from blueprint.admit.references import admission_problems, scheduling_problems
from blueprint.admit.resources import PodResources, pod_resources, quota_problems, with_extra
from blueprint.admit.results import STEPS, AdmitReport, WorkloadResult
from blueprint.admit.routing import admit_routing, is_routing
from blueprint.admit.sbatch import SbatchJob
from blueprint.admit.scheduling import Placement, larger_than_any_node, schedule
from blueprint.admit.schema import is_builtin, pod_spec_problems, schema_problems
from blueprint.admit.slurmjob import admit_sbatch
from blueprint.admit.validation import count_problems
from blueprint.admit.volumes import check_volumes
from blueprint.admit.workloads import PodSet, Submitted
from blueprint.graph.model import ResourceGraph

TENANT_LABEL = "gpu-cluster/tenant"  # components/kubernetes/objects/common.py
# Kueue refusals after which no flavor is known, so where the pods would go cannot be said (a held queue, a missing
# priority class or topology level still leave the flavor Kueue would give).
KUEUE_BLOCKS_SCHEDULING = {"kueue-framework", "queue-exists", "queue-namespace", "quota", "resource-not-covered"}
# Kinds Kueue holds suspended until it admits them, before any pod exists: for these the pods' checks (Pod Security,
# the admission policies, which all match pods, LimitRange and ResourceQuota) come after Kueue. Pods, Deployments
# and StatefulSets are admitted through their pods (created, then gated), so theirs come first.
SUSPENDED_KINDS = {"Job", "JobSet", "MPIJob", "TrainJob", "RayJob"}
KUEUE_FIRST = ("schema", "namespace", "kueue", "pod-security", "admission-policy", "limits", "scheduling", "volumes",
               "identity", "network")


def _schema(view: ClusterView, item: Submitted, result: WorkloadResult) -> list[PodSet] | None:
    step = result.steps["schema"]
    problems, notes = schema_problems(item.manifest, kubernetes_version(view))
    step.notes += notes
    for problem in problems:
        step.fail(item.ref, "schema", f"{problem}: the API server refuses the object (Kubernetes "
                  f"{kubernetes_version(view)}); fix the field")
    for problem in count_problems(item.kind, item.manifest):
        step.fail(item.ref, "count-validation", f"{problem}: the API server (or, for a custom kind, its controller) "
                  "refuses it; fix the field")
    info = item.info
    if info is None:
        step.fail(item.ref, "not-a-workload", f"{item.kind} is not a workload admit walks (Pod, Job, Deployment, "
                  "StatefulSet, JobSet, MPIJob, TrainJob, RayJob): apply it with kubectl, or add it to the program")
        result.skip_rest("schema", "not a workload")
        return None
    step.detail = f"{item.api_version} {item.kind}"
    if info.controller:
        installer = view.installed_by(info.controller)
        trainer = view.release(("kubeflow-trainer",))
        if installer is None and item.kind == "JobSet" and trainer is not None \
                and as_mapping(trainer.values.get("jobset")).get("install") is not False:
            installer = f"{trainer.ref} (installs JobSet)"
        if installer is None:
            step.fail(item.ref, "controller-installed", f"{item.kind} needs {info.controller_name}, which the cluster "
                      f"does not install: nothing would create its pods; install it in the stack, or submit a kind "
                      "the cluster runs")
        else:
            step.notes.append(f"{item.kind} controller: {installer}")
    derived = derive_pod_sets(item, view)
    for obj, rule, message in derived.problems:
        step.fail(obj, rule, message)
    step.notes += derived.notes
    if item.kind == "TrainJob":  # its pods come from a runtime's template: check them as the Trainer creates them
        for pod_set in derived.pod_sets:
            pod_problems, _ = schema_problems(pod_set.pod, kubernetes_version(view))
            for problem in pod_problems:
                step.fail(item.ref, "schema", f"pod set {pod_set.name}, {problem}: fix spec.trainer or the runtime")
    # What pod validation refuses beyond the schema: the object itself for Kubernetes' own kinds; for custom kinds
    # the API server checks only the CRD schema, so the Jobs or pods their controller creates are refused later.
    refused = "the object" if is_builtin(item.api_version) else "the Jobs or pods its controller creates"
    for pod_set in derived.pod_sets:
        for problem in pod_spec_problems(pod_set.spec):
            step.fail(item.ref, "pod-validation", f"pod set {pod_set.name}, {problem}: the API server refuses "
                      f"{refused}; fix the pod template")
    pods = "the pod" if item.kind == "Pod" else "the pods its controller creates"
    for pod_set in derived.pod_sets:
        for obj, rule, message in admission_problems(view, item.namespace, pod_set, pods):
            step.fail(obj, rule, message)
    if not derived.pod_sets:
        result.skip_rest("schema", "no pods could be derived")
        return None
    step.detail += ", " + ", ".join(f"{p.name} x{p.count}" for p in derived.pod_sets)
    return derived.pod_sets


# Namespaces every cluster has (Kubernetes "Namespaces", Initial namespaces): the graph need not create them.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _namespace(view: ClusterView, item: Submitted, result: WorkloadResult) -> dict[str, str] | None:
    step = result.steps["namespace"]
    labels = view.namespace_labels(item.namespace)
    step.detail = item.namespace
    if labels is None and item.namespace in INITIAL_NAMESPACES:
        labels = {NAMESPACE_NAME_LABEL: item.namespace}  # as the API server labels it; the stack labels it not
        step.detail += " (every cluster has it)"
    if labels is not None and labels.get(TENANT_LABEL) != "true":
        teams = _team_namespaces(view)
        step.notes.append(f"{item.namespace} is not a team namespace: the stack gives it no team queue, quota or "
                          f"shared storage, and team members' Roles do not reach it; team work goes to "
                          f"{', '.join(teams) or 'a team namespace (none in this stack)'}")
    if labels is None:
        teams = _team_namespaces(view)
        step.fail(f"Namespace/{item.namespace}", "namespace-exists",
                  f"namespace {item.namespace} is not in the cluster: set metadata.namespace to a team namespace "
                  f"({', '.join(teams) or 'none in this stack'})")
        result.skip_rest("namespace", f"namespace {item.namespace} missing")
    return labels


def _team_namespaces(view: ClusterView) -> list[str]:
    """The namespaces the stack creates for teams."""
    return sorted(n.name for n in view.of_kind("Namespace") if n.labels.get(TENANT_LABEL) == "true")


def _pod_security(item: Submitted, labels: dict[str, str], pod_sets: list[PodSet], result: WorkloadResult) -> None:
    step = result.steps["pod-security"]
    level = enforced_level(labels)
    step.detail = level
    for pod_set in pod_sets:
        problems = pod_security_problems(pod_set.pod, level)
        if problems:
            step.fail(f"Namespace/{item.namespace}", "pod-security",
                      f"Pod Security '{level}' (label pod-security.kubernetes.io/enforce of namespace "
                      f"{item.namespace}) refuses pod set {pod_set.name}: {'; '.join(problems)}. Remove these from "
                      "the pod template")


def _policies(view: ClusterView, item: Submitted, labels: dict[str, str], pod_sets: list[PodSet],
              result: WorkloadResult) -> None:
    step = result.steps["admission-policy"]
    applied: set[str] = set()
    workload = {**item.manifest, "metadata": {**as_mapping(item.manifest.get("metadata")),
                                              "namespace": item.namespace}}  # as the API server stores it
    targets = [(item.kind, workload)] + [(f"pod set {p.name}", p.pod) for p in pod_sets]
    for what, obj in targets:
        outcome = evaluate_policies(view, obj, item.namespace, labels)
        applied |= outcome.applied
        for policy, message in outcome.denied:
            step.fail(policy, "admission-policy", f"{what} breaks it: {message}; change the "
                      f"{'object' if what == item.kind else 'pod template'} to satisfy it")
        step.notes += outcome.warnings
    step.detail = f"{len(applied)} polic{'y' if len(applied) == 1 else 'ies'} applied" if applied else \
        "no policy applies"


def _limits(view: ClusterView, item: Submitted, pod_sets: list[PodSet], result: WorkloadResult,
            groups: list[NodeGroup]) -> tuple[dict[str, PodResources], frozenset[str]]:
    """The pods' resources after defaulting, and the pod sets one of whose pods is larger than any node (the
    namespace's quota is not what refuses those: scheduling says why)."""
    step = result.steps["limits"]
    limit_ranges = view.of_kind("LimitRange", item.namespace)
    resources = {p.name: pod_resources(p.pod, limit_ranges) for p in pod_sets}
    for pod_set in pod_sets:
        for obj, message in resources[pod_set.name].problems:
            step.fail(obj or item.ref, "limit-range" if obj else "resources", f"pod set {pod_set.name}: {message}")
        if resources[pod_set.name].defaulted:
            step.notes.append(f"pod set {pod_set.name} gets {'; '.join(resources[pod_set.name].defaulted)}")
    notes: list[str] = []
    counted = []
    oversize = frozenset(p.name for p in pod_sets if larger_than_any_node(resources[p.name].requests, groups))
    for pod_set in pod_sets:
        if pod_set.name in oversize:
            continue
        cloud = cluster_cloud(view)
        what, extra = cloud_admit(cloud).injected_requests(pod_set.pod) if cloud is not None else ("", {})
        if extra:
            notes.append(f"pod set {pod_set.name}: {what} adds "
                         f"{', '.join(f'{show(r, v)} {r}' for r, v in extra.items())} per pod to what the "
                         "ResourceQuota counts (Kueue does not see it)")
        counted.append((pod_set.count, with_extra(resources[pod_set.name], extra)))
    zero_hint = slurm_owns_gpus_short(view)
    for obj, message in quota_problems(view.of_kind("ResourceQuota", item.namespace), counted, notes, zero_hint):
        step.fail(obj, "resource-quota", message)
    step.notes += notes
    names = [o.name for o in limit_ranges] + [o.name for o in view.of_kind("ResourceQuota", item.namespace)]
    step.detail = ", ".join(names) if names else "no LimitRange or ResourceQuota"
    return resources, oversize


def _cpu_flavors(view: ClusterView, cluster_queue: str | None, groups: list[NodeGroup]) -> list[str]:
    """The flavors of the ClusterQueue whose node group has no GPU (a team's CPU flavors, ``teams[].cpuQuotas``)."""
    cq = view.get("ClusterQueue", cluster_queue) if cluster_queue else None
    if cq is None:
        return []
    gpu_groups = {g.name for g in groups if g.allocatable.get(GPU, Fraction(0)) > 0}
    out = []
    for group in as_list(cq.spec.get("resourceGroups")):
        for f in as_list(as_mapping(group).get("flavors")):
            name = str(as_mapping(f).get("name"))
            flavor = view.get("ResourceFlavor", name)
            node_group = as_mapping(flavor.spec.get("nodeLabels")).get(NODE_GROUP_LABEL) if flavor else None
            if node_group is not None and node_group not in gpu_groups:
                out.append(name)
    return out


def _cpu_only_on_gpu_nodes(pod_sets: list[PodSet], resources: dict[str, PodResources], placements: list[Placement],
                           groups: list[NodeGroup], kueue: KueueResult, cpu_flavors: list[str]) -> list[str]:
    """Where a pod set that asks for no GPU lands on GPU nodes, say so and why: the team's queue has no CPU flavor, or
    its CPU flavor did not take the pod set (Kueue then tries the next flavor, a GPU one); it holds the CPU and memory
    of a GPU node (issue 36; docs/limits.md, "CPU-only work")."""
    by_name = {g.name: g for g in groups}
    notes = []
    for placement in placements:
        group = by_name.get(placement.node_group)
        res = resources.get(placement.pod_set)
        if group is None or res is None or res.requests.get(GPU, Fraction(0)) > 0 \
                or group.allocatable.get(GPU, Fraction(0)) <= 0:
            continue
        flavor = kueue.flavors.get(placement.pod_set)
        passed = [r for r in kueue.passed_over.get(placement.pod_set, [])
                  if r.split(":", 1)[0].removeprefix("flavor ") in cpu_flavors]
        if not flavor:
            why = "its node selection lets it run there"
        elif passed:
            why = f"Kueue's flavor {flavor} places it there, past the team's CPU flavor ({'; '.join(passed)})"
        else:
            why = (f"Kueue's flavor {flavor} places it there (the team's queue has no CPU flavor: give the team a CPU "
                   "quota on a node group without GPUs, teams[].cpuQuotas)")
        notes.append(f"pod set {placement.pod_set} asks for no GPU but lands on {group.ref} ({group.instance_type}, "
                     f"a GPU node group): {why}; it holds a GPU node's CPU and memory while it runs")
    return notes


def _selector_past_cpu_flavor(view: ClusterView, pod_sets: list[PodSet], obj: str, rule: str, kueue: KueueResult,
                              cpu_flavors: list[str], groups: list[NodeGroup]) -> str | None:
    """What is true when no group has the labels a pod set selects because Kueue gave it a team CPU flavor: Kueue
    compares a pod's nodeSelector with a flavor only on the keys of the flavors' nodeLabels (Kueue docs, "Resource
    Flavor", "ResourceFlavor labels"; kueue pkg/scheduler/flavorassigner flavorSelector: "Remove affinity constraints
    with irrelevant keys", keeping the allowedKeys of the resource group's flavors), so a CPU-only pod that selects a
    label only GPU groups carry (their instance type, say) is still admitted to the CPU flavor, whose node label Kueue
    then adds: no node has both. None when that is not the case (the scheduling message stands)."""
    if rule != "node-selector":
        return None
    pod_set = next((p for p in pod_sets if obj == f"Pod/{p.name}"), None)
    flavor_name = kueue.flavors.get(pod_set.name) if pod_set is not None else None
    if pod_set is None or flavor_name not in cpu_flavors:
        return None
    flavor = view.get("ResourceFlavor", str(flavor_name))
    added = as_mapping(flavor.spec.get("nodeLabels")) if flavor is not None else {}
    selector = {str(k): str(v) for k, v in as_mapping(pod_set.spec.get("nodeSelector")).items()}
    home = [g for g in groups if all(g.labels.get(str(k)) == str(v) for k, v in added.items())]
    for key, value in selector.items():
        if key in added or any(g.labels.get(key) == value for g in home):
            continue
        carriers = [g for g in groups if g.labels.get(key) == value]
        if not carriers or any(g.allocatable.get(GPU, Fraction(0)) <= 0 for g in carriers):
            continue
        flavor_labels = ", ".join(f"{k}={v}" for k, v in sorted(added.items()))
        return (f"pod set {pod_set.name} asks for no GPU, so Kueue admits it to the team's CPU flavor {flavor_name} "
                f"(teams[].cpuQuotas) and adds that flavor's nodeSelector {flavor_labels}; its own nodeSelector "
                f"{key}={value} names a label only GPU node groups carry ({', '.join(g.ref for g in carriers)}), so "
                "no node has both and its pods stay Pending (Kueue matches a pod's nodeSelector against a flavor only "
                f"on the flavor's label keys). Drop {key} from the nodeSelector to run on "
                f"{', '.join(g.name for g in home) or 'the CPU flavor'}'s nodes; to hold a GPU node's CPU on "
                f"purpose, select {NODE_GROUP_LABEL}={carriers[0].name} instead, which Kueue matches against its "
                "flavors")
    return None


def _identity_used(pod_sets: list[PodSet], bucket_users: set[str], volumes: list[K8sObject]) -> bool:
    """Whether the pods use a cloud identity: they write the bucket, or mount it with GCS FUSE (whose sidecar runs
    in the pod)."""
    drivers = frozenset().union(*(part.IDENTITY_DRIVERS for part in every_cloud()))
    uses_fuse = any(as_mapping(v.spec.get("csi")).get("driver") in drivers for v in volumes)
    return uses_fuse or any(service_account(p) in bucket_users for p in pod_sets)


def admit_one(view: ClusterView, groups: list[NodeGroup], item: Submitted,
              submitted: Sequence[Submitted] = ()) -> WorkloadResult:
    """The verdict on one submitted object (``submitted``: the file's other objects, which a routing object may name:
    its pool's Deployment and picker Service, its route's pool)."""
    if is_routing(item):
        return admit_routing(view, item, submitted, kubernetes_version(view), _namespace)
    result = WorkloadResult(item.ref, item.source, item.namespace,
                            KUEUE_FIRST if item.kind in SUSPENDED_KINDS else STEPS)
    pod_sets = _schema(view, item, result)
    if pod_sets is None:
        return result
    labels = _namespace(view, item, result)
    if labels is None:
        return result
    _pod_security(item, labels, pod_sets, result)
    resources, oversize = _limits(view, item, pod_sets, result, groups)
    kueue = admit_with_kueue(view, item, labels, pod_sets, resources, oversize)
    step = result.steps["kueue"]
    step.detail, step.notes = kueue.detail, kueue.notes
    for obj, rule, message in kueue.problems:
        step.fail(obj, rule, message)
    result.cluster_queue = kueue.cluster_queue
    flavors = sorted(set(kueue.flavors.values()))
    result.flavor = ", ".join(flavors) if flavors else None
    _policies(view, item, labels, pod_sets, result)  # pods as created: with the flavor's labels and tolerations
    if not any(rule in KUEUE_BLOCKS_SCHEDULING for _, rule, _ in kueue.problems):
        placed = schedule(pod_sets, resources, groups)
        step = result.steps["scheduling"]
        cpu_flavors = _cpu_flavors(view, kueue.cluster_queue, groups)
        for obj, rule, message in placed.problems:
            message = _selector_past_cpu_flavor(view, pod_sets, obj, rule, kueue, cpu_flavors, groups) or message
            step.fail(obj, rule, message)
        step.notes += placed.notes
        result.placements = placed.placements
        step.notes += _cpu_only_on_gpu_nodes(pod_sets, resources, placed.placements, groups, kueue, cpu_flavors)
        step.detail = "; ".join(f"{p.pod_set}: {p.pods} pod{'s' if p.pods != 1 else ''} on {p.node_group} "
                                f"({p.nodes} node{'s' if p.nodes != 1 else ''})" for p in placed.placements)
    else:
        result.steps["scheduling"].skipped = "Kueue admits it to no flavor"
    for pod_set in pod_sets:
        for obj, rule, message in scheduling_problems(view, item.namespace, pod_set):
            result.steps["scheduling"].fail(obj, rule, message)
    nodes_used = sum(p.nodes for p in result.placements) if result.placements else sum(p.count for p in pod_sets)
    problems, notes, volumes = check_volumes(view, item.namespace, pod_sets, nodes_used)
    step = result.steps["volumes"]
    for obj, rule, message in problems:
        step.fail(obj, rule, message)
    step.notes += notes
    step.detail = ", ".join(sorted({v.name for v in volumes})) if volumes else ""
    problems, notes, bucket_users = check_identity(view, item.namespace, pod_sets)
    step = result.steps["identity"]
    for obj, rule, message in problems:
        step.fail(obj, rule, message)
    step.notes += notes
    step.detail = ", ".join(sorted({service_account(p) for p in pod_sets}))
    problems, notes = check_network(view, item.namespace, labels, pod_sets,
                                    _identity_used(pod_sets, bucket_users, volumes), volumes)
    step = result.steps["network"]
    for obj, rule, message in problems:
        step.fail(obj, rule, message)
    step.notes += notes
    return result


# Objects a workload file may carry beside its workloads, applied with them (kubectl apply -f): their pods use them,
# and they are not judged as workloads (an inference-perf run's ConfigMap, examples/workloads).
COMPANIONS = {("v1", "ConfigMap")}


def admit_workloads(graph: ResourceGraph, items: Sequence[Submitted | SbatchJob]) -> AdmitReport:
    """The verdict on every submitted object and sbatch script against the graph (ConfigMaps in the files are
    applied with them: see COMPANIONS)."""
    view = ClusterView(graph)
    workloads: list[Submitted | SbatchJob] = []
    # Only beside a workload: a file of ConfigMaps alone is judged object by object (not a workload).
    alone = all(isinstance(i, Submitted) and (i.api_version, i.kind) in COMPANIONS for i in items)
    for item in items:
        if not alone and isinstance(item, Submitted) and (item.api_version, item.kind) in COMPANIONS:
            raw = item.manifest.get("metadata")
            metadata: dict[str, Any] = raw if isinstance(raw, dict) else {}
            view.add(K8sObject(item.api_version, item.kind, str(metadata.get("name", "")),
                               str(metadata.get("namespace") or "default"), item.manifest, item.source))
        else:
            workloads.append(item)
    groups = node_groups(view)
    files = [w for w in workloads if isinstance(w, Submitted)]
    return AdmitReport(graph.stack, [admit_sbatch(view, groups, item) if isinstance(item, SbatchJob)
                                     else admit_one(view, groups, item, files) for item in workloads])
