"""Kueue: is the workload managed, which queue takes it, and does it fit a flavor's quota?

Management follows Kueue's configuration (the kueue Helm release's ``controllerManagerConfigYaml``): a kind is
managed when its framework is in ``integrations.frameworks``; a job with the ``kueue.x-k8s.io/queue-name`` label
always is, one without it when ``manageJobsWithoutQueueName`` is true and its namespace matches
``managedJobsNamespaceSelector`` (pod-based kinds - Pod, Deployment, StatefulSet - only in such namespaces, label or
not). A managed job without the label goes to the namespace's LocalQueue ``default`` (Kueue's LocalQueueDefaulting).

The LocalQueue leads to its ClusterQueue, which must select the namespace and not be held (``stopPolicy``). Each pod
set is given the first flavor of the resource group that covers its resources whose node labels and taints suit it
and whose quota still fits the workload: usage may reach nominalQuota plus what the queue may borrow, which is the
smaller of its borrowingLimit and what the other queues of its cohort lend (their lendingLimit, else their nominal
quota) - a bound, not a simulation of the cohort's current usage. Resources named in ``excludeResourcePrefixes`` are
not counted; any other requested resource no resource group covers makes the workload inadmissible. The flavor's
nodeLabels and tolerations are then added to the pods, as Kueue does when it admits.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from blueprint.admit.cluster import ClusterView, K8sObject, as_list, as_mapping, as_str_map, matches_selector
from blueprint.admit.quantity import QuantityError, parse_quantity, show
from blueprint.admit.resources import PodResources
from blueprint.admit.scheduling import term_matches, tolerates
from blueprint.admit.slurm import slurm_gpu_node_groups
from blueprint.admit.workloads import QUEUE_LABEL, PodSet, Submitted

DEFAULT_QUEUE = "default"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
HELD_POLICIES = ("Hold", "HoldAndDrain")
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


@dataclass
class KueueResult:
    """What Kueue does with the workload."""

    managed: bool = False
    cluster_queue: str | None = None
    flavors: dict[str, str] = field(default_factory=dict)  # pod set -> flavor
    # pod set -> why each flavor listed before its own did not take it ("flavor cpu: ..."), in the queue's order
    passed_over: dict[str, list[str]] = field(default_factory=dict)
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (object, rule, message)
    notes: list[str] = field(default_factory=list)
    detail: str = ""


def _release_hint(cq: str) -> str:
    return (f"release it when the capacity may be used: kubectl patch clusterqueue {cq} --type merge -p "
            "'{\"spec\":{\"stopPolicy\":\"None\"}}' (README, \"Before you commit capacity\"; the next pulumi up "
            "holds it again)")


def _quota(resource: dict[str, Any], key: str) -> Fraction | None:
    value = resource.get(key)
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _flavor_quotas(cq: K8sObject, flavor: str) -> dict[str, dict[str, Any]]:
    for group in as_list(cq.spec.get("resourceGroups")):
        for f in as_list(as_mapping(group).get("flavors")):
            if as_mapping(f).get("name") == flavor:
                return {str(r.get("name")): r for r in as_list(as_mapping(f).get("resources")) if isinstance(r, dict)}
    return {}


def usable(view: ClusterView, cq: K8sObject, flavor: str, resource: str) -> tuple[Fraction, str]:
    """The most of ``resource`` in ``flavor`` the queue can use, and how that bound is made."""
    own = _flavor_quotas(cq, flavor).get(resource, {})
    nominal = _quota(own, "nominalQuota") or Fraction(0)
    cohort = cq.spec.get("cohortName") or cq.spec.get("cohort")
    if not cohort:
        return nominal, f"nominal {show(resource, nominal)}, no cohort"
    lendable = Fraction(0)
    for other in view.of_kind("ClusterQueue"):
        if other.name == cq.name or (other.spec.get("cohortName") or other.spec.get("cohort")) != cohort:
            continue
        theirs = _flavor_quotas(other, flavor).get(resource)
        if theirs is not None:
            lending = _quota(theirs, "lendingLimit")
            lendable += lending if lending is not None else (_quota(theirs, "nominalQuota") or Fraction(0))
    cohort_obj = view.get("Cohort", str(cohort))
    if cohort_obj is not None:
        for group in as_list(cohort_obj.spec.get("resourceGroups")):
            for f in as_list(as_mapping(group).get("flavors")):
                if as_mapping(f).get("name") == flavor:
                    for r in as_list(as_mapping(f).get("resources")):
                        if as_mapping(r).get("name") == resource:
                            lendable += _quota(as_mapping(r), "nominalQuota") or Fraction(0)
    borrowing = _quota(own, "borrowingLimit")
    borrow = lendable if borrowing is None else min(borrowing, lendable)
    how = (f"nominal {show(resource, nominal)} + {show(resource, borrow)} borrowed from cohort {cohort} "
           f"({'borrowingLimit ' + show(resource, borrowing) + ', ' if borrowing is not None else ''}"
           f"the others lend {show(resource, lendable)})")
    return nominal + borrow, how


def is_managed(view: ClusterView, item: Submitted, ns_labels: dict[str, str]) -> tuple[bool, str | None]:
    """Whether Kueue manages the workload, and if not and it should have, why (a problem message)."""
    config = view.kueue
    info = item.info
    if config is None or info is None:
        return False, None
    enabled = info.kueue_framework in config.frameworks
    labelled = QUEUE_LABEL in item.labels
    in_selector = matches_selector(config.managed_namespace_selector, ns_labels)
    wanted = (labelled or config.manage_jobs_without_queue_name) and (in_selector or (labelled and not info.pod_based))
    if not wanted:
        return False, None
    if not enabled:
        if labelled:
            return False, (f"Kueue does not manage {item.kind} (framework {info.kueue_framework} is not in "
                           f"integrations.frameworks of {config.release}): the queue-name label is ignored and the "
                           "pods bypass the team's queue; add the framework to the Kueue configuration")
        return False, None
    return True, None


def _flavor_fits_pods(flavor: K8sObject, pod_set: PodSet) -> str | None:
    """Why a flavor cannot take a pod set (its node labels contradict the pod's selector, or it has taints the pod
    does not tolerate); None when it can."""
    node_labels = as_str_map(flavor.spec.get("nodeLabels"))
    selector = as_str_map(pod_set.spec.get("nodeSelector"))
    for key, value in selector.items():
        if key in node_labels and node_labels[key] != value:
            return f"its nodeLabels {key}={node_labels[key]} contradict the pod's nodeSelector {key}={value}"
    terms = as_list(as_mapping(as_mapping(as_mapping(pod_set.spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution")).get("nodeSelectorTerms"))
    if terms and not any(term_matches(as_mapping(t), node_labels, only_known=True) for t in terms):
        return "its nodeLabels match none of the pod's required node affinity terms"
    tolerations = as_list(pod_set.spec.get("tolerations")) + as_list(flavor.spec.get("tolerations"))
    for taint in as_list(flavor.spec.get("nodeTaints")):
        taint = as_mapping(taint)
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"its nodeTaints {taint.get('key')}:{taint.get('effect')} are not tolerated"
    return None


def admit_with_kueue(view: ClusterView, item: Submitted, ns_labels: dict[str, str], pod_sets: list[PodSet],
                     resources: dict[str, PodResources], oversize: frozenset[str] = frozenset()) -> KueueResult:
    """Walk the workload through Kueue; on success the pod sets carry their flavor's node labels and
    tolerations. Pod sets in ``oversize`` (a pod larger than any node: scheduling says so) are not counted against
    the quota, whose fix (more quota) would not place them."""
    out = KueueResult()
    managed, problem = is_managed(view, item, ns_labels)
    if problem is not None:
        out.problems.append((item.ref, "kueue-framework", problem))
        return out
    if not managed:
        why = "Kueue is not installed" if view.kueue is None else (
            f"not managed by Kueue (no {QUEUE_LABEL} label, and namespace {item.namespace} is not one Kueue manages "
            "jobs without it in)")
        out.notes.append(why)
        out.detail = "not managed"
        return out
    out.managed = True
    ns = item.namespace
    queue = item.labels.get(QUEUE_LABEL, DEFAULT_QUEUE)
    lq = view.get("LocalQueue", queue, ns)
    if lq is None:
        others = ", ".join(sorted(q.name for q in view.of_kind("LocalQueue", ns))) or "none"
        how = (f"label the workload {QUEUE_LABEL}: <one of them>" if others != "none" else
               "submit it to a team namespace (each has a LocalQueue 'default')")
        out.problems.append((f"LocalQueue/{ns}/{queue}", "queue-exists",
                             f"namespace {ns} has no LocalQueue {queue!r} (its LocalQueues: {others}); Kueue keeps the "
                             f"workload suspended: {how}"))
        return out
    cq_name = str(lq.spec.get("clusterQueue"))
    cq = view.get("ClusterQueue", cq_name)
    out.cluster_queue = cq_name
    if cq is None:
        out.problems.append((f"ClusterQueue/{cq_name}", "queue-exists",
                             f"{lq.ref} points to ClusterQueue {cq_name}, which is not in the cluster: fix the "
                             "LocalQueue's spec.clusterQueue"))
        return out
    if not matches_selector(as_mapping(cq.spec.get("namespaceSelector")), ns_labels):
        out.problems.append((cq.ref, "queue-namespace", f"{cq.ref} does not select namespace {ns} "
                             "(spec.namespaceSelector): use the namespace's own queue"))
    for holder in (lq, cq):
        if holder.spec.get("stopPolicy") in HELD_POLICIES:
            kind = holder.kind
            hint = _release_hint(holder.name) if holder is cq else (
                f"release it: kubectl patch localqueue -n {ns} {holder.name} --type merge -p "
                "'{\"spec\":{\"stopPolicy\":\"None\"}}'")
            out.problems.append((holder.ref, "queue-held", f"the {kind} {holder.name} is held (stopPolicy: "
                                 f"{holder.spec.get('stopPolicy')}): it admits nothing until it is released; {hint}"))
    priority = item.labels.get(PRIORITY_LABEL)
    if priority and view.get("WorkloadPriorityClass", priority) is None:
        present = ", ".join(sorted(p.name for p in view.of_kind("WorkloadPriorityClass"))) or "none"
        out.problems.append((f"WorkloadPriorityClass/{priority}", "priority-class",
                             f"the workload asks for WorkloadPriorityClass {priority} ({PRIORITY_LABEL}), which is "
                             f"not in the cluster (its classes: {present}): Kueue does not create its Workload; use "
                             "one of those"))
    for check in as_list(cq.spec.get("admissionChecks")) + [
            as_mapping(c).get("name") for c in as_list(as_mapping(cq.spec.get("admissionChecksStrategy")).get(
                "admissionChecks"))]:
        if check:
            out.notes.append(f"{cq.ref} waits for admission check {check} before it starts the workload")
    _assign_flavors(view, cq, pod_sets, resources, out, oversize)
    if out.flavors and not any(rule == "quota" for _, rule, _ in out.problems):
        for pod_set in pod_sets:
            flavor = view.get("ResourceFlavor", out.flavors.get(pod_set.name, ""))
            if flavor is not None:
                _inject(flavor, pod_set)
                _check_topology(view, flavor, pod_set, out)
    return out


def _covered(cq: K8sObject) -> list[tuple[list[str], list[str]]]:
    """(covered resources, flavor names) per resource group."""
    out = []
    for group in as_list(cq.spec.get("resourceGroups")):
        group = as_mapping(group)
        out.append(([str(r) for r in as_list(group.get("coveredResources"))],
                    [str(as_mapping(f).get("name")) for f in as_list(group.get("flavors"))]))
    return out


def _assign_flavors(view: ClusterView, cq: K8sObject, pod_sets: list[PodSet], resources: dict[str, PodResources],
                    out: KueueResult, oversize: frozenset[str] = frozenset()) -> None:
    config = view.kueue
    excluded = config.excluded_resource_prefixes if config else ()
    groups = _covered(cq)
    used: dict[tuple[str, str], Fraction] = {}
    for name in sorted({f for _, flavors in groups for f in flavors}):
        if view.get("ResourceFlavor", name) is None:
            out.problems.append((f"ResourceFlavor/{name}", "queue-exists", f"{cq.ref} names ResourceFlavor {name}, "
                                 "which is not in the cluster: Kueue keeps the queue inactive; create the flavor"))
            return
    for pod_set in pod_sets:
        res = resources[pod_set.name]
        asked = {r: v * pod_set.count for r, v in res.requests.items()
                 if v > 0 and not any(r.startswith(p) for p in excluded)}
        uncovered = sorted(r for r in asked if not any(r in covered for covered, _ in groups))
        if uncovered and not groups:  # a queue with no resource group: the team's GPUs are all Slurm's
            out.problems.append((cq.ref, "quota", f"pod set {pod_set.name} ({pod_set.count} pods) asks "
                                 f"{', '.join(uncovered)}, and {cq.ref} has no flavor for them: Kueue has no quota "
                                 f"for team {pod_set_namespace(pod_set)} on this stack"
                                 f"{_no_flavor_hint(view, pod_set_namespace(pod_set))}"))
            continue
        if uncovered:
            out.problems.append((cq.ref, "resource-not-covered",
                                 f"pod set {pod_set.name} requests {', '.join(uncovered)}, which no resource group of "
                                 f"{cq.ref} covers: Kueue never admits it; drop the request, or cover the resource "
                                 "in the queue"))
            continue
        chosen: list[str] = []
        passed: list[list[str]] = []
        for covered, flavors in groups:
            wanted = {r: v for r, v in asked.items() if r in covered}
            if not wanted:
                continue
            refusals = []
            for flavor_name in flavors:
                flavor = view.get("ResourceFlavor", flavor_name)
                assert flavor is not None
                unsuitable = _flavor_fits_pods(flavor, pod_set)
                if unsuitable:
                    refusals.append(f"flavor {flavor_name}: {unsuitable}")
                    continue
                short = []
                for resource, amount in wanted.items():
                    limit, how = usable(view, cq, flavor_name, resource)
                    if resource not in _flavor_quotas(cq, flavor_name) or used.get((flavor_name, resource), 0) \
                            + amount > limit:
                        before = used.get((flavor_name, resource), Fraction(0))
                        short.append(f"{show(resource, before + amount)} {resource} needed, at most "
                                     f"{show(resource, limit)} ({how})")
                if short:
                    refusals.append(f"flavor {flavor_name}: " + "; ".join(short))
                    continue
                for resource, amount in wanted.items():
                    used[(flavor_name, resource)] = used.get((flavor_name, resource), Fraction(0)) + amount
                chosen.append(flavor_name)
                passed.append(refusals)
                break
            else:
                if not flavors:
                    out.problems.append((cq.ref, "quota", f"pod set {pod_set.name} ({pod_set.count} pods) asks "
                                         f"{', '.join(sorted(wanted))}, and {cq.ref} has no flavor for them: Kueue has "
                                         f"no quota for team {pod_set_namespace(pod_set)} on this stack"
                                         f"{_no_flavor_hint(view, pod_set_namespace(pod_set))}"))
                    continue
                if pod_set.name in oversize:  # more quota would not place it: scheduling says why
                    out.notes.append(f"pod set {pod_set.name} fits no flavor of {cq.ref} ({'; '.join(refusals)}), "
                                     "but one of its pods is larger than any node (see scheduling)")
                    continue
                out.problems.append((cq.ref, "quota", f"pod set {pod_set.name} ({pod_set.count} pods) fits no "
                                     f"flavor of {cq.ref}: {'; '.join(refusals)}. Ask for fewer pods or less per pod, "
                                     "or raise the team's quota (teams[].quotas in the stack)"))
        if chosen:
            out.flavors[pod_set.name] = chosen[0]
            out.passed_over[pod_set.name] = passed[0]
    out.detail = f"queue {cq.name}" + (f", flavor {', '.join(sorted(set(out.flavors.values())))}"
                                       if out.flavors else "")


def pod_set_namespace(pod_set: PodSet) -> str:
    """The namespace the pod set's pods are created in."""
    return str(as_mapping(pod_set.pod.get("metadata")).get("namespace") or "default")


