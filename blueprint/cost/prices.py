"""The price catalog as the cost tooling reads it: ``components/catalog/prices.py``.

The shipped files (and the overlay of ``blueprint prices refresh``) are parsed once per process, by the same loader
the program prices with (libyaml's C loader, a key given twice refused), so a preview reads each once, not once for
the program and once for its cost. A price file given as text (:func:`parse_prices`) is read with the stack files'
strict YAML rules (JSON-only values, no anchors, no duplicate keys), so it gets the same errors a stack file does;
a test holds the shipped files to those rules and to the same prices."""

from __future__ import annotations

from functools import cache

from components.catalog.prices import (
    DISCOUNTED,
    INCLUDES,
    STATUSES,
    UNITS,
    Price,
    PriceCatalogError,
    load_prices,
    price_entries,
)

__all__ = ["DISCOUNTED", "INCLUDES", "STATUSES", "UNITS", "Price", "PriceCatalogError", "parse_prices", "prices_for"]


def _strict(text: str, shown: str) -> object:
    from blueprint.graph.stack_yaml import StackError, parse_stack_yaml

    try:
        return parse_stack_yaml(text, shown)
    except StackError as err:
        raise PriceCatalogError(str(err)) from None


def parse_prices(text: str, shown: str) -> dict[str, Price]:
    """Every price of a price file by ``<section>.<item>``; :class:`PriceCatalogError` on the first problem."""
    return price_entries(_strict(text, shown), shown)


@cache
def prices_for(cloud: str) -> dict[str, Price]:
    """The cloud's shipped price catalog (``components/catalog/prices_<cloud>.yaml``), with the prices of ``blueprint
    prices refresh`` laid over it where the cloud has a refresh."""
    return load_prices(cloud)
