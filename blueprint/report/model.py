"""The report's picture as data: boxes (the planes, the teams, operations), nodes that each stand for resources of the
graph, and edges between them. The clouds' report modules draw their planes' nodes with these
(:class:`blueprint.report.cloud.CloudReport`); :mod:`blueprint.report.diagram` builds the whole picture and lays it
out with Graphviz."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from blueprint.graph.model import GraphResource, ResourceGraph

# The boxes of the picture, in the order they are drawn, with their titles.
BOXES = {
    "network": "network & fabric",
    "compute": "compute",
    "storage": "storage",
    "control-plane": "control plane",
    "teams": "teams, queues and quotas",
    "operations": "platform, telemetry and cost",
}
# Graph planes (component type tokens) drawn in each box when no node of their own claims a resource.
PLANE_BOX = {"network": "network", "compute": "compute", "storage": "storage", "control-plane": "control-plane",
             "platform": "operations", "telemetry": "operations", "cost": "operations"}
PLATFORM_COMPONENTS = ("Queues", "Tenancy", "Slurm")  # control-plane type tokens that are the teams' platform

@dataclass
class Node:
    """One box of the picture and the resources it stands for."""

    id: str  # the HTML/SVG id the findings link to
    box: str  # a key of BOXES
    title: str
    lines: list[str]
    kind: str  # gpu, cpu, reserved, vpc, subnet, fabric, filesystem, bucket, database, control-plane, team, ...
    keys: set[str]  # the resources drawn (edges follow their dependencies)
    urns: set[str] = field(default_factory=set)  # every resource anchored here (keys included)
    group: str = ""  # a sub-box inside the box: a zone for subnets, the Slurm cluster for partitions
    cloud_ids: set[str] = field(default_factory=set)  # ids of existing resources (not in the graph) it stands for
    findings: list[str] = field(default_factory=list)  # the policies that flag a resource anchored here


@dataclass(frozen=True)
class Edge:
    """A line between two nodes: a dependency, a quota on a node group, a partition's nodes."""

    tail: str
    head: str
    label: str = ""
    style: str = "solid"


@dataclass
class Diagram:
    """The picture's model: its nodes (with what each stands for), edges and the graph they were read from."""

    nodes: list[Node]
    edges: list[Edge]
    graph: ResourceGraph
    _owner: dict[str, str] = field(default_factory=dict)

    def node(self, node_id: str) -> Node:
        """The node with this id."""
        return next(n for n in self.nodes if n.id == node_id)

    def anchor_of(self, urn: str) -> str:
        """The id a finding on this resource links to: the node that stands for it (or for its nearest
        ancestor), else the box of its plane; the stack's own findings go to the control plane."""
        if not self._owner:
            self._owner = {urn: n.id for n in self.nodes for urn in n.urns}
        if urn in self._owner:
            return self._owner[urn]
        res = self.graph.get(urn)
        if res is None:
            return box_id("control-plane")
        for ancestor in self.graph.ancestors(res):
            if ancestor.urn in self._owner:
                return self._owner[ancestor.urn]
        return box_id(_box_of(self.graph, res))


def box_id(box: str) -> str:
    """The id of a box (a Graphviz cluster)."""
    return f"box-{box}"


def slug(text: str) -> str:
    """An id fragment from any text."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _box_of(graph: ResourceGraph, res: GraphResource) -> str:
    comp = res if res.is_component else graph.component_of(res)
    if comp is not None and comp.type.rsplit(":", 1)[-1] in PLATFORM_COMPONENTS:
        return "teams"
    return PLANE_BOX.get(graph.plane_of(res), "control-plane")


def _descendants(graph: ResourceGraph, urn: str) -> set[str]:
    out: set[str] = set()
    todo = [urn]
    while todo:
        for child in graph.children(todo.pop()):
            if child.urn not in out:
                out.add(child.urn)
                todo.append(child.urn)
    return out


def component_urns(graph: ResourceGraph, res: GraphResource) -> set[str]:
    """The resource, and everything under the component that holds it when that component holds nothing else of
    its kind (a node group's launch template, placement group, schedules)."""
    comp = graph.get(res.parent) if res.parent else None
    if comp is None or not comp.is_component or sum(1 for c in graph.children(comp.urn) if c.type == res.type) > 1:
        return {res.urn}
    return {res.urn, comp.urn, *_descendants(graph, comp.urn)}


def gib(value: Any) -> int:
    """A whole number from an input (GCP sends int64 fields as strings), or 0."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def protection(res: GraphResource) -> str:
    """How a stateful resource is kept: protected, retained on delete."""
    if res.protect and res.retain_on_delete:
        return "protected, retained on delete"
    return "protected" if res.protect else "NOT protected"




def escape(text: Any) -> str:
    """Text as HTML (quotes too: it goes in attributes)."""
    return html.escape(str(text), quote=True)
