"""What the cost family needs from a cloud (``blueprint/clouds/<cloud>/pricing.py``): the cost lines of the cloud's
resources in a graph, and the usage quantities its usage-priced resources take."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

from blueprint import clouds
from blueprint.cost.lines import ResourceCost, Usage, UsageFields
from blueprint.cost.prices import Price
from blueprint.graph.model import ResourceGraph

# Per node group (its gpu-cluster/node-group label), each team's share of the nominal GPU quota.
Shares = Mapping[str, tuple[tuple[str, float], ...]]


class CloudPricing(Protocol):
    """A cloud's ``pricing`` module."""

    @property
    def USAGE_FIELDS(self) -> UsageFields:  # noqa: N802 (a module constant)
        """The usage quantities of each usage-priced resource type (bucket GB, NAT GB, log volume)."""

    def price(self, graph: ResourceGraph, prices: Mapping[str, Price], usage: Usage,
              shares: Shares) -> tuple[list[ResourceCost], list[tuple[str, str]]]:
        """The cost of every priced resource of the cloud in ``graph`` (sorted by URN), and the usage-priced ones
        the usage file does not estimate, as (URN, what the price depends on)."""


def cloud_pricing(cloud: str) -> CloudPricing:
    """The cloud's ``pricing`` module."""
    return cast(CloudPricing, clouds.part(cloud, "pricing"))
