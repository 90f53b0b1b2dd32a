"""``blueprint prices refresh``: on-demand EC2 prices from the AWS Price List API.

The curated ``prices_aws.yaml`` keeps every figure with its provenance; a refresh writes an overlay
(by default ``components/catalog/prices_aws_refreshed.yaml``) with the same fields (status ``confirmed``, the API as the
source, the offer's effective date), which the loader lays over the curated file. Only the Price List endpoints in
us-east-1 (and ap-south-1) serve the API, whatever region is priced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any

PRICING_ENDPOINT_REGION = "us-east-1"  # https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html


class RefreshError(RuntimeError):
    """The Price List API could not be read (credentials, network, an answer of an unknown shape)."""


def _filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """One product: Linux (operation RunInstances, no SQL/BYOL variants), shared tenancy, no pre-installed
    software, capacity actually used (not reserved)."""
    wanted = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux",
              "operation": "RunInstances", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
              "licenseModel": "No License required"}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


def _on_demand_price(item: dict[str, Any]) -> tuple[float, str] | None:
    """USD per hour and the offer's effective date, from one PriceList product document."""
    for offer in (item.get("terms", {}).get("OnDemand") or {}).values():
        for dimension in (offer.get("priceDimensions") or {}).values():
            usd = (dimension.get("pricePerUnit") or {}).get("USD")
            if dimension.get("unit") == "Hrs" and usd is not None:
                return float(usd), str(offer.get("effectiveDate", ""))[:10]
    return None


def fetch_on_demand(client: Any, instance_types: Iterable[str], region: str) -> dict[str, tuple[float, str]]:
    """``{instance_type: (usd_per_hour, effective_date)}`` for the types the API prices in ``region``."""
    out: dict[str, tuple[float, str]] = {}
    for instance_type in instance_types:
        found_prices: set[float] = set()
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": _filters(instance_type, region),
                                      "FormatVersion": "aws_v1", "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            answer = client.get_products(**kwargs)
            for text in answer.get("PriceList", []):
                try:
                    found = _on_demand_price(json.loads(text))
                except (ValueError, AttributeError, TypeError) as err:
                    raise RefreshError(f"a Price List answer for {instance_type} is not a product document: "
                                       f"{err}") from None
                if found is not None and found[0] > 0:
                    out[instance_type] = found
                    found_prices.add(found[0])
            token = answer.get("NextToken")
            if not token:
                break
        if len(found_prices) > 1:
            # The filters should leave one product; several prices mean they no longer do, and picking one
            # would be a guess.
            raise RefreshError(f"the Price List API gave {len(found_prices)} different on-demand prices for "
                               f"{instance_type} in {region} ({', '.join(f'{p:g}' for p in sorted(found_prices))}); "
                               "nothing was written")
    return out


def refreshed_document(prices: dict[str, tuple[float, str]], region: str, fetched: date) -> dict[str, Any]:
    """The overlay file's content, in the schema of ``prices_aws.yaml``."""
    source = (f"AWS Price List API pricing.get_products (AmazonEC2, regionCode {region}, Linux, Shared tenancy, "
              "capacitystatus Used)")
    return {"ec2_on_demand": {
        itype: {"usd": usd, "unit": "hour", "region": region, "status": "confirmed", "source": source,
                "as_of": f"{effective or 'effective date not given'} (fetched {fetched.isoformat()})"}
        for itype, (usd, effective) in sorted(prices.items())}}


def refresh(client: Any, instance_types: Iterable[str], region: str, out: Path, fetched: date) -> int:
    """Fetch and write the overlay; returns how many prices were written."""
    prices = fetch_on_demand(client, instance_types, region)
    if not prices:
        raise RefreshError(f"no on-demand price found for any catalog type in {region}; nothing was written")
    header = ("# Written by `blueprint prices refresh`; laid over prices_aws.yaml by the loader. Do not edit by hand:\n"
              "# refresh again, or delete the file to fall back to the curated prices.\n")
    import yaml  # only a refresh writes YAML

    out.write_text(header + yaml.safe_dump(refreshed_document(prices, region, fetched), sort_keys=True,
                                           width=200), encoding="utf-8")
    return len(prices)


def pricing_client() -> Any:
    """A boto3 Price List client on the endpoint that serves it."""
    import boto3

    return boto3.client("pricing", region_name=PRICING_ENDPOINT_REGION)


DEFAULT_REGION = "us-east-1"  # the region priced when none is given
DESCRIPTION = "on-demand EC2 prices of the catalog's instance types from the AWS Price List API (needs AWS credentials)"


def default_output() -> Path:
    """The overlay the price loader reads (``components/catalog/prices_aws_refreshed.yaml``, its
    ``AWS_REFRESHED_FILE``), found beside the ``components`` package without importing the catalogs: every
    ``blueprint`` command builds the ``prices`` parser, whose help names it (tests/cost/test_prices_refresh.py checks
    that the two agree)."""
    import components

    return Path(components.__file__).resolve().parent / "catalog" / "prices_aws_refreshed.yaml"


def refresh_catalog(region: str, out: Path, fetched: date) -> int:
    """Fetch the catalog's instance types' prices in ``region`` and write them to ``out``; :class:`PriceRefreshError`
    when the API cannot be read."""
    import botocore.exceptions

    from blueprint.cost.cloud import PriceRefreshError
    from components.catalog.instances import load_aws_catalog

    try:
        client = pricing_client()
    except ValueError as err:  # botocore's "Invalid endpoint: ..." for a malformed AWS_ENDPOINT_URL
        raise PriceRefreshError(f"prices refresh: the AWS client cannot be made ({err}); check AWS_ENDPOINT_URL "
                                "and AWS_ENDPOINT_URL_PRICING") from None
    try:
        return refresh(client, sorted(load_aws_catalog()), region, out, fetched)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, RefreshError) as err:
        raise PriceRefreshError(f"prices refresh: the AWS Price List API could not be read: {err}") from None
