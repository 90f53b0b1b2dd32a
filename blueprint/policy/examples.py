"""How each policy of the pack is broken on a shipped graph: the mutations the tests prove every policy rejects
(tests/test_policies.py, tests/test_policies_gcp.py, tests/test_slurm.py), shipped so that ``blueprint policy
--explain`` can show a real violation in the pack's own words instead of a description of one.

Each cloud's examples module (:class:`blueprint.policy.cloud.CloudExamples`) lists its mutations as name -> (stack,
mutation, policy); here are the tools they are written with (a mutation takes a graph and returns a changed copy;
nothing here touches a cloud) and the lookup ``--explain`` makes.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from blueprint import clouds
from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.runner import Pack, run_policies

Change = Callable[[dict[str, Any]], None]
Mutation = Callable[[ResourceGraph], ResourceGraph]
RELEASE = "kubernetes:helm.sh/v3:Release"


def edit(graph: ResourceGraph, type_: str, name_suffix: str, change: Change | None = None, *,
         remove: bool = False, protect: bool | None = None) -> ResourceGraph:
    """A copy of the graph with one resource changed, unprotected or removed."""
    found = False
    out: list[GraphResource] = []
    for r in graph.resources:
        if r.type == type_ and r.name.endswith(name_suffix):
            found = True
            if remove:
                continue
            inputs = copy.deepcopy(r.inputs)
            if change is not None:
                change(inputs)
            r = dataclasses.replace(r, inputs=inputs, protect=r.protect if protect is None else protect)
        out.append(r)
    assert found, (type_, name_suffix)
    return ResourceGraph(graph.stack, out)


def add(graph: ResourceGraph, resource: GraphResource) -> ResourceGraph:
    """A copy of the graph with one more resource."""
    return ResourceGraph(graph.stack, [*graph.resources, resource])


def set_path(path: list[str | int], value: Any) -> Change:
    def change(inputs: dict[str, Any]) -> None:
        cur: Any = inputs
        for step in path[:-1]:
            cur = cur[step]
        cur[path[-1]] = value
    return change


def delete_path(path: list[str | int]) -> Change:
    def change(inputs: dict[str, Any]) -> None:
        cur: Any = inputs
        for step in path[:-1]:
            cur = cur[step]
        del cur[path[-1]]
    return change


def release_values(name: str, path: list[str | int], value: Any) -> Callable[[ResourceGraph], ResourceGraph]:
    return lambda g: edit(g, RELEASE, name, set_path(["values", *path], value))


def k8s_type(kind: str) -> str:
    return {"LocalQueue": "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
            "ResourceQuota": "kubernetes:core/v1:ResourceQuota",
            "NetworkPolicy": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            "ConfigMap": "kubernetes:core/v1:ConfigMap",
            "Namespace": "kubernetes:core/v1:Namespace"}[kind]


def drop_spend_alert(team: str) -> Change:
    """Remove one team's TeamSpendOverBudget alert from the PrometheusRule."""
    def change(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["groups"]:
            group["rules"] = [r for r in group["rules"] if not (r.get("alert") == "TeamSpendOverBudget"
                                                                and r.get("labels", {}).get("team") == team)]
    return change




def example_violation(policy: str, pack: Pack) -> tuple[str, str, str, str] | None:
    """(stack, how it was broken, the resource, the message with its field and fix) of the first mutation that
    breaks ``policy``, the pack run on it; None when no mutation is recorded for it."""
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack
    from blueprint.policy.cloud import cloud_examples

    # A cloud's policy (named <cloud>-...) is shown on that cloud's stack first, not a resource grafted onto another
    # cloud's; the others in the clouds' order.
    order = sorted(clouds.names(), key=lambda cloud: not policy.startswith(f"{cloud}-"))
    found = next(((how, stack, mutate) for cloud in order
                  for how, (stack, mutate, name) in cloud_examples(cloud).MUTATIONS.items() if name == policy), None)
    if found is None:
        return None
    how, stack_name, mutate = found
    stack = load_stack(stack_name)
    graph = mutate(run_program(stack.name, stack.config, stack.region).graph)
    hits = [v for v in run_policies(graph, None, pack).violations if v.policy == policy]
    if not hits:
        return None
    v = hits[0]
    text = v.message
    if v.field:
        text += f"\nfield: {v.field}" + (f" = {json.dumps(v.value)}" if v.value is not None else " (not set)")
    return stack_name, how, v.urn.rsplit("::", 1)[-1] if v.urn else "(stack)", text + f"\nfix: {v.fix}"
