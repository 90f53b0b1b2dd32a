"""Which node groups a change rolls (replaces their nodes), in what order, and what a running job loses.

A group rolls when its Kubernetes version, its AMI release or type, or its launch template (a new template version)
changes, or when the provider replaces it (its cloud's ``changes`` module says which). The order is the graph's: a
group that depends on another rolls after it (the control plane, its add-ons, the system groups, then the GPU
groups). A roll interrupts the jobs of a GPU group that has nodes running: each wave drains nodes, and a multi-node
job admitted all-or-nothing stops when one of its pods goes, once per wave. The GPU-hours at risk are the group's
running GPUs x the waves x what an interruption costs: the restart and read-back plus, on average, half a checkpoint
interval of work (the teams' checkpoint-policy ConfigMap: RESTART_SECONDS, CHECKPOINT_INTERVAL_SECONDS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blueprint import clouds
from blueprint.changes.cloud import NodeGroupState, cloud_changes
from blueprint.changes.replacements import forcing_fields
from blueprint.graph.model import ResourceGraph

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


@dataclass(frozen=True)
class NodeRoll:
    """One node group a change rolls."""

    node_group: str
    nodes: int  # nodes running now that the roll replaces
    reason: str
    order: int  # 1 first; groups with the same order may roll together
    interrupts_jobs: bool
    gpu_hours_at_risk: float | None  # None: the stack models no checkpoint interval
    how: str
    when: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``cost diff --format json``: ``node_rolls``)."""
        return {"node_group": self.node_group, "nodes": self.nodes, "reason": self.reason, "order": self.order,
                "interrupts_jobs": self.interrupts_jobs, "gpu_hours_at_risk": self.gpu_hours_at_risk,
                "how": self.how, "when": self.when}


def checkpoint_costs(graph: ResourceGraph) -> tuple[float, float] | None:
    """(checkpoint interval, restart and read-back) in seconds from the teams' checkpoint-policy ConfigMap."""
    for res in graph.of_type(CONFIG_MAP):
        meta, data = res.inputs.get("metadata") or {}, res.inputs.get("data") or {}
        if isinstance(meta, dict) and meta.get("name") == "checkpoint-policy" and isinstance(data, dict):
            try:
                return float(data["CHECKPOINT_INTERVAL_SECONDS"]), float(data["RESTART_SECONDS"])
            except (KeyError, TypeError, ValueError):
                return None
    return None


def _order(graph: ResourceGraph, groups: list[NodeGroupState]) -> dict[str, int]:
    """Each group's place in the rollout: 1 + the most groups it waits for, through the graph's dependencies."""
    urns = {g.urn for g in groups}
    memo: dict[str, int] = {}

    def depth(urn: str, seen: frozenset[str]) -> int:
        if urn in memo:
            return memo[urn]
        res = graph.get(urn)
        deps = [d for d in (res.dependencies if res is not None else []) if d in urns and d not in seen]
        memo[urn] = 1 + max((depth(d, seen | {urn}) for d in deps), default=0)
        return memo[urn]

    return {g.urn: depth(g.urn, frozenset()) for g in groups}


def node_rolls(old: ResourceGraph, new: ResourceGraph) -> list[NodeRoll]:
    """Every node group present before and after whose nodes the change replaces, in rollout order."""
    cloud = clouds.of_types(r.type for r in new.resources)
    if cloud is None:
        return []
    part = cloud_changes(cloud)
    rules = part.replacement_rules()
    costs = checkpoint_costs(new)
    groups = part.node_groups(new)
    order = _order(new, groups)
    out = []
    for group in groups:
        before, after = old.get(group.urn), new.get(group.urn)
        if before is None or after is None:
            continue
        reasons = part.roll_reasons(old, new, before, after)
        type_rules = rules.get(after.type)
        replaced = forcing_fields(type_rules, before.inputs, after.inputs, after.ignore_changes or ())[0] \
            if type_rules is not None else []
        if replaced:
            reasons = [f"the node group is replaced ({', '.join(replaced)} changed)", *reasons]
        if not reasons:
            continue
        if group.held and not replaced:
            # This apply sends none of it (ignoreChanges): the nodes roll at a later apply, when it can.
            out.append(NodeRoll(group.name, 0, "; ".join(reasons), order[group.urn], False,
                                0.0 if costs is not None else None, group.how, group.held))
            continue
        interrupts = group.gpus_per_node > 0 and group.nodes > 0
        # A replaced group is not rolled by its surge or batch settings: the provider deletes the old group (before
        # the new one, as its name is fixed: pulumi-terraform-bridge deletes an explicitly named resource first), so
        # every node goes in one wave and nothing runs on the group until the new one is up.
        waves, how, when = (1, f"the whole group is deleted and created again: all {group.nodes} node(s) go at once "
                            "(a fixed name: the old group is deleted first), so nothing runs on it until the new one "
                            "is up; roll it between runs", "") if replaced else (group.waves, group.how, group.when)
        at_risk = None
        if costs is not None:
            interval, restart = costs
            at_risk = round(waves * group.nodes * group.gpus_per_node * (restart + interval / 2) / 3600, 1) \
                if interrupts else 0.0
        out.append(NodeRoll(group.name, group.nodes, "; ".join(reasons), order[group.urn], interrupts or
                            (bool(replaced) and group.nodes > 0), at_risk, how, when))
    return sorted(out, key=lambda r: (r.order, r.node_group))


def describe(roll: NodeRoll) -> str:
    """One line for people."""
    risk = "" if not roll.interrupts_jobs else (
        f"; interrupts running jobs, {roll.gpu_hours_at_risk:,.1f} GPU-hours at risk"
        if roll.gpu_hours_at_risk is not None else "; interrupts running jobs (no checkpoint model to count the loss)")
    when = f"; {roll.when}" if roll.when else ""
    return f"{roll.order}. `{roll.node_group}` rolls {roll.nodes} node(s): {roll.reason}; {roll.how}{risk}{when}"
