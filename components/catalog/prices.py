"""The price catalog: every figure with its unit, region, status, source and date.

A price file is data from elsewhere, so it is checked field by field when loaded: a price without a
source or date, a made-up status or a number where no figure was read is refused with the file, the key
path and the rule, instead of reaching a cost report. ``may_be_stale`` is what every output format must
show next to a figure that may no longer be current.

The catalog lives here, below the clouds, because the program prices too: a team's in-cluster spend alert charges
its GPU hours at the same figures the cost preview shows (``gpu_hour_price``). Both read each file once per process
(libyaml's C loader, a key given twice refused); ``blueprint.cost.prices.parse_prices`` reads a price file given as
text with the stack files' strict YAML rules, and a test holds the shipped files to those rules too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from components.catalog import yaml_files

AWS_PRICES_FILE = Path(__file__).with_name("prices_aws.yaml")
GCP_PRICES_FILE = Path(__file__).with_name("prices_gcp.yaml")
# Written by `blueprint prices refresh` (AWS Price List API) and laid over the curated AWS file.
AWS_REFRESHED_FILE = Path(__file__).with_name("prices_aws_refreshed.yaml")

STATUSES = ("confirmed", "secondary", "stale", "unconfirmed")
UNITS = ("hour", "GB-month", "GB", "key-month", "1k-requests", "budget-day", "GB-hour")
_FIELDS = {"usd", "unit", "region", "status", "source", "as_of", "note", "includes"}
# What a price may say it already covers, so the engine does not add it again (GCP: a machine price read with its
# bundled Local SSD).
INCLUDES = ("local-ssd",)
_REQUIRED = ("usd", "unit", "region", "status", "source", "as_of")


class PriceCatalogError(ValueError):
    """A price file that cannot be used; the message names the file, the key path and the rule."""


@dataclass(frozen=True)
class Price:
    """One unit price and where it comes from."""

    section: str  # e.g. "ec2_on_demand"
    item: str  # e.g. "p5.48xlarge"
    usd: float | None
    unit: str
    region: str
    status: str
    source: str
    as_of: str
    note: str = ""
    includes: tuple[str, ...] = ()  # what the figure already covers (INCLUDES)

    @property
    def key(self) -> str:
        """``<section>.<item>``, the key path in the price file."""
        return f"{self.section}.{self.item}"

    @property
    def known(self) -> bool:
        """A figure was read (``usd`` is set); unknown prices leave a resource unpriced, never at zero."""
        return self.usd is not None

    @property
    def may_be_stale(self) -> bool:
        """Shown as stale in every output: the figure was read but may have changed since."""
        return self.status == "stale"


def _fail(shown: str, path: str, problem: str, rule: str) -> PriceCatalogError:
    return PriceCatalogError(f"{shown}: {path}: {problem} [rule: {rule}]")


def _price(shown: str, section: str, item: str, raw: object) -> Price:
    key = f"{section}.{item}"
    if not isinstance(raw, dict):
        raise _fail(shown, key, "must be a mapping of usd, unit, region, status, source, as_of", "price-shape")
    unknown = sorted(set(map(str, raw)) - _FIELDS)
    if unknown:
        raise _fail(shown, f"{key}.{unknown[0]}", f"unknown field (allowed: {', '.join(sorted(_FIELDS))})",
                    "price-fields")
    for field in _REQUIRED:
        if field not in raw:
            raise _fail(shown, f"{key}.{field}", "is required", "price-fields")
    for field in ("unit", "region", "status", "source", "as_of", "note"):
        if field in raw and not isinstance(raw[field], str):
            raise _fail(shown, f"{key}.{field}", "must be a string", "price-fields")
    usd, status = raw["usd"], raw["status"]
    if status not in STATUSES:
        raise _fail(shown, f"{key}.status", f"'{status}' is not one of {', '.join(STATUSES)}", "price-status")
    if raw["unit"] not in UNITS:
        raise _fail(shown, f"{key}.unit", f"'{raw['unit']}' is not one of {', '.join(UNITS)}", "price-unit")
    if usd is None:
        if status != "unconfirmed":
            raise _fail(shown, f"{key}.usd", f"is null but status is '{status}': a price that was not read "
                        "is 'unconfirmed'", "price-null-unconfirmed")
    else:
        if isinstance(usd, bool) or not isinstance(usd, int | float) or not math.isfinite(usd) or usd < 0:
            raise _fail(shown, f"{key}.usd", "must be a finite number >= 0 or null", "price-value")
        if status == "unconfirmed":
            raise _fail(shown, f"{key}.usd", "is set but status is 'unconfirmed': say where the figure was "
                        "read and how sure it is", "price-null-unconfirmed")
        if not raw["source"].strip():
            raise _fail(shown, f"{key}.source", "a price needs the source it was read in", "price-source")
    includes = raw.get("includes", [])
    if not isinstance(includes, list) or any(i not in INCLUDES for i in includes):
        raise _fail(shown, f"{key}.includes", f"must be a list of {', '.join(INCLUDES)}", "price-fields")
    if not raw["as_of"].strip():
        raise _fail(shown, f"{key}.as_of", "a price needs the date it was read or is valid for", "price-date")
    return Price(section=section, item=item, usd=None if usd is None else float(usd), unit=raw["unit"],
                 region=raw["region"], status=status, source=raw["source"], as_of=raw["as_of"],
                 note=raw.get("note", ""), includes=tuple(includes))


def price_entries(data: object, shown: str) -> dict[str, Price]:
    """Every price of a parsed price file by ``<section>.<item>``; :class:`PriceCatalogError` on the first problem."""
    if not isinstance(data, dict):
        raise _fail(shown, "(top level)", "must be a mapping of sections", "price-shape")
    prices: dict[str, Price] = {}
    for section, items in data.items():
        if not isinstance(items, dict):
            raise _fail(shown, str(section), "must be a mapping of items to prices", "price-shape")
        for item, raw in items.items():
            price = _price(shown, str(section), str(item), raw)
            prices[price.key] = price
    return prices


def _shown(path: Path) -> str:
    return f"components/catalog/{path.name}"


def _parsed(path: Path) -> object:
    """A price file's data: parsed once per process by the C loader where there is one (the program and the cost
    tooling share it), a key given twice refused."""
    try:
        return yaml_files.load_file(path, unique_keys=True)
    except yaml.YAMLError as err:
        raise _fail(_shown(path), "(file)", f"is not valid YAML: {err}", "yaml-syntax") from None


def load_prices(cloud: str) -> dict[str, Price]:
    """The shipped price catalog of ``cloud`` (aws, gcp); on AWS with the prices of ``blueprint prices refresh``
    laid over it. Each file is parsed once per process (:func:`components.catalog.yaml_files.load_file`)."""
    files = [AWS_PRICES_FILE, AWS_REFRESHED_FILE] if cloud == "aws" else [GCP_PRICES_FILE]
    prices: dict[str, Price] = {}
    for i, path in enumerate(files):
        if i and not path.is_file():
            continue
        prices.update(price_entries(_parsed(path), _shown(path)))
    return prices


# Where a GPU node's hour is priced, by the group's capacity: a reservation is billed at the on-demand rate
# (EC2 On-Demand Capacity Reservations; GCP reservations), a Capacity Block at its own effective hourly rate.
MARKETS = {
    ("aws", "on-demand"): "ec2_on_demand", ("aws", "reserved"): "ec2_on_demand", ("aws", "spot"): "ec2_spot",
    ("aws", "capacity-block"): "ec2_capacity_block",
    ("gcp", "on-demand"): "compute_on_demand", ("gcp", "reservation"): "compute_on_demand",
    ("gcp", "spot"): "compute_spot", ("gcp", "flex-start"): "compute_flex_start",
}


# Markets whose price never exceeds on-demand, so on-demand bounds it from above when no figure was read: EC2 Spot
# ("you pay the Spot price ... up to the On-Demand price", the default maximum), GCP Spot VMs and DWS flex-start
# (discounted from on-demand, GCP pricing pages).
DISCOUNTED = {"ec2_spot": "ec2_on_demand", "compute_spot": "compute_on_demand",
              "compute_flex_start": "compute_on_demand"}


def node_hour_price(prices: dict[str, Price], cloud: str, capacity: str, machine: str) -> tuple[Price, str] | None:
    """The price of one node-hour of ``machine`` bought as ``capacity`` and how it stands for it ("" when it is the
    market's own figure; for a discounted market without one, the on-demand price as an upper bound), or None."""
    market = MARKETS.get((cloud, capacity), "")
    price = prices.get(f"{market}.{machine}")
    if price is not None and price.known:
        return price, ""
    bound = prices.get(f"{DISCOUNTED.get(market, '')}.{machine}")
    if bound is not None and bound.known:
        return bound, f"an upper bound: no {market} price read"
    return None


def describe(price: Price, standing: str = "") -> str:
    """``<key> $<usd>/<unit> (<status>, as of <date>[; standing])``: how an output names the figure it used."""
    extra = f"; {standing}" if standing else ""
    return f"{price.key} ${price.usd:g}/{price.unit} ({price.status}, as of {price.as_of}{extra})"
