"""What a cost report is made of: every line is exactly quantity x unit price, from the price catalog, and a price
that was never read leaves its line unpriced (``monthly_usd`` null), never zero. The clouds' pricing modules
(:class:`blueprint.cost.cloud.CloudPricing`) build these from their resources; the engine, the diff, the renderers,
the unit cost and the report read them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from blueprint.cost.prices import DISCOUNTED, Price
from blueprint.graph.model import GraphResource

HOURS_PER_MONTH = 730  # the convention of AWS's pricing calculator and Infracost: 8,760 h / 12


@dataclass(frozen=True)
class CostLine:
    """One priced quantity: ``monthly_usd == quantity * unit_price_usd`` (null when the price is unknown)."""

    name: str
    quantity: float
    unit: str
    unit_price_usd: float | None
    price_status: str
    price_key: str
    price_source: str
    price_as_of: str
    one_time: bool = False  # prepaid once (a Capacity Block's window), not a monthly charge
    # Set when the unit price is not the line's own but an upper bound for it: "spot price not read: bounded by
    # on-demand $10.4926/h" (a discounted market's price is never above on-demand).
    bound: str = ""

    @property
    def cost_usd(self) -> float | None:
        """``quantity * unit_price_usd``; null when the price is unknown."""
        return None if self.unit_price_usd is None else self.quantity * self.unit_price_usd

    @property
    def monthly_usd(self) -> float | None:
        """The line's cost when it recurs monthly; 0 for a one-time line (see ``cost_usd``)."""
        return 0.0 if self.one_time else self.cost_usd

    @property
    def stale(self) -> bool:
        return self.price_status == "stale"

    @property
    def bounded(self) -> bool:
        """The unit price is an upper bound (the on-demand price of a discounted market whose figure was not read)."""
        return bool(self.bound)


@dataclass(frozen=True)
class ResourceCost:
    """The cost lines of one resource, at desired size and (for node groups) at max size."""

    urn: str
    type: str
    name: str
    plane: str
    team: str
    components: tuple[CostLine, ...]
    components_at_max: tuple[CostLine, ...]
    note: str = ""
    team_shares: tuple[tuple[str, float], ...] = ()  # GPU node groups: each team's nominal Kueue quota share
    # Node groups and pools: (desired, max) nodes, GPUs per node, and whether the capacity is paid whether nodes
    # run or not (a Capacity Block or reservation): the unit cost prices GPUs at the capacity paid for.
    nodes: tuple[int, int] | None = None
    gpus_per_node: int = 0
    paid_regardless: bool = False
    min_nodes: int = 0  # what the group never scales below
    # Node groups and pools: whether the cluster's autoscaler manages the group (None for other resources); a group
    # it does not manage runs its desired size from the first apply, used or not.
    autoscaled: bool | None = None

    @property
    def monthly_usd(self) -> float:
        """Known monthly lines at desired size (see ``priced_fully``)."""
        return sum(c.monthly_usd or 0.0 for c in self.components)

    @property
    def monthly_usd_at_max(self) -> float:
        return sum(c.monthly_usd or 0.0 for c in self.components_at_max)

    @property
    def one_time_usd(self) -> float:
        """Prepaid once (Capacity Blocks), the same at any size."""
        return sum(c.cost_usd or 0.0 for c in self.components if c.one_time)

    @property
    def priced_fully(self) -> bool:
        """Every line has a price; otherwise the figures are lower bounds."""
        return all(c.unit_price_usd is not None for c in (*self.components, *self.components_at_max))

    def signature(self) -> tuple[tuple[str, float, str], ...]:
        """What the resource buys, priced or not: a change here is a cost change even without a price."""
        return tuple((c.name, c.quantity, c.price_key) for c in (*self.components, *self.components_at_max))


