"""Issue 36, item 4: money at risk is never $0 by omission. A spot group whose spot price was not read is bounded by
the on-demand price and says so; every line without a price is listed in the PR comment, and a figure with unpriced
parts says "at least"; a new group the autoscaler will not manage says so."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from blueprint.cost.combine import load_documents
from blueprint.cost.diff import CostDiff, diff_document, diff_reports, render_diff_json, render_diff_markdown
from blueprint.cost.engine import price_graph
from blueprint.cost.lines import HOURS_PER_MONTH
from blueprint.cost.prices import prices_for
from blueprint.cost.render import cost_document, render_cost_summary, render_cost_table
from blueprint.graph.model import ResourceGraph
from tests.conftest import raw_stack_config, run_spec

G6E = 10.49264  # ec2_on_demand.g6e.12xlarge (prices_aws.yaml); no ec2_spot.g6e.12xlarge was read
BOUND = "spot price not read: bounded by on-demand $10.4926/h"
L40S = {"name": "l40s", "instanceType": "g6e.12xlarge", "minSize": 0, "desiredSize": 0, "maxSize": 4,
        "capacity": {"type": "spot"}}
FIXED = {"name": "fixed", "instanceType": "g6.xlarge", "minSize": 2, "desiredSize": 2, "maxSize": 2,
         "capacity": {"type": "on-demand"}}
GROWN = {"name": "grown", "instanceType": "g6.xlarge", "minSize": 0, "desiredSize": 0, "maxSize": 3,
         "capacity": {"type": "spot"}}


def _dev_aws(*groups: dict[str, Any]) -> ResourceGraph:
    spec = raw_stack_config("dev-aws")["gpu-cluster:spec"]
    spec["aws"]["nodeGroups"].extend(copy.deepcopy(list(groups)))
    return run_spec(spec, "dev-aws").graph


@pytest.fixture(scope="module")
def change() -> CostDiff:
    """dev-aws as shipped against dev-aws with three new groups: a placed g6e.12xlarge spot group (no spot price read),
    a fixed-size on-demand group and a spot group the autoscaler grows."""
    return diff_reports(price_graph(_dev_aws()), price_graph(_dev_aws(L40S, FIXED, GROWN)))


def test_a_spot_group_without_a_spot_price_is_bounded_by_on_demand(change: CostDiff) -> None:
    prices = prices_for("aws")
    assert "ec2_spot.g6e.12xlarge" not in prices and prices["ec2_on_demand.g6e.12xlarge"].usd == G6E
    group = next(r for r in change.new.resources if r.name == "nodegroup-l40s-ng")
    hours = group.components_at_max[0]
    assert (hours.price_key, hours.quantity, hours.unit_price_usd, hours.bound) == (
        "ec2_spot.g6e.12xlarge", 4 * HOURS_PER_MONTH, G6E, BOUND)
    assert hours.cost_usd == pytest.approx(30_638.5088)  # was $0 at max size: the spot hours had no price
    assert group.priced_fully and change.new.bounded == ["ec2_spot.g6e.12xlarge"]
    assert "ec2_spot.g6e.12xlarge" not in change.new.unpriced
    table = render_cost_table(change.new)
    assert (f"g6e.12xlarge instance hours (spot): 0 hour x ${G6E} = $0.00  [upper bound: {BOUND}]") in table
    assert ("priced at an upper bound (the price was not read; the real figure is at most this): "
            f"ec2_spot.g6e.12xlarge (nodegroup-l40s-ng): {BOUND}") in table
    assert f"  at an upper bound: ec2_spot.g6e.12xlarge (nodegroup-l40s-ng): {BOUND}" in render_cost_summary(change.new)
    doc = cost_document(change.new)
    assert doc["bounded"] == [f"ec2_spot.g6e.12xlarge (nodegroup-l40s-ng): {BOUND}"]
    markdown = render_diff_markdown([diff_document(change)])
    assert f"| 0 -> 2,920 hour | $10.4926/hour (upper bound: {BOUND}) | $0.00 | $30,638.51 |" in markdown
    assert f"- ec2_spot.g6e.12xlarge (nodegroup-l40s-ng): {BOUND}" in markdown


def test_the_pr_comment_lists_every_unpriced_line_and_says_at_least(change: CostDiff) -> None:
    """dev-aws has one line without a price (its budget's days): the stack's totals in the comment are "at least",
    and the line is listed with its quantity; the change itself is fully priced, so its figure is exact."""
    doc = diff_document(change)
    assert change.new.unpriced == ["budgets.budget_day"] and doc["new_lower_bound"] and doc["previous_lower_bound"]
    assert doc["unpriced_lines"] == ["cost-budget-cluster: budget days, 30.4167 budget-day of budgets.budget_day"]
    markdown = render_diff_markdown([doc])
    prev, new, reach = (change.previous.total_monthly_usd, change.new.total_monthly_usd,
                        change.new.total_monthly_usd_at_max)
    assert (f"| dev-aws | at least ${prev:,.2f} | at least ${new:,.2f} | +${new - prev:,.2f}" in markdown)
    assert f"| at least ${reach:,.2f} |" in markdown
    assert ("Not in the figures (no price read), every line:\n\n"
            "- cost-budget-cluster: budget days, 30.4167 budget-day of budgets.budget_day\n") in markdown
    assert f"will increase by ${new - prev:,.2f} " in markdown  # the change's own lines all have a price


def test_every_unpriced_line_of_prod_aws_is_in_its_comment() -> None:
    """prod-aws: the filesystem's rate was not read (prices_aws.yaml says what was looked for), so the comment lists
    its line with the capacity, beside the budget's, whatever the change is."""
    from tests.conftest import offline_run

    graph = offline_run("prod-aws").graph
    report = price_graph(graph)
    doc = diff_document(diff_reports(report, report))
    assert doc["unpriced_lines"] == [
        "cost-budget-cluster: budget days, 30.4167 budget-day of budgets.budget_day",
        "storage-lustre: PERSISTENT_2_500 storage, 9,600 GB-month of fsx_lustre.PERSISTENT_2_500"]
    assert doc["new_lower_bound"]


def test_a_new_group_the_autoscaler_will_not_manage_says_so(change: CostDiff) -> None:
    """A fixed-size group (minSize = maxSize) and a placed multi-node EFA group are left alone by the Cluster
    Autoscaler (components/spec/decisions.is_autoscaled); a spot group with room between its sizes is not."""
    by_name = {r.name: r for r in change.resources}
    assert (by_name["nodegroup-fixed-ng"].autoscaled, by_name["nodegroup-l40s-ng"].autoscaled,
            by_name["nodegroup-grown-ng"].autoscaled) == (False, False, True)
    fixed = next(r for r in change.new.resources if r.name == "nodegroup-fixed-ng").monthly_usd
    markdown = render_diff_markdown([diff_document(change)])
    assert ("New node group `nodegroup-fixed-ng` is not managed by the autoscaler (fixed size): it stays at its "
            f"desired 2 node(s), used or not, and nothing grows it toward its max of 2 (${fixed:,.2f} a month at "
            f"desired size, ${fixed:,.2f} at max size).") in markdown
    assert ("New node group `nodegroup-l40s-ng` is not managed by the autoscaler (fixed size): it stays at its "
            "desired 0 node(s), used or not, and nothing grows it toward its max of 4") in markdown
    assert "`nodegroup-grown-ng` is not managed" not in markdown


def test_the_new_fields_survive_the_combined_comment(change: CostDiff) -> None:
    """The JSON a stack's job writes carries what the comment shows, and ``--combine`` reads it back."""
    text = render_diff_json([change])
    (doc,) = load_documents([("dev-aws.cost.json", text)])
    assert doc["unpriced_lines"] and doc["bounded"] and doc["new_lower_bound"] is True
    assert {r["name"]: r["autoscaled"] for r in doc["resources"]}["nodegroup-fixed-ng"] is False
    assert render_diff_markdown([doc]) == render_diff_markdown([json.loads(text)])
    bad = json.loads(text)
    bad["resources"][0]["autoscaled"] = "no"
    with pytest.raises(ValueError, match=r"resources\[0\]\.autoscaled: must be true, false or null"):
        load_documents([("x.json", json.dumps(bad))])


def _golden(stack: str) -> ResourceGraph:
    from tests.conftest import ROOT

    return ResourceGraph.from_dict(json.loads((ROOT / "tests" / "golden" / f"{stack}.json").read_text()))


def test_slurms_rds_database_is_priced() -> None:
    """Item 4(c): prod-aws-slurm's accounting database (RDS for MySQL db.r7g.large, Multi-AZ, 100 GB gp3) had no
    price; it now has its instance hours and storage, with sources in prices_aws.yaml."""
    report = price_graph(_golden("prod-aws-slurm"))
    db = next(r for r in report.resources if r.type == "aws:rds/instance:Instance")
    assert [(c.price_key, c.quantity, c.unit_price_usd) for c in db.components] == [
        ("rds_mysql.db.r7g.large.multi_az", 730, 0.478), ("rds_mysql.gp3_storage.multi_az", 100, 0.23)]
    assert db.monthly_usd == pytest.approx(730 * 0.478 + 100 * 0.23) and db.priced_fully
    assert not [k for k in report.unpriced if k.startswith("rds_mysql.")]
    prices = prices_for("aws")
    assert all(prices[c.price_key].source and prices[c.price_key].as_of for c in db.components)


def test_slurms_cloud_sql_database_is_priced_by_vcpu_memory_and_storage() -> None:
    """Item 4(c): dev-gcp-slurm's Cloud SQL instance (db-custom-2-13312, zonal, 20 GB SSD) was not priced at all;
    the spec's default tier, db-custom-4-16384, regional, doubles each rate."""
    graph = _golden("dev-gcp-slurm")
    report = price_graph(graph)
    (db,) = [r for r in report.resources if r.type == "gcp:sql/databaseInstance:DatabaseInstance"]
    assert [(c.price_key, c.quantity, c.unit_price_usd) for c in db.components] == [
        ("cloud_sql.mysql_vcpu_zonal", 2 * 730, 0.0413), ("cloud_sql.mysql_memory_zonal", 13 * 730, 0.007),
        ("cloud_sql.ssd_zonal", 20, 0.17)]
    assert db.monthly_usd == pytest.approx(60.298 + 66.43 + 3.4) and db.team == "ml-platform"
    assert (db.urn, "Cloud SQL backup GiB stored (no usage quantity read)") in report.usage_not_priced
    doc = graph.to_dict()
    for res in doc["resources"]:
        if res["type"] == "gcp:sql/databaseInstance:DatabaseInstance":
            res["inputs"]["settings"].update(tier="db-custom-4-16384", availabilityType="REGIONAL")
    (db,) = [r for r in price_graph(ResourceGraph.from_dict(doc)).resources if r.name == db.name]
    assert db.monthly_usd == pytest.approx(4 * 730 * 0.0826 + 16 * 730 * 0.014 + 20 * 0.34) and db.priced_fully
    for res in doc["resources"]:
        if res["type"] == "gcp:sql/databaseInstance:DatabaseInstance":
            res["inputs"]["settings"].update(edition="ENTERPRISE_PLUS")
    (db,) = [r for r in price_graph(ResourceGraph.from_dict(doc)).resources if r.name == db.name]
    assert db.components[0].price_key == "cloud_sql.db-custom-4-16384.enterprise_plus_regional"
    assert db.components[0].unit_price_usd is None and not db.priced_fully


def test_what_was_not_found_stays_listed_with_what_was_looked_for() -> None:
    """FSx for Lustre PERSISTENT_2 at 500 MB/s/TiB and Managed Lustre: no figure read; each says where it was looked
    for, and stays a line without a price (never $0)."""
    aws, gcp = prices_for("aws"), prices_for("gcp")
    for price in (aws["fsx_lustre.PERSISTENT_2_500"], gcp["managed_lustre.tier-125"]):
        assert not price.known and "issue 36" in price.note and price.as_of == "2026-12-02"
    assert "fsx_lustre.PERSISTENT_2_500" in price_graph(_golden("prod-aws")).unpriced
    assert "managed_lustre.tier-500" in price_graph(_golden("prod-gcp")).unpriced
