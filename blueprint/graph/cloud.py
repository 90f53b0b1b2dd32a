"""What the graph family needs from a cloud (``blueprint/clouds/<cloud>/graph.py``): the limits a graph document's
inputs must keep, and the offline engine's answers for the cloud's resources and invokes."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, cast

from blueprint import clouds

# Node maxima: EKS's ultra-scale clusters reach 100,000 nodes (AWS, "Amazon EKS enables ultra scale AI/ML workloads
# with support for 100K nodes per cluster", 2025-07-16), GKE clusters 65,000 (GKE "Plan for large GKE clusters"), so
# no group or pool is larger. Capacity: 10^9 GiB (about 1 EiB) is beyond every filesystem either cloud sells.
MAX_NODES = 100_000
MAX_GIB = 10**9
# (key path inside inputs, (what the number is, its maximum)) per resource type.
Quantities = Mapping[str, tuple[tuple[tuple[str, ...], tuple[str, int]], ...]]
# An input the cloud's API refuses: (key path inside inputs, what is wrong with its value and the rule's source, the
# rule's name).
Refusal = tuple[tuple[str, ...], str, str]


class CloudGraph(Protocol):
    """A cloud's ``graph`` module."""

    @property
    def QUANTITIES(self) -> Quantities:  # noqa: N802 (a module constant)
        """The quantities readers multiply prices by or size quotas with, per resource type, and their maxima."""

    @property
    def NUMERIC_STRINGS(self) -> bool:  # noqa: N802 (a module constant)
        """Whether the provider sends int64 fields as decimal strings (GCP does)."""

    def refused_values(self, typ: str, inputs: Mapping[str, Any]) -> list[Refusal]:
        """The inputs of one resource that the cloud's API would refuse (a value it does not offer, a retention or
        window out of its range), so that a graph read from a file cannot hold what no stack of the cloud holds."""

    def new_resource(self, typ: str, name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
        """The id and state (inputs plus the computed outputs later resources read) of one resource, as the
        provider would answer, deterministically."""

    def call(self, token: str, args: Mapping[str, Any], region: str) -> dict[str, Any] | None:
        """The answer to one of the cloud's invokes (None: not one the program makes, answered empty)."""

    def phase_boundaries(self, spec: Any) -> list[datetime]:
        """The instants, sorted, at which the program's graph for ``spec`` changes although nothing else does (the
        program compares a reserved window with the clock to the minute); the graph cache serves no entry across
        one."""


def cloud_graph(cloud: str) -> CloudGraph:
    """The cloud's ``graph`` module."""
    return cast(CloudGraph, clouds.part(cloud, "graph"))


def stable_id(*parts: str, length: int = 17) -> str:
    """A hex id derived from ``parts``: the same resource gets the same id in every run."""
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]
