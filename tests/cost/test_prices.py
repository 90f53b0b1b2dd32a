"""The price catalog: every figure carries its provenance, and stale prices stay marked stale."""

from __future__ import annotations

import pytest

from blueprint.cost.prices import PriceCatalogError, parse_prices, prices_for
from components.catalog import load_aws_catalog

GOOD = ('ec2_on_demand:\n  p5.48xlarge: {usd: 98.32, unit: hour, region: us-east-1, status: stale, '
        'source: "a catalog", as_of: "2025"}\n')


def test_every_known_price_has_a_source_a_date_and_a_status() -> None:
    prices = prices_for("aws")
    assert len(prices) >= 30
    for price in prices.values():
        assert price.as_of.strip(), price.key
        if price.known:
            assert price.source.strip() and price.status != "unconfirmed", price.key
        else:
            assert price.status == "unconfirmed", price.key


def test_p_family_on_demand_prices_are_the_post_cut_ones_and_capacity_blocks_stay_stale() -> None:
    # The mid-2025 AWS cut of P4d/P4de/P5 on-demand prices: the catalog carries the post-cut figures of the
    # Karpenter price file (2026-07-20), not the pre-cut skypilot ones (p4d 32.7726, p5 98.32).
    prices = prices_for("aws")
    expected = {"p4d.24xlarge": 21.957642, "p4de.24xlarge": 27.44705, "p5.48xlarge": 55.04,
                "p6-b200.48xlarge": 113.9328}
    for item, usd in expected.items():
        price = prices[f"ec2_on_demand.{item}"]
        assert (price.usd, price.status, price.as_of) == (usd, "confirmed", "2026-07-20"), item
        assert "karpenter" in price.source, item
    p5en = prices["ec2_on_demand.p5en.48xlarge"]
    assert (p5en.usd, p5en.status, p5en.as_of) == (63.296, "confirmed", "2026-08-06")
    assert not p5en.may_be_stale
    # Capacity Block rates follow supply and demand: every one read is stale and says when the table was read.
    blocks = [p for p in prices.values() if p.section == "ec2_capacity_block"]
    assert blocks and all(p.may_be_stale and p.as_of.startswith("2026-07-22") for p in blocks)


def test_every_instance_type_sold_as_capacity_blocks_has_a_block_rate() -> None:
    prices = prices_for("aws")
    sold = [name for name, facts in load_aws_catalog().items() if facts.capacity_blocks.value]
    assert "p5.48xlarge" in sold and "p6-b200.48xlarge" in sold
    for name in sold:
        assert prices[f"ec2_capacity_block.{name}"].known, name


def test_every_cpu_instance_type_of_the_catalog_has_an_on_demand_price() -> None:
    # System and service node groups run on these: a preview must price them (issue 22, "prices that are there").
    prices = prices_for("aws")
    cpu = [name for name, facts in load_aws_catalog().items() if facts.gpu_count == 0]
    assert "m6i.2xlarge" in cpu and "m7i.xlarge" in cpu
    for name in cpu:
        price = prices[f"ec2_on_demand.{name}"]
        assert price.known and price.status == "confirmed" and price.region == "us-east-1", name


def test_every_instance_type_of_the_catalog_has_an_on_demand_entry() -> None:
    # A GPU type too: a confirmed us-east-1 price, or null and unconfirmed with what was looked for (the cost preview
    # then names the group as unpriced, never $0).
    prices = prices_for("aws")
    for name in load_aws_catalog():
        price = prices[f"ec2_on_demand.{name}"]
        if price.known:
            assert price.status == "confirmed" and price.region == "us-east-1" and price.source.strip(), name
        else:
            assert price.status == "unconfirmed" and price.note.strip(), name


def test_issue_24_prices_are_the_ones_read() -> None:
    # aws/karpenter-provider-aws zz_generated.pricing_aws.go @6fc13b52 (us-east-1, 2026-07-20); the Capacity Block rate
    # from the 2026-07-22 scrape of the Capacity Blocks pricing page.
    prices = prices_for("aws")
    for item, usd in {"t3.medium": 0.0416, "m5zn.12xlarge": 3.9641, "r7g.medium": 0.0536, "g4dn.metal": 7.824,
                      "g6e.24xlarge": 15.06559, "p5.4xlarge": 6.88}.items():
        price = prices[f"ec2_on_demand.{item}"]
        assert (price.usd, price.status, price.as_of) == (usd, "confirmed", "2026-07-20"), item
    block = prices["ec2_capacity_block.p5.4xlarge"]
    assert (block.usd, block.region, block.may_be_stale) == (5.191, "us-east-1", True)


def test_unread_prices_are_null_not_zero() -> None:
    prices = prices_for("aws")
    for key in ("ec2_on_demand.p5e.48xlarge", "fsx_lustre.PERSISTENT_2_250", "fsx_lustre.PERSISTENT_1_200"):
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
     "budget-day, GB-hour [rule: price-unit]"),
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


def test_no_catalog_date_lies_in_the_future() -> None:
    # When a figure or a search was read (a price's as_of, "read"/"looked for"/"again" dates in notes and comments,
    # a catalog's "compiled" date) cannot be later than today: such a date is a typo that makes a reader trust a
    # figure, or a search for one, as more recent than it is. Dates of the future that are facts (end of support in
    # eks_versions.yaml, gke_versions.yaml) are not of this kind and are not read here.
    import datetime
    import re
    from pathlib import Path

    today = datetime.date.today().isoformat()
    catalog = Path(__file__).resolve().parents[2] / "components" / "catalog"
    when_read = re.compile(r"(?:as_of|compiled):\s*\"?(20\d\d-[01]\d-[0-3]\d)"
                           r"|(?:read|looked for(?: again)?|[Aa]gain)\s+(20\d\d-[01]\d-[0-3]\d)")
    late = [f"{path.name}: {a or b}" for path in sorted(catalog.glob("*.yaml"))
            for a, b in when_read.findall(path.read_text(encoding="utf-8")) if (a or b) > today]
    assert not late, late
