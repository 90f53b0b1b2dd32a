"""Scheduling: which node group takes each pod set, and do its nodes, at the group's max size, hold every pod?

A group suits a pod when its labels satisfy the pod's ``nodeSelector`` and required node affinity (In, NotIn,
Exists, DoesNotExist, Gt, Lt), the pod tolerates the group's NoSchedule and NoExecute taints, and one empty node has
room for the pod (requests against the node's allocatable, :mod:`blueprint.admit.nodes`). The workload's pods are
then packed first-fit, largest first, onto the group's nodes, at most ``max size`` of them, at most one pod of a pod
set per node when the pod set asks so (anti-affinity on the hostname). The cluster is taken as empty: other
workloads and DaemonSet pods are not counted.

When no group suits a pod set, the reason names the group that comes closest (fewest unmet conditions; between
equals, the one with the resources the pod asks for) and its first unmet condition: labels, then taints, then room.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from blueprint.admit.cloud import is_per_node_label
from blueprint.admit.cluster import as_list, as_mapping, as_str_map
from blueprint.admit.nodes import GPU, NodeGroup, unknown_capacity
from blueprint.admit.quantity import show
from blueprint.admit.resources import PodResources
from blueprint.admit.workloads import PodSet

# The taint of the node groups teams have CPU quota on (components/spec/base.py TEAM_CPU_TAINT_KEY); only the team CPU
# flavors' pods tolerate it.
TEAM_CPU_TAINT_KEY = "gpu-cluster/team-cpu"


@dataclass(frozen=True)
class Placement:
    """Where one pod set runs: ``pods`` pods on ``nodes`` nodes of ``node_group``."""

    pod_set: str
    node_group: str
    nodes: int
    pods: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"pod_set": self.pod_set, "node_group": self.node_group, "nodes": self.nodes, "pods": self.pods}


@dataclass
class ScheduleResult:
    """Placements, or the reasons pods cannot be placed."""

    placements: list[Placement] = field(default_factory=list)
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def tolerates(tolerations: list[Any], taint: dict[str, Any]) -> bool:
    """Whether any toleration tolerates the taint (key, operator Equal/Exists, value, effect)."""
    for raw in tolerations:
        tol = as_mapping(raw)
        effect = tol.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key, op = tol.get("key"), tol.get("operator", "Equal")
        if op == "Exists" and (not key or key == taint.get("key")):
            return True
        if op == "Equal" and key == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op = str(expr.get("key")), str(expr.get("operator"))
    values = [str(v) for v in as_list(expr.get("values"))]
    value = labels.get(key)
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def term_matches(term: dict[str, Any], labels: dict[str, str], only_known: bool = False) -> bool:
    """A nodeSelectorTerm against node labels. Expressions on per-node labels (hostname, zone) count as met;
    with ``only_known``, so do expressions on keys the labels do not have (a flavor's partial view)."""
    for expr in as_list(term.get("matchExpressions")):
        expr = as_mapping(expr)
        key = str(expr.get("key"))
        if is_per_node_label(key) or (only_known and key not in labels):
            continue
        if not _expression_matches(expr, labels):
            return False
    return True


def label_problem(spec: dict[str, Any], group: NodeGroup) -> str | None:
    """Why the group's labels do not satisfy the pod's node selection; None when they do."""
    for key, value in as_str_map(spec.get("nodeSelector")).items():
        if is_per_node_label(key):
            continue
        if group.labels.get(key) != value:
            return f"nodeSelector {key}={value}, group has {key}={group.labels.get(key, '(unset)')}"
    affinity = as_mapping(as_mapping(spec.get("affinity")).get("nodeAffinity"))
    terms = as_list(as_mapping(affinity.get("requiredDuringSchedulingIgnoredDuringExecution")).get(
        "nodeSelectorTerms"))
    if terms and not any(term_matches(as_mapping(t), group.labels) for t in terms):
        return "no term of the required node affinity matches the group's labels"
    return None


def taint_problem(spec: dict[str, Any], group: NodeGroup) -> dict[str, str] | None:
    """The first NoSchedule/NoExecute taint of the group the pod does not tolerate."""
    tolerations = as_list(spec.get("tolerations"))
    for taint in group.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return taint
    return None


def room_problem(requests: dict[str, Fraction], group: NodeGroup, notes: set[str]) -> str | None:
    """Why one empty node of the group cannot hold the pod; None when it can."""
    for resource, amount in sorted(requests.items()):
        if amount <= 0:
            continue
        if unknown_capacity(resource) and resource not in group.allocatable:
            notes.add(f"{resource}: check allocatable on a {group.instance_type} node (kubectl get node -o "
                      f"jsonpath='{{.status.allocatable}}'); admit does not guess it")
            continue
        if resource == GPU and group.sharing.fail_requests_greater_than_one and amount > 1:
            return (f"asks {show(resource, amount)} {GPU}; the device plugin time-slices each GPU into "
                    f"{group.sharing.replicas} units and refuses more than 1 per container "
                    f"(failRequestsGreaterThanOne, {group.sharing.source})")
        have = group.allocatable.get(resource)
        if have is None or have <= 0:
            return f"asks {show(resource, amount)} {resource}; a {group.instance_type} node of {group.name} has none"
        if amount > have:
            return (f"asks {show(resource, amount)} {resource} per pod; a {group.instance_type} node of {group.name} "
                    f"has {show(resource, have)} allocatable")
    return None


def larger_than_any_node(requests: dict[str, Fraction], groups: list[NodeGroup]) -> tuple[str, str] | None:
    """(group ref, what) when one pod asks more of a resource than the biggest node of any group has: no quota,
    queue or group size can place it. Resources no group offers, or whose capacity admit does not guess, are left to
    the per-group checks."""
    for resource, amount in sorted(requests.items()):
        if amount <= 0 or unknown_capacity(resource):
            continue
        offering = [g for g in groups if g.allocatable.get(resource, Fraction(0)) > 0]
        if not offering:
            continue
        biggest = max(offering, key=lambda g: (g.allocatable[resource], g.name))
        have = biggest.allocatable[resource]
        if amount > have:
            return biggest.ref, (f"asks {show(resource, amount)} {resource} per pod, more than any node of the cluster "
                                 f"has: the biggest, a {biggest.instance_type} node of {biggest.name}, has "
                                 f"{show(resource, have)} allocatable")
    return None


def _candidate(pod_set: PodSet, requests: dict[str, Fraction], group: NodeGroup,
               notes: set[str]) -> tuple[int, bool, list[tuple[str, str]]]:
    """(unmet conditions, has the resources asked, [(rule, message)]) of a group for a pod set."""
    spec = pod_set.spec
    unmet: list[tuple[str, str]] = []
    labels = label_problem(spec, group)
    if labels:
        unmet.append(("node-selector", labels))
    taint = taint_problem(spec, group)
    if taint:
        value = f"={taint['value']}" if taint.get("value") else ""
        if taint["key"] == TEAM_CPU_TAINT_KEY:
            unmet.append(("toleration", f"its nodes carry taint {taint['key']}{value}:{taint['effect']}, which pod "
                          f"set {pod_set.name} does not tolerate: {group.name} is a node group teams have CPU quota "
                          "on (teams[].cpuQuotas), whose pods are those Kueue admits to its CPU flavor (the flavor "
                          "adds the toleration). Submit team work through the team's queue (label "
                          "kueue.x-k8s.io/queue-name); platform pods run on the system groups (drop the node "
                          "selection that names this group)"))
        else:
            unmet.append(("toleration", f"its nodes carry taint {taint['key']}{value}:{taint['effect']}, which pod "
                          f"set {pod_set.name} does not tolerate: add the toleration {{key: {taint['key']}, operator: "
                          f"Exists, effect: {taint['effect']}}}, or submit it through a Kueue queue whose flavor adds "
                          "it"))
    room = room_problem(requests, group, notes)
    if room:
        unmet.append(("node-capacity", room))
    has_resources = all(r in group.allocatable or unknown_capacity(r) for r, v in requests.items() if v > 0)
    return len(unmet), has_resources, unmet


def _no_group(pod_set: PodSet, requests: dict[str, Fraction], groups: list[NodeGroup],
              notes: set[str]) -> tuple[str, str, str]:
    scored = [(_candidate(pod_set, requests, g, notes), g) for g in groups]
    (_, _, unmet), group = min(scored, key=lambda s: (s[0][0], not s[0][1]))
    rule, message = unmet[0]
    if rule == "node-selector":
        shown = ", ".join(g.ref for g in groups)
        return (f"Pod/{pod_set.name}", rule, f"pod set {pod_set.name}: no node group has the labels it selects "
                f"({message}); the groups: {shown}. Fix its nodeSelector or node affinity")
    if rule == "node-capacity":
        return (group.ref, rule, f"pod set {pod_set.name} {message}: ask for at most what one node has (split the "
                "work over more pods), or use a group of larger nodes")
    return (group.ref, rule, message)


def schedule(pod_sets: list[PodSet], resources: dict[str, PodResources], groups: list[NodeGroup]) -> ScheduleResult:
    """Place every pod set on a node group and pack its pods onto the group's nodes at max size."""
    out = ScheduleResult()
    notes: set[str] = set()
    if not groups:
        out.notes.append("the graph has no node groups: scheduling not checked")
        return out
    chosen: dict[str, NodeGroup] = {}
    for pod_set in pod_sets:
        requests = resources[pod_set.name].requests
        oversize = larger_than_any_node(requests, groups)
        if oversize is not None:
            out.problems.append((oversize[0], "larger-than-any-node", f"pod set {pod_set.name} {oversize[1]}: ask for "
                                 "at most that per pod (split the work over more pods); no quota or queue makes a "
                                 "node larger"))
            continue
        fit = [g for g in groups if _candidate(pod_set, requests, g, notes)[0] == 0]
        if not fit:
            out.problems.append(_no_group(pod_set, requests, groups, notes))
            continue
        chosen[pod_set.name] = fit[0]
        if len(fit) > 1:
            notes.add(f"pod set {pod_set.name} could run on {', '.join(g.name for g in fit)}: counted on "
                      f"{fit[0].name}")
    for group in {g.name: g for g in chosen.values()}.values():
        members = [p for p in pod_sets if chosen.get(p.name) is group]
        out.problems += _pack(group, members, resources, out.placements)
        notes.update(f"{group.ref}: {n}" for n in group.notes)
    out.notes += sorted(notes)
    order = {p.name: i for i, p in enumerate(pod_sets)}
    out.placements.sort(key=lambda p: order.get(p.pod_set, 0))
    return out


def _fits(free: dict[str, Fraction], requests: dict[str, Fraction]) -> int | None:
    """How many pods with these requests fit in ``free`` (None: unbounded, the pod asks for nothing counted)."""
    counts = [int(free.get(r, Fraction(0)) // v) for r, v in requests.items()]
    return max(0, min(counts)) if counts else None


def _pack(group: NodeGroup, members: list[PodSet], resources: dict[str, PodResources],
          placements: list[Placement]) -> list[tuple[str, str, str]]:
    """First-fit decreasing onto the group's nodes, pod sets in bulk (a pod set is identical pods); a problem when
    more than max size nodes are needed. At most max size + 1 nodes are kept; beyond, nodes are only counted."""
    def size(p: PodSet) -> tuple[Fraction, Fraction, Fraction]:
        r = resources[p.name].requests
        return (r.get(GPU, Fraction(0)), r.get("cpu", Fraction(0)), r.get("memory", Fraction(0)))

    counted = {r for r, v in group.allocatable.items() if v > 0}
    nodes: list[dict[str, Fraction]] = []
    extra = 0  # nodes needed beyond those kept
    for pod_set in sorted(members, key=size, reverse=True):
        requests = {r: v for r, v in resources[pod_set.name].requests.items() if r in counted and v > 0}
        remaining, used = pod_set.count, 0
        for free in nodes:
            if remaining == 0:
                break
            fit = _fits(free, requests)
            take = remaining if fit is None else min(remaining, fit)
            if pod_set.one_per_node:
                take = min(take, 1)
            if take:
                for r, v in requests.items():
                    free[r] -= v * take
                remaining -= take
                used += 1
        per_node = _fits(dict(group.allocatable), requests)
        per_node = remaining if per_node is None else per_node
        if pod_set.one_per_node:
            per_node = min(per_node, 1)
        if remaining and per_node > 0:
            new = -(-remaining // per_node)
            used += new
            for i in range(new):
                if len(nodes) > group.max_nodes:
                    extra += new - i
                    break
                take = min(per_node, remaining)
                nodes.append({r: v - requests.get(r, Fraction(0)) * take for r, v in group.allocatable.items()})
                remaining -= take
        placements.append(Placement(pod_set.name, group.name, used, pod_set.count))
    needed = len(nodes) + extra
    if needed > group.max_nodes:
        names = ", ".join(f"{p.name} ({p.count} pods)" for p in members)
        reach = "max size" if group.max_nodes == group.max_size else "desired size (nothing grows it)"
        return [(group.ref, "node-count", f"pod sets {names} need {needed} {group.instance_type} nodes of "
                 f"{group.name}; its {reach} is {group.max_nodes}: run fewer or smaller pods, or raise the group's "
                 + ("maxSize" if group.max_nodes == group.max_size else "desiredSize") + " in the stack")]
    return []
