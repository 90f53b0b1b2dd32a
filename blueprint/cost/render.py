"""The cost report as a table for people and as JSON for tools; stale and unknown prices are flagged in both."""

from __future__ import annotations

import json
from typing import Any

from blueprint.cost.lines import CostLine, CostReport


def format_usd(value: float | None) -> str:
    """Dollars with cents and thousands separators; "no price" for an unknown figure."""
    return "no price" if value is None else f"${value:,.2f}"


def _flag(line: CostLine) -> str:
    once = "  [one-time, prepaid]" if line.one_time else ""
    if line.unit_price_usd is None:
        return once + "  [no price: unconfirmed]"
    bound = f"  [upper bound: {line.bound}]" if line.bounded else ""
    return once + bound + ("  [stale price]" if line.stale else "")


def bounded_items(report: CostReport) -> list[str]:
    """Lines priced at an upper bound, as "<price key> (<resource>): <why>", once per resource and key."""
    seen: dict[tuple[str, str], str] = {}
    for res in report.resources:
        for c in (*res.components, *res.components_at_max):
            if c.bounded:
                seen.setdefault((res.name, c.price_key), c.bound)
    return [f"{key} ({name}): {why}" for (name, key), why in seen.items()]


def unpriced_line_items(report: CostReport) -> list[str]:
    """Every line without a price: "<resource>: <line>, <quantity> <unit> (<quantity at max> at max size) of
    <price key>"."""
    out = []
    for res, c, at_max in report.unpriced_lines():
        reach = f" ({at_max.quantity:,.6g} at max size)" if at_max is not None and at_max.quantity != c.quantity \
            else ""
        out.append(f"{res.name}: {c.name}, {c.quantity:,.6g} {c.unit}{reach} of {c.price_key}")
    return out


def unpriced_items(report: CostReport, limit: int = 3) -> list[str]:
    """What the totals leave out, biggest first: instance hours before storage, then by quantity (a line without a
    price has no dollar figure to rank by), as "<quantity> <unit> of <price key> (<resource>)"."""
    found = {(res.name, line.price_key): line for res in report.resources for line in res.components
             if line.unit_price_usd is None}
    ranked = sorted(found.items(), key=lambda kv: (kv[1].unit != "hour", -kv[1].quantity, kv[0]))
    return [f"{line.quantity:,.6g} {line.unit} of {key} ({name})" for (name, key), line in ranked[:limit]]


def amount_text(report: CostReport, value: float) -> str:
    """``$X``, or ``at least $X`` when a line of the stack has no price or a usage-priced resource no estimate."""
    return f"at least {format_usd(value)}" if report.lower_bound else format_usd(value)


def render_cost_table(report: CostReport) -> str:
    """Per plane, per resource, every line as quantity x unit price = monthly; then totals and caveats."""
    out = [f"cost of {report.stack or 'the graph'} ({report.region or 'region unknown'}), {report.currency} a month; "
           "Capacity Blocks apart, prepaid once for their window"]
    for plane in sorted({r.plane for r in report.resources}):
        members = [r for r in report.resources if r.plane == plane]
        plane_once = sum(r.one_time_usd for r in members)
        out.append(f"\n== {plane}: {format_usd(sum(r.monthly_usd for r in members))} a month"
                   + (f", plus {format_usd(plane_once)} one-time" if plane_once else ""))
        for res in members:
            team = f" (team {res.team})" if res.team else ""
            partial = "" if res.priced_fully else " (lower bound: some lines have no price)"
            once = f", plus {format_usd(res.one_time_usd)} one-time" if res.one_time_usd else ""
            out.append(f"  {res.type.split(':')[-1]}  {res.name}{team}: {format_usd(res.monthly_usd)} a month{once}"
                       f"{partial}")
            for line in res.components:
                price = "?" if line.unit_price_usd is None else f"${line.unit_price_usd}"
                out.append(f"    - {line.name}: {line.quantity:,.6g} {line.unit} x {price} = "
                           f"{format_usd(line.cost_usd)}{_flag(line)}")
            if res.note:
                out.append(f"      note: {res.note}")
    out.append(f"\ntotal: {amount_text(report, report.total_monthly_usd)} a month at desired size, "
               f"{amount_text(report, report.total_monthly_usd_at_max)} at max size")
    if report.total_one_time_usd:
        out.append(f"one-time: {format_usd(report.total_one_time_usd)} prepaid for Capacity Blocks (their windows "
                   "are in the lines above), not part of the monthly totals")
    teams = report.by_team()
    if teams:
        out.append("by team (GPU node groups split by nominal Kueue GPU quota share, not measured use; the rest "
                   "by the team billing tag): " + ", ".join(f"{t} {format_usd(v)}" for t, v in teams.items()))
    teams_once = {t: v for t, v in report.by_team(one_time=True).items() if v}
    if teams_once:
        out.append("one-time by team (same split): " + ", ".join(f"{t} {format_usd(v)}" for t, v in teams_once.items()))
    if report.unpriced:
        out.append("not in the total (no price read): " + ", ".join(report.unpriced))
        out.append("  the largest of them: " + "; ".join(unpriced_items(report)))
    if report.bounded:
        out.append("priced at an upper bound (the price was not read; the real figure is at most this): "
                   + "; ".join(bounded_items(report)))
    if report.stale_prices:
        out.append("stale prices (may have changed since they were read; refresh before relying on them): "
                   + ", ".join(report.stale_prices))
    if report.usage_not_priced:
        kinds = sorted({what for _, what in report.usage_not_priced})
        out.append(f"usage-dependent, not priced: {len(report.usage_not_priced)} resources ({'; '.join(kinds)})")
    out.extend(f"note: {n}" for n in report.notes)
    return "\n".join(out) + "\n"