def slurm_owns_gpus_hint(view: ClusterView, team: str) -> str:
    """Why a team namespace has no Kueue quota when Slurm runs the GPU node groups, and what to do; "" otherwise."""
    owned = slurm_gpu_node_groups(view)
    if not owned:
        return ""
    return (f"; the GPU node groups {', '.join(owned)} are Slurm's (scheduler.slurm.nodeGroups): slurmd holds their "
            f"GPUs and Kueue admits no pod there, so the team's quota on them is its Slurm account's GPU limit. "
            f"Submit the job to Slurm (sbatch from the login nodes, --account={team}; examples/slurm/), or give Kueue "
            "a node group outside scheduler.slurm.nodeGroups and the team a quota on it (teams[].quotas)")


def slurm_owns_gpus_short(view: ClusterView) -> str:
    """The short form of :func:`slurm_owns_gpus_hint`, for the ResourceQuota that follows Kueue's quota."""
    owned = slurm_gpu_node_groups(view)
    return f"; the GPU node groups {', '.join(owned)} are Slurm's: run the job with sbatch (see kueue)" if owned else ""


def _no_flavor_hint(view: ClusterView, team: str) -> str:
    return slurm_owns_gpus_hint(view, team) or (": give the team a quota on a node group (teams[].quotas in the "
                                                "stack)")


