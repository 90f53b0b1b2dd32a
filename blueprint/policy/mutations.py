"""What the example violations are written with: a mutation takes a graph and returns a changed copy (one resource
edited, unprotected, removed or added); nothing here touches a cloud. Each cloud's examples module
(:class:`blueprint.policy.cloud.CloudExamples`) writes its mutations with these."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from blueprint.graph.model import GraphResource, ResourceGraph

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
            "Namespace": "kubernetes:core/v1:Namespace",
            "PrometheusRule": "kubernetes:monitoring.coreos.com/v1:PrometheusRule",
            "ValidatingAdmissionPolicyBinding":
                "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"}[kind]


def remove_all(type_: str) -> Mutation:
    """Every resource of one type removed (all admission policy bindings, say)."""
    def mutate(graph: ResourceGraph) -> ResourceGraph:
        kept = [r for r in graph.resources if r.type != type_]
        assert len(kept) < len(graph.resources), type_
        return ResourceGraph(graph.stack, kept)
    return mutate


def drop_alerts(metric: str) -> Change:
    """Remove from a PrometheusRule every alert whose expression reads ``metric``."""
    def change(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["groups"]:
            group["rules"] = [r for r in group["rules"] if not ("alert" in r and metric in str(r.get("expr")))]
    return change


def drop_spend_alert(team: str) -> Change:
    """Remove one team's TeamSpendOverBudget alert from the PrometheusRule."""
    def change(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["groups"]:
            group["rules"] = [r for r in group["rules"] if not (r.get("alert") == "TeamSpendOverBudget"
                                                                and r.get("labels", {}).get("team") == team)]
    return change
