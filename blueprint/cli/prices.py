"""``blueprint prices refresh``: the price catalog from a cloud's price API, written as the overlay the loader lays
over the curated catalog (the clouds that have one: :class:`blueprint.cost.cloud.CloudPriceRefresh`)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from blueprint.cli.common import EXIT_OK, emit
from blueprint.cost.cloud import price_refreshers
from blueprint.files.output import check_output_file, output_file_argument


def _shown(path: Path) -> str:
    """The overlay's path from the repository's root (components/catalog/...)."""
    parts = path.parts
    return "/".join(parts[parts.index("components"):]) if "components" in parts else str(path)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    refreshers = price_refreshers()
    clouds = sorted(refreshers)
    prices = sub.add_parser("prices", parents=[common], help="price catalog maintenance")
    prices.set_defaults(handler=run)
    prices_sub = prices.add_subparsers(dest="prices_command", required=True)
    refresh = prices_sub.add_parser("refresh", parents=[common], help="fetch prices from a cloud's price API: "
                                    + "; ".join(f"{c}: {refreshers[c].DESCRIPTION}" for c in clouds))
    refresh.add_argument("--cloud", choices=clouds, default=clouds[0] if clouds else None,
                         help=f"the cloud whose catalog to refresh (default {clouds[0] if clouds else 'none'})")
    refresh.add_argument("--region", help="region to price (default: " + ", ".join(
        f"{refreshers[c].DEFAULT_REGION} on {c}" for c in clouds) + ")")
    refresh.add_argument("-o", "--output", type=output_file_argument, help="overlay file (default: " + ", ".join(
        f"{_shown(refreshers[c].default_output())}" for c in clouds) + ", which the loader reads)")


def run(args: argparse.Namespace) -> int:
    """``blueprint prices refresh``: exit 0 with the count written, 2 when the API cannot be read."""
    refresher = price_refreshers()[args.cloud]
    out = args.output or refresher.default_output()
    region = args.region or refresher.DEFAULT_REGION
    check_output_file(out)
    count = refresher.refresh_catalog(region, out, datetime.now(UTC).date())
    emit(sys.stderr, f"wrote {count} on-demand prices ({region}) to {out}\n")
    return EXIT_OK
