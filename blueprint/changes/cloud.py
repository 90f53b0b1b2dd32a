"""What the changes family needs from a cloud (``blueprint/clouds/<cloud>/changes.py``): which input fields replace
each of its resources, which resources hold data or identity, its node groups as a roll meets them, why a node group
rolls, and the versions of its control plane and nodes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import yaml

from blueprint import clouds
from blueprint.graph.model import GraphResource, ResourceGraph


@dataclass(frozen=True)
class TypeRules:
    """One resource type's replacing fields (``replacements.yaml``)."""

    replace: tuple[str, ...]
    conditional: Mapping[str, tuple[str, str]]  # field -> (when: decrease | removal | region | note, the rule)
    unread: tuple[str, ...]
    status: str
    read: str


@dataclass(frozen=True)
class NodeGroupState:
    """A node group (pool) of a graph as a roll meets it."""

    name: str  # the gpu-cluster/node-group label, else the provider's name
    urn: str
    nodes: int  # running now (desired size; a Capacity Block group's, outside its window, is 0)
    max_nodes: int
    gpus_per_node: int
    reserved: str  # "" (open capacity), "capacity block", "reservation"
    waves: int  # how many times a roll takes nodes away from the group (1 when all at once)
    how: str  # how it rolls, for people
    when: str  # when it can roll, for a reserved group
    held: str = ""  # why this apply leaves its nodes alone (its rolling inputs are ignoreChanges now), or ""


class CloudChanges(Protocol):
    """A cloud's ``changes`` module."""

    def replacement_rules(self) -> Mapping[str, TypeRules]:
        """Each resource type's replacing fields, as the pinned provider bridges them."""

    def holds_data(self, graph: ResourceGraph, res: GraphResource) -> str | None:
        """What the resource holds that a replacement loses (data, identity), or None."""

    def node_groups(self, graph: ResourceGraph) -> list[NodeGroupState]:
        """The node groups (pools) of the graph."""

    def roll_reasons(self, old: ResourceGraph, new: ResourceGraph, before: GraphResource,
                     after: GraphResource) -> list[str]:
        """Why a node group present on both sides replaces its nodes (a version, an AMI, a launch template), or []."""

    def cluster_version(self, graph: ResourceGraph) -> str | None:
        """The control plane's Kubernetes minor (``1.35``) as the graph gives it, or None."""

    def node_versions(self, graph: ResourceGraph) -> Mapping[str, str]:
        """Each node group's Kubernetes minor where the graph gives one."""

    @property
    def NODES_MATCH_BEFORE_UPGRADE(self) -> bool:  # noqa: N802 (a module constant)
        """Whether the control plane refuses a minor update while a node group's minor differs from it (EKS)."""

    @property
    def CLUSTER_VERSION_KEY(self) -> str:  # noqa: N802 (a module constant)
        """The spec key (under gpu-cluster:spec) that sets the control plane's version."""

    @property
    def NODE_VERSION_KEY(self) -> str:  # noqa: N802 (a module constant)
        """The spec key of a node group's version, with ``{name}`` for the group."""

    @property
    def PLATFORM(self) -> str:  # noqa: N802 (a module constant)
        """The managed Kubernetes service's name, for messages (EKS, GKE)."""


def cloud_changes(cloud: str) -> CloudChanges:
    """The cloud's ``changes`` module."""
    return cast(CloudChanges, clouds.part(cloud, "changes"))


def load_rules(path: Path) -> dict[str, TypeRules]:
    """A cloud's ``replacements.yaml``."""
    data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = {}
    for type_, raw in data["types"].items():
        out[str(type_)] = TypeRules(
            replace=tuple(str(f) for f in raw.get("replace") or ()),
            conditional={str(f): (str(c["when"]), str(c["rule"])) for f, c in (raw.get("conditional") or {}).items()},
            unread=tuple(str(f) for f in raw.get("unread") or ()),
            status=str(raw.get("status") or ""), read=str(raw.get("read") or ""))
    return out


def inputs_at(inputs: Any, path: str) -> Any:
    """The value at a dotted path of inputs; through a list, the list of its elements' values (None when absent)."""
    value: Any = inputs
    for key in path.split("."):
        if isinstance(value, list):
            value = [v.get(key) if isinstance(v, dict) else None for v in value]
            value = [v for v in value if v is not None] or None
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def minor(version: str) -> str:
    """``1.35`` from ``1.35``, ``1.35.8`` or ``1.35.8-gke.1036000``."""
    return ".".join(version.split("-")[0].split(".")[:2])


def version_input(graph: ResourceGraph, type_: str, key: str) -> str | None:
    """The minor of the first ``type_`` resource's ``key`` input that is a version (``1.35...``), or None."""
    for res in graph.of_type(type_):
        version = res.inputs.get(key)
        if isinstance(version, str) and version[:1].isdigit():
            return minor(version)
    return None


def named_elsewhere(graph: ResourceGraph, res: GraphResource, needle: str) -> bool:
    """Whether another resource's inputs name ``needle`` (a role's ARN suffix, a service account's email): what makes
    an identity something a replacement loses."""
    return any(other.urn != res.urn and needle in json.dumps(other.inputs) for other in graph.resources)
