"""The tools' AWS half: what the tools do that depends on AWS (see :mod:`blueprint.clouds` for the families)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # each module meets its family's interface (checked by mypy, never imported here at run time)
    from blueprint.clouds.aws import graph, pricing
    from blueprint.cost.cloud import CloudPricing
    from blueprint.graph.cloud import CloudGraph

    _graph: CloudGraph = graph
    _pricing: CloudPricing = pricing
