"""The price catalog: every figure carries its provenance, and stale prices stay marked stale."""

from __future__ import annotations

import pytest

from blueprint.cost.prices import PriceCatalogError, load_aws_prices, parse_prices

GOOD = ('ec2_on_demand:\n  p5.48xlarge: {usd: 98.32, unit: hour, region: us-east-1, status: stale, '
        'source: "a catalog", as_of: "2025"}\n')


def test_every_known_price_has_a_source_a_date_and_a_status() -> None:
    prices = load_aws_prices()
    assert len(prices) >= 30
    for price in prices.values():
        assert price.as_of.strip(), price.key
        if price.known:
            assert price.source.strip() and price.status != "unconfirmed", price.key
        else:
            assert price.status == "unconfirmed", price.key


def test_pre_cut_p_family_on_demand_prices_are_stale_and_the_post_cut_p5en_is_current() -> None:
    # The mid-2025 AWS cut of P4d/P4de/P5 on-demand prices: the only figures read predate it.
    prices = load_aws_prices()
    for item in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"):
        assert prices[f"ec2_on_demand.{item}"].may_be_stale, item
    p5en = prices["ec2_on_demand.p5en.48xlarge"]
    assert (p5en.usd, p5en.status, p5en.as_of) == (63.296, "confirmed", "2026-08-06")
    assert not p5en.may_be_stale
    # Capacity Block rate tables were due for update on 2025-01-01: all of them are stale.
    assert all(p.may_be_stale for p in prices.values() if p.section == "ec2_capacity_block")


def test_unread_prices_are_null_not_zero() -> None:
    prices = load_aws_prices()
    for key in ("ec2_on_demand.p6-b200.48xlarge", "fsx_lustre.PERSISTENT_2_250"):
        assert prices[key].usd is None and not prices[key].known
    assert prices["eks.cluster_standard_support"].usd == 0.10


def test_a_good_price_file_parses() -> None:
    price = parse_prices(GOOD, "p.yaml")["ec2_on_demand.p5.48xlarge"]
    assert (price.section, price.item, price.usd, price.unit) == ("ec2_on_demand", "p5.48xlarge", 98.32, "hour")


@pytest.mark.parametrize(("change", "message"), [
    (('source: "a catalog"', 'source: ""'),
     "p.yaml: ec2_on_demand.p5.48xlarge.source: a price needs the source it was read in [rule: price-source]"),
    ((', as_of: "2025"', ""), "p.yaml: ec2_on_demand.p5.48xlarge.as_of: is required [rule: price-fields]"),
    (("status: stale", "status: probably"),
     "p.yaml: ec2_on_demand.p5.48xlarge.status: 'probably' is not one of confirmed, secondary, stale, "
     "unconfirmed [rule: price-status]"),
    (("usd: 98.32", "usd: null"),
     "p.yaml: ec2_on_demand.p5.48xlarge.usd: is null but status is 'stale': a price that was not read is "
     "'unconfirmed' [rule: price-null-unconfirmed]"),
    (("status: stale", "status: unconfirmed"),
     "p.yaml: ec2_on_demand.p5.48xlarge.usd: is set but status is 'unconfirmed': say where the figure was read "
     "and how sure it is [rule: price-null-unconfirmed]"),
    (("usd: 98.32", "usd: -1"),
     "p.yaml: ec2_on_demand.p5.48xlarge.usd: must be a finite number >= 0 or null [rule: price-value]"),
    (("usd: 98.32", "usd: .nan"),
     "p.yaml: ec2_on_demand.p5.48xlarge.usd: must be a finite number >= 0 or null [rule: price-value]"),
    (("unit: hour", "unit: day"),
     "p.yaml: ec2_on_demand.p5.48xlarge.unit: 'day' is not one of hour, GB-month, GB, key-month, 1k-requests, "
     "budget-day [rule: price-unit]"),
    (("as_of:", "asof:"),
     "p.yaml: ec2_on_demand.p5.48xlarge.asof: unknown field (allowed: as_of, includes, note, region, source, "
     "status, unit, usd) [rule: price-fields]"),
    (("as_of:", "includes: [gpu], as_of:"),
     "p.yaml: ec2_on_demand.p5.48xlarge.includes: must be a list of local-ssd [rule: price-fields]"),
])
def test_a_bad_price_file_is_refused_with_its_key_path_and_rule(change: tuple[str, str], message: str) -> None:
    with pytest.raises(PriceCatalogError) as err:
        parse_prices(GOOD.replace(*change), "p.yaml")
    assert str(err.value) == message


def test_a_price_file_with_yaml_aliases_is_refused() -> None:
    with pytest.raises(PriceCatalogError, match=r"rule: yaml-"):
        parse_prices("a: &x {usd: 1}\nb: *x\n", "p.yaml")