def render_cost_summary(report: CostReport) -> str:
    """The preview's cost lines: totals, what is missing from them, and whether any price may be stale."""
    out = [f"cost: {amount_text(report, report.total_monthly_usd)} a month at desired size, "
           f"{amount_text(report, report.total_monthly_usd_at_max)} at max size ({report.currency}; `blueprint cost` "
           "lists the lines)"]
    if report.total_one_time_usd:
        out.append(f"  plus {format_usd(report.total_one_time_usd)} prepaid once for Capacity Blocks")
    if report.unpriced:
        items = unpriced_items(report, limit=10_000)
        out.append(f"  not in the total (no price read), the largest first: {'; '.join(items[:3])}"
                   + (f" (and {len(items) - 3} more)" if len(items) > 3 else ""))
    if report.bounded:
        out.append(f"  at an upper bound: {'; '.join(bounded_items(report))}")
    if report.stale_prices:
        out.append(f"  stale prices: {', '.join(report.stale_prices)}")
    if report.usage_not_priced:
        out.append(f"  usage-dependent, not priced: {len(report.usage_not_priced)} resources")
    out.extend(f"  {note}" for note in report.notes if note.startswith("usage"))
    return "\n".join(out) + "\n"


def _component(line: CostLine) -> dict[str, Any]:
    return {"name": line.name, "quantity": line.quantity, "unit": line.unit,
            "unit_price_usd": line.unit_price_usd, "cost_usd": line.cost_usd, "one_time": line.one_time,
            "monthly_usd": line.monthly_usd,
            "price_status": line.price_status, "price_key": line.price_key, "price_source": line.price_source,
            "price_as_of": line.price_as_of, "bound": line.bound}


def cost_document(report: CostReport) -> dict[str, Any]:
    """The JSON form: totals, resources with their components, and what was not priced or is stale."""
    return {
        "currency": report.currency,
        "stack": report.stack,
        "region": report.region,
        "total_monthly_usd": report.total_monthly_usd,
        "total_monthly_usd_at_max": report.total_monthly_usd_at_max,
        "total_one_time_usd": report.total_one_time_usd,
        "by_team_one_time_usd": report.by_team(one_time=True),
        "resources": [
            {"urn": r.urn, "type": r.type, "plane": r.plane, "team": r.team, "note": r.note,
             "team_shares": {t: share for t, share in r.team_shares},
             "monthly_usd": r.monthly_usd, "monthly_usd_at_max": r.monthly_usd_at_max,
             "one_time_usd": r.one_time_usd, "priced_fully": r.priced_fully,
             "components": [_component(c) for c in r.components],
             "components_at_max": [_component(c) for c in r.components_at_max]}
            for r in report.resources
        ],
        "by_team_monthly_usd": report.by_team(),
        "by_team_basis": "GPU node groups by nominal Kueue GPU quota share; other resources by their team tag",
        "unpriced": report.unpriced,
        "lower_bound": report.lower_bound,
        "unpriced_items": unpriced_items(report, limit=50),
        "unpriced_lines": unpriced_line_items(report),
        "bounded": bounded_items(report),
        "stale_prices": report.stale_prices,
        "usage_not_priced": [{"urn": urn, "depends_on": what} for urn, what in report.usage_not_priced],
        "notes": list(report.notes),
    }


def render_cost_json(report: CostReport, unit_cost: dict[str, Any] | None) -> str:
    """The JSON document, with the unit-cost section (or why it is missing) under ``unit_cost``."""
    return json.dumps({**cost_document(report), "unit_cost": unit_cost}, indent=2, sort_keys=True) + "\n"