def _inject(flavor: K8sObject, pod_set: PodSet) -> None:
    spec = pod_set.spec
    labels = as_str_map(flavor.spec.get("nodeLabels"))
    if labels:
        spec["nodeSelector"] = {**as_str_map(spec.get("nodeSelector")), **labels}
    tolerations = [copy.deepcopy(t) for t in as_list(flavor.spec.get("tolerations"))]
    if tolerations:
        spec["tolerations"] = as_list(spec.get("tolerations")) + tolerations


def _check_topology(view: ClusterView, flavor: K8sObject, pod_set: PodSet, out: KueueResult) -> None:
    annotations = as_str_map(as_mapping(pod_set.pod.get("metadata")).get("annotations"))
    level = annotations.get(REQUIRED_TOPOLOGY) or annotations.get(PREFERRED_TOPOLOGY)
    if not level:
        return
    topology_name = flavor.spec.get("topologyName")
    topology = view.get("Topology", str(topology_name)) if topology_name else None
    levels = [str(as_mapping(lv).get("nodeLabel")) for lv in as_list(topology.spec.get("levels"))] if topology else []
    if level not in levels:
        where = f"Topology {topology_name} levels: {', '.join(levels)}" if topology else \
            f"flavor {flavor.name} has no topology"
        out.problems.append((flavor.ref, "topology", f"pod set {pod_set.name} asks for topology level {level}; "
                             f"{where}: use one of those levels, or drop the annotation"))
