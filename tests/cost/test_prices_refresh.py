"""``blueprint prices refresh`` against botocore's Stubber with the Price List API's real answer shape."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from blueprint.cli import main
from blueprint.clouds.aws.refresh import RefreshError, _filters, fetch_on_demand, refresh
from blueprint.cost.prices import parse_prices


def _product(instance_type: str, usd: str, effective: str = "2026-11-01T00:00:00Z") -> str:
    """One PriceList entry as the API returns it: a JSON document in a string (test prices, not real ones)."""
    sku = f"SKU{instance_type.replace('.', '')}"
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku,
                    "attributes": {"instanceType": instance_type, "regionCode": "us-east-1",
                                   "operatingSystem": "Linux", "tenancy": "Shared"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": effective, "termAttributes": {},
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "description": "test price",
                "pricePerUnit": {"USD": usd}}}}}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"})


def _expect(stubber: Stubber, instance_type: str, answer: dict[str, object], token: str | None = None) -> None:
    params: dict[str, object] = {"ServiceCode": "AmazonEC2", "Filters": _filters(instance_type, "us-east-1"),
                                 "FormatVersion": "aws_v1", "MaxResults": 100}
    if token:
        params["NextToken"] = token
    stubber.add_response("get_products", {"FormatVersion": "aws_v1", **answer}, params)


@pytest.fixture
def client() -> object:
    return boto3.client("pricing", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")


def test_fetch_reads_the_hourly_on_demand_price_across_pages(client: object) -> None:
    with Stubber(client) as stubber:  # type: ignore[arg-type]
        _expect(stubber, "p5.48xlarge", {"PriceList": [], "NextToken": "page-2"})
        _expect(stubber, "p5.48xlarge", {"PriceList": [_product("p5.48xlarge", "12.3400000000")]}, "page-2")
        _expect(stubber, "m6i.2xlarge", {"PriceList": [_product("m6i.2xlarge", "0.5000000000")]})
        _expect(stubber, "p6-b200.48xlarge", {"PriceList": []})  # not sold there: left out, not zero
        prices = fetch_on_demand(client, ["p5.48xlarge", "m6i.2xlarge", "p6-b200.48xlarge"], "us-east-1")
        stubber.assert_no_pending_responses()
    assert prices == {"p5.48xlarge": (12.34, "2026-11-01"), "m6i.2xlarge": (0.5, "2026-11-01")}


def test_the_filters_leave_one_linux_on_demand_product() -> None:
    fields = {f["Field"]: f["Value"] for f in _filters("p5.48xlarge", "us-east-1")}
    assert fields == {"instanceType": "p5.48xlarge", "regionCode": "us-east-1", "operatingSystem": "Linux",
                      "operation": "RunInstances", "tenancy": "Shared", "preInstalledSw": "NA",
                      "capacitystatus": "Used", "licenseModel": "No License required"}


def test_two_products_with_different_prices_are_refused_not_guessed(client: object, tmp_path: Path) -> None:
    out = tmp_path / "refreshed.yaml"
    with Stubber(client) as stubber:  # type: ignore[arg-type]
        _expect(stubber, "p5.48xlarge", {"PriceList": [_product("p5.48xlarge", "12.34"), _product("p5.48xlarge",
                                                                                                  "13.00")]})
        with pytest.raises(RefreshError, match=r"2 different on-demand prices for p5.48xlarge in us-east-1 "
                                               r"\(12.34, 13\); nothing was written"):
            refresh(client, ["p5.48xlarge"], "us-east-1", out, date(2026, 11, 29))
    assert not out.exists()


def test_refresh_writes_an_overlay_in_the_catalog_schema(client: object, tmp_path: Path) -> None:
    out = tmp_path / "refreshed.yaml"
    with Stubber(client) as stubber:  # type: ignore[arg-type]
        _expect(stubber, "p5.48xlarge", {"PriceList": [_product("p5.48xlarge", "12.3400000000")]})
        assert refresh(client, ["p5.48xlarge"], "us-east-1", out, date(2026, 11, 29)) == 1
    price = parse_prices(out.read_text(), "refreshed.yaml")["ec2_on_demand.p5.48xlarge"]
    assert (price.usd, price.status, price.region) == (12.34, "confirmed", "us-east-1")
    assert price.as_of == "2026-11-01 (fetched 2026-11-29)" and not price.may_be_stale
    assert price.source.startswith("AWS Price List API pricing.get_products (AmazonEC2, regionCode us-east-1")


def test_refresh_without_credentials_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookup: tests stay offline
    assert main(["prices", "refresh", "-o", str(tmp_path / "out.yaml")]) == 2
    assert capsys.readouterr().err == ("error: prices refresh: the AWS Price List API could not be read: Unable to "
                                       "locate credentials\n")
    assert not (tmp_path / "out.yaml").exists()


def test_refresh_that_finds_nothing_writes_nothing(client: object, tmp_path: Path) -> None:
    from blueprint.clouds.aws.refresh import RefreshError

    out = tmp_path / "refreshed.yaml"
    with Stubber(client) as stubber:  # type: ignore[arg-type]
        _expect(stubber, "p5.48xlarge", {"PriceList": []})
        with pytest.raises(RefreshError, match="no on-demand price found for any catalog type in us-east-1"):
            refresh(client, ["p5.48xlarge"], "us-east-1", out, date(2026, 11, 29))
    assert not out.exists()


def test_the_default_overlay_is_the_file_the_loader_reads() -> None:
    # The refresh finds its default output without importing the catalogs (the prices parser is built by every
    # command); it must still be the very file the price loader lays over the curated prices.
    from blueprint.clouds.aws.refresh import default_output
    from components.catalog.prices import AWS_REFRESHED_FILE

    assert default_output() == AWS_REFRESHED_FILE.resolve()
