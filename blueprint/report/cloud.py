"""What the report needs from a cloud (``blueprint/clouds/<cloud>/report.py``): the diagram's nodes of the cloud's
planes, its databases and cost plane, which resources are node groups, and the reserved-capacity timeline."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast

from blueprint import clouds
from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.report.model import Node

if TYPE_CHECKING:  # the spec's models load with a stack, not for a saved graph
    from components.spec import ClusterSpec


class CloudReport(Protocol):
    """A cloud's ``report`` module."""

    def planes(self, graph: ResourceGraph, spec: ClusterSpec | None) -> list[Node]:
        """The nodes of the network, compute, storage and control-plane boxes, in that order (the spec, when given,
        adds what the graph cannot carry: an existing network, filesystem or bucket)."""

    def databases(self, graph: ResourceGraph) -> list[Node]:
        """Slurm's accounting database, drawn with the storage."""

    def node_group_label(self, res: GraphResource) -> str | None:
        """The ``gpu-cluster/node-group`` label of a node group (pool) resource; None for any other resource."""

    def cost_plane(self, graph: ResourceGraph) -> list[str]:
        """The cost plane's lines: budgets, usage export."""

    def timeline(self, graph: ResourceGraph, spec: ClusterSpec, now: datetime) -> list[str]:
        """HTML parts of the reserved-capacity section: each window with its steps, or each reservation."""


def cloud_report(cloud: str) -> CloudReport:
    """The cloud's ``report`` module."""
    return cast(CloudReport, clouds.part(cloud, "report"))