@dataclass(frozen=True)
class CostReport:
    """A stack's monthly cost, what could not be priced and why, and which prices may be stale."""

    stack: str
    region: str
    resources: tuple[ResourceCost, ...]
    usage_not_priced: tuple[tuple[str, str], ...]  # (urn, what it depends on)
    notes: tuple[str, ...] = field(default=())
    currency: str = "USD"

    @property
    def total_monthly_usd(self) -> float:
        return sum(r.monthly_usd for r in self.resources)

    @property
    def total_monthly_usd_at_max(self) -> float:
        return sum(r.monthly_usd_at_max for r in self.resources)

    @property
    def total_one_time_usd(self) -> float:
        return sum(r.one_time_usd for r in self.resources)

    def by_team(self, one_time: bool = False, at_max: bool = False) -> dict[str, float]:
        """Monthly (or one-time) cost per team, at desired size (or at max size): GPU node groups split by nominal
        Kueue GPU quota, the rest by ``team`` tag."""
        out: dict[str, float] = {}
        for res in self.resources:
            value = res.one_time_usd if one_time else res.monthly_usd_at_max if at_max else res.monthly_usd
            for team, share in res.team_shares or ((res.team or "(untagged)", 1.0),):
                out[team] = out.get(team, 0.0) + share * value
        return dict(sorted(out.items()))

    def lines(self) -> Iterable[CostLine]:
        for res in self.resources:
            yield from res.components
            yield from res.components_at_max

    @property
    def unpriced(self) -> list[str]:
        """Price keys with no known figure that a line of this stack needed."""
        return sorted({c.price_key for c in self.lines() if c.unit_price_usd is None})

    @property
    def stale_prices(self) -> list[str]:
        return sorted({c.price_key for c in self.lines() if c.stale})

    @property
    def bounded(self) -> list[str]:
        """Price keys not read whose lines are priced at an upper bound (on-demand for spot or flex-start)."""
        return sorted({c.price_key for c in self.lines() if c.bounded})

    @property
    def lower_bound(self) -> bool:
        """The totals leave something out: a line without a price, or a usage-priced resource without an estimate."""
        return bool(self.unpriced or self.usage_not_priced)

    def unpriced_lines(self) -> list[tuple[ResourceCost, CostLine, CostLine | None]]:
        """Every line without a price, once per resource and price key: (resource, the line at desired size, the
        same line at max size or None), in resource order."""
        out: list[tuple[ResourceCost, CostLine, CostLine | None]] = []
        for res in self.resources:
            at_max = {c.price_key: c for c in res.components_at_max if c.unit_price_usd is None}
            seen = set()
            for c in (*res.components, *res.components_at_max):
                if c.unit_price_usd is None and c.price_key not in seen:
                    seen.add(c.price_key)
                    out.append((res, c, at_max.get(c.price_key)))
        return out


@dataclass(frozen=True)
class UsageField:
    """One usage quantity of a resource type: what it is, the price it multiplies, and the price's unit size."""

    line: str
    price_key: str
    per: float = 1.0  # the quantity is divided by this (requests are priced per 1,000)


Usage = Mapping[str, Mapping[str, float]]  # a usage file: logical name -> quantity name -> monthly quantity
UsageFields = Mapping[str, Mapping[str, UsageField]]  # resource type -> quantity name -> its field


# How a discounted market is named when its price was not read ("spot price not read: ...").
_MARKET_NAMES = {"ec2_spot": "spot", "compute_spot": "Spot", "compute_flex_start": "flex-start"}
_PER = {"hour": "h"}


def line(name: str, quantity: float, prices: Mapping[str, Price], key: str, unit: str) -> CostLine:
    """``quantity`` of the price ``key``; unpriced when the catalog has no figure for it, except in a discounted
    market (spot, flex-start: :data:`DISCOUNTED`), whose price never exceeds on-demand: there the on-demand figure
    bounds it, and the line says so (``bound``), so money at risk is never $0 by omission."""
    price = prices.get(key)
    if price is not None and price.known:
        return CostLine(name, quantity, price.unit, price.usd, price.status, key, price.source, price.as_of)
    section, _, item = key.partition(".")
    ceiling = prices.get(f"{DISCOUNTED.get(section, '')}.{item}")
    if ceiling is not None and ceiling.usd is not None:
        per = _PER.get(ceiling.unit, ceiling.unit)
        bound = (f"{_MARKET_NAMES.get(section, section)} price not read: bounded by on-demand "
                 f"${ceiling.usd:g}/{per}")
        return CostLine(name, quantity, ceiling.unit, ceiling.usd, ceiling.status, key, ceiling.source,
                        ceiling.as_of, bound=bound)
    if price is None:
        return CostLine(name, quantity, unit, None, "unconfirmed", key, "", "")
    return CostLine(name, quantity, price.unit, None, price.status, key, price.source, price.as_of)


def int_input(value: Any) -> int:
    """An integer input, or 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def dict_input(value: Any) -> dict[str, Any]:
    """A mapping input, or an empty one: the engine prices what it can read and never crashes on the rest."""
    return value if isinstance(value, dict) else {}


def number_input(value: Any) -> float:
    """A number input, also as the string GCP providers send for int64 fields ("18000"); 0 when unreadable."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def usage_lines(res: GraphResource, fields: UsageFields, usage: Usage, prices: Mapping[str, Price],
                keys: Mapping[str, str] | None = None) -> tuple[CostLine, ...]:
    """The lines of a resource's estimated usage (a usage file entry), in the order its type's ``fields`` list them;
    ``keys`` swaps a field's price key for another (a bucket's storage class)."""
    given = usage.get(res.name, {})
    keys = keys or {}
    return tuple(line(f.line, given[key] / f.per, prices, keys.get(f.price_key, f.price_key), "")
                 for key, f in fields.get(res.type, {}).items() if key in given)
