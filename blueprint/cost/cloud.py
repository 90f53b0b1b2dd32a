"""What the cost family needs from a cloud (``blueprint/clouds/<cloud>/pricing.py``): the cost lines of the cloud's
resources in a graph, and the usage quantities its usage-priced resources take."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from blueprint import clouds

if TYPE_CHECKING:  # annotations only: `blueprint prices` builds its parser from this module without the cost engine
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


class PriceRefreshError(ValueError):
    """A cloud's price API could not be read or gave an answer of an unknown shape (exit 2; nothing is written)."""


class CloudPriceRefresh(Protocol):
    """A cloud's optional ``refresh`` module: ``blueprint prices refresh`` for that cloud."""

    @property
    def DEFAULT_REGION(self) -> str:  # noqa: N802 (a module constant)
        """The region priced when none is given."""

    @property
    def DESCRIPTION(self) -> str:  # noqa: N802 (a module constant)
        """What the refresh fetches, from where, and what it needs (for ``--help``)."""

    def default_output(self) -> Path:
        """The overlay file the price loader lays over the curated catalog."""

    def refresh_catalog(self, region: str, out: Path, fetched: date) -> int:
        """Fetch and write the overlay; the count of prices written. :class:`PriceRefreshError` when the API
        cannot be read."""


def price_refreshers() -> dict[str, CloudPriceRefresh]:
    """The clouds that have a price refresh, by name."""
    return {cloud: cast(CloudPriceRefresh, clouds.part(cloud, "refresh")) for cloud in clouds.names()
            if clouds.has_part(cloud, "refresh")}
