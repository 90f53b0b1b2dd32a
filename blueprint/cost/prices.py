"""The price catalog: every figure with its unit, region, status, source and date.

A price file is data from elsewhere, so it is checked field by field when loaded: a price without a
source or date, a made-up status or a number where no figure was read is refused with the file, the key
path and the rule, instead of reaching a cost report. ``may_be_stale`` is what every output format must
show next to a figure that may no longer be current.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from blueprint.stackfile import StackError, parse_stack_yaml

AWS_PRICES_FILE = Path(__file__).with_name("prices_aws.yaml")
GCP_PRICES_FILE = Path(__file__).with_name("prices_gcp.yaml")

STATUSES = ("confirmed", "secondary", "stale", "unconfirmed")
UNITS = ("hour", "GB-month", "GB", "key-month", "1k-requests", "budget-day")
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


def parse_prices(text: str, shown: str) -> dict[str, Price]:
    """Every price of a price file by ``<section>.<item>``; :class:`PriceCatalogError` on the first problem."""
    try:
        data = parse_stack_yaml(text, shown)
    except StackError as err:
        raise PriceCatalogError(str(err)) from None
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


AWS_REFRESHED_FILE = Path(__file__).with_name("prices_aws_refreshed.yaml")


@lru_cache(maxsize=1)
def load_aws_prices() -> dict[str, Price]:
    """The shipped AWS price catalog, with the prices of ``blueprint prices refresh`` laid over it."""
    prices = parse_prices(AWS_PRICES_FILE.read_text(encoding="utf-8"), "blueprint/cost/prices_aws.yaml")
    if AWS_REFRESHED_FILE.is_file():
        prices.update(parse_prices(AWS_REFRESHED_FILE.read_text(encoding="utf-8"),
                                   "blueprint/cost/prices_aws_refreshed.yaml"))
    return prices


@lru_cache(maxsize=1)
def load_gcp_prices() -> dict[str, Price]:
    """The shipped GCP price catalog (us-central1 list prices; ``blueprint prices refresh`` reads AWS only)."""
    return parse_prices(GCP_PRICES_FILE.read_text(encoding="utf-8"), "blueprint/cost/prices_gcp.yaml")
