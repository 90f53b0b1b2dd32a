"""The price catalog as the cost tooling reads it: ``components/catalog/prices.py`` with the stack files' strict YAML
rules (JSON-only values, no anchors, no duplicate keys), so a price file gets the same errors a stack file does."""

from __future__ import annotations

from functools import lru_cache

from blueprint.graph.stackfile import StackError, parse_stack_yaml
from components.catalog.prices import (
    AWS_PRICES_FILE,
    AWS_REFRESHED_FILE,
    GCP_PRICES_FILE,
    INCLUDES,
    STATUSES,
    UNITS,
    Price,
    PriceCatalogError,
    load_prices,
    price_entries,
)

__all__ = ["AWS_PRICES_FILE", "AWS_REFRESHED_FILE", "GCP_PRICES_FILE", "INCLUDES", "STATUSES", "UNITS", "Price",
           "PriceCatalogError", "load_aws_prices", "load_gcp_prices", "parse_prices"]


def _strict(text: str, shown: str) -> object:
    try:
        return parse_stack_yaml(text, shown)
    except StackError as err:
        raise PriceCatalogError(str(err)) from None


def parse_prices(text: str, shown: str) -> dict[str, Price]:
    """Every price of a price file by ``<section>.<item>``; :class:`PriceCatalogError` on the first problem."""
    return price_entries(_strict(text, shown), shown)


@lru_cache(maxsize=1)
def load_aws_prices() -> dict[str, Price]:
    """The shipped AWS price catalog, with the prices of ``blueprint prices refresh`` laid over it."""
    return load_prices("aws", _strict)


@lru_cache(maxsize=1)
def load_gcp_prices() -> dict[str, Price]:
    """The shipped GCP price catalog (us-central1 list prices; ``blueprint prices refresh`` reads AWS only)."""
    return load_prices("gcp", _strict)
