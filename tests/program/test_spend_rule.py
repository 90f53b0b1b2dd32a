"""Issue 37, part 4: the ``monitoring-rules`` PrometheusRule grows linearly with node groups and teams. Each team's
TeamSpendOverBudget alert names only its own groups' prices (every group's figure is one annotation on the rule),
its expression, threshold and labels are what they were, and the preview still shows every price and every
unpriced group."""

from __future__ import annotations

import json
from typing import Any

from components.kubernetes.objects.telemetry import (
    PRICES_ANNOTATION,
    UNPRICED_ANNOTATION,
    prometheus_rules,
    spend_pricing,
    spend_watch_lines,
)
from components.kubernetes.quotas import GpuPool

BASIS = "ec2_on_demand.p5.48xlarge $55.04/hour (confirmed, as of 2026-07-20)"  # a test figure, not a catalog read


def _pools(groups: int) -> list[GpuPool]:
    """``groups`` p5-like pools; every tenth has no price read."""
    return [GpuPool(name=f"gpu-{i:04d}", instance_type="p5.48xlarge", gpus_per_node=8, max_nodes=2,
                    fabric_per_node=32, vcpu_per_node=192, memory_gib_per_node=2048, placed=True,
                    node_hour_usd=None if i % 10 == 9 else 55.04, price_basis="" if i % 10 == 9 else BASIS)
            for i in range(groups)]


def _rule(groups: int) -> dict[str, Any]:
    """The PrometheusRule of ``groups`` node groups and as many teams, each with a quota on its own group (as the
    bench's generated stacks: blueprint/bench.py generated_spec)."""
    teams = {f"team-{i:04d}": [f"gpu-{i:04d}"] for i in range(groups)}
    return prometheus_rules(team_budgets={t: 50000.0 for t in teams}, spend=spend_pricing(_pools(groups), 30),
                            team_groups=teams)


def _alerts(rule: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["labels"]["team"]: r for g in rule["spec"]["groups"] for r in g["rules"]
            if r.get("alert") == "TeamSpendOverBudget"}


def test_the_rule_grows_linearly_with_groups_and_teams() -> None:
    """Ten times the groups and teams make a rule about ten times larger, not a hundred (every alert used to
    repeat every group's price: 93.7 MB at 1,000 groups)."""
    small, large = (len(json.dumps(_rule(n))) for n in (20, 200))
    assert large / small < 11, (small, large)


def test_a_team_s_alert_keeps_its_expression_threshold_and_labels() -> None:
    """The alert's semantics are unchanged: 30 days of the namespace's GPU cost (one-minute samples, hence / 60)
    against the $50,000 monthly budget prorated to 30 days (50000 x 30 x 24 / 730 = 49,315.07)."""
    alert = _alerts(_rule(20))["team-0007"]
    assert alert["expr"] == ('sum_over_time(gpu_cluster:gpu_cost_usd_per_hour:sum_by_namespace{namespace="team-0007"}'
                             '[30d]) / 60 > 49315.07')
    assert alert["for"] == "10m"
    assert alert["labels"] == {"severity": "warning", "team": "team-0007"}
    assert alert["annotations"]["summary"] == (
        "team team-0007 used {{ $value | humanize }} USD of GPU time in the last 30 days, more than its budget of "
        "$50,000 a month allows ($49,315); GPU hours priced as the cost preview prices them")
    assert alert["annotations"]["runbook_url"] == "docs/runbooks.md#team-spend-over-budget"
    # Its own group's figure only; an unpriced group of its own is named as such.
    assert alert["annotations"]["prices"] == f"gpu-0007: {BASIS} / 8 GPU units"
    assert "unpriced" not in alert["annotations"]
    assert _alerts(_rule(20))["team-0009"]["annotations"] == {
        "summary": _alerts(_rule(20))["team-0009"]["annotations"]["summary"],
        "runbook_url": "docs/runbooks.md#team-spend-over-budget",
        "unpriced": "gpu-0009: no price read, GPU hours there are not counted"}


def test_the_rule_carries_every_price_once_and_the_preview_shows_them() -> None:
    rule = _rule(20)
    notes = rule["metadata"]["annotations"]
    priced = [f"gpu-{i:04d}" for i in range(20) if i % 10 != 9]
    assert notes[PRICES_ANNOTATION] == "; ".join(f"{g}: {BASIS} / 8 GPU units" for g in priced)
    assert notes[UNPRICED_ANNOTATION] == "gpu-0009, gpu-0019"
    lines = spend_watch_lines([rule])
    assert lines[0].endswith("last 30 days, at this preview's prices): "
                             + ", ".join(f"team-{i:04d}" for i in range(20)))
    assert lines[1] == f"  prices: {notes[PRICES_ANNOTATION]}"
    assert lines[2] == "  warning: gpu-0009, gpu-0019: no price read, GPU hours there are not counted"
    assert len(lines) == 3


def test_a_graph_saved_before_the_change_still_shows_its_prices() -> None:
    """A saved graph whose alerts carry every group's figures (before issue 37) reads as it did."""
    rule = _rule(20)
    every = rule["metadata"]["annotations"].pop(PRICES_ANNOTATION)
    for alert in _alerts(rule).values():
        alert["annotations"]["prices"] = every
        alert["annotations"]["unpriced"] = "gpu-0009, gpu-0019: no price read, GPU hours there are not counted"
    assert spend_watch_lines([rule])[1:] == [
        f"  prices: {every}", "  warning: gpu-0009, gpu-0019: no price read, GPU hours there are not counted"]
