"""What the preview needs from a cloud (``blueprint/clouds/<cloud>/preview.py``) beyond its planes' summary (which
``components/<cloud>/summary.py`` writes): the lines of the platform and telemetry sections that name the cloud's
services (the GPU fabric's device plugin or networks, the storage and log exporters, Slurm's accounting database)."""

from __future__ import annotations

from typing import Protocol, cast

from blueprint import clouds
from blueprint.graph.model import GraphResource, ResourceGraph


class CloudPreview(Protocol):
    """A cloud's ``preview`` module."""

    def gpu_fabric(self, graph: ResourceGraph) -> str:
        """How pods reach the GPU fabric, for the GPU Operator's line (EFA device plugin, GPU networks)."""

    def gpu_stack_without_operator(self, graph: ResourceGraph) -> str | None:
        """The GPU stack's line when the cloud runs it and the GPU Operator is not installed (GKE's own)."""

    def fabric_telemetry(self, graph: ResourceGraph) -> list[str]:
        """What the fabric's own counters feed (or the warning that nothing does)."""

    def storage_telemetry(self, graph: ResourceGraph) -> str | None:
        """The exporter that brings the filesystem's and the bucket's metrics from the cloud's monitoring."""

    def log_lines(self, graph: ResourceGraph) -> list[str]:
        """Where container and node logs go."""

    def database(self, graph: ResourceGraph) -> GraphResource | None:
        """Slurm's accounting database, if the graph has one."""

    def database_text(self, db: GraphResource) -> str:
        """The database as the accounting line says it (engine, size, availability, backups)."""

    def registration_taints(self, graph: ResourceGraph) -> dict[str, set[str]]:
        """Per node group (its ``gpu-cluster/node-group`` label), the taint keys its nodes register with."""


    def named_address(self, graph: ResourceGraph, name: str) -> str | None:
        """The IP of an address the stack reserves by name (a Gateway's ``NamedAddress``), None when not the cloud's."""


def cloud_preview(cloud: str) -> CloudPreview:
    """The cloud's ``preview`` module."""
    return cast(CloudPreview, clouds.part(cloud, "preview"))
