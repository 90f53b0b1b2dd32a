"""``blueprint report``: one self-contained HTML page of a stack: the cluster diagram, the cost, the goodput, the
Capacity Block timeline and the policy verdict, each finding linked to its place in the diagram.

Self-contained means it opens offline and fetches nothing: no script at all, styles inline, system fonts, every
picture an inline SVG. A Content-Security-Policy that allows nothing to be loaded makes any slip visible (the browser
refuses it and says so in its console, which the report's browser test reads).

Every figure comes from the code of the command that prints it: the cost from the cost engine (``blueprint cost``),
the goodput from the sizing model (``blueprint sizing``), the Capacity Block plan and its steps from the preview.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from blueprint.cost.lines import CostReport
from blueprint.cost.render import amount_text, bounded_items, format_usd, unpriced_line_items
from blueprint.graph.model import ResourceGraph
from blueprint.policy.runner import PolicyReport, verdict_line
from blueprint.preview.platform import PLANE_TITLES
from blueprint.report.charts import (
    GoodputCurve,
    cost_chart,
    cost_figures,
    goodput_chart,
)
from blueprint.report.cloud import cloud_report
from blueprint.report.diagram import build_diagram, render_svg
from blueprint.report.model import Diagram
from blueprint.report.model import escape as _e

if TYPE_CHECKING:  # the spec's models load with a stack, not for a saved graph
    from components.spec import ClusterSpec

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
       color: #1f2933; background: #fff; line-height: 1.45; }
header { padding: 18px 28px 10px; border-bottom: 1px solid #d9dee5; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 2px 0; color: #52606d; }
nav { padding: 6px 28px; background: #f5f7fa; border-bottom: 1px solid #d9dee5; font-size: 14px; }
nav a { margin-right: 16px; color: #1d4e89; text-decoration: none; }
main { padding: 8px 28px 40px; }
section { margin: 26px 0; }
h2 { font-size: 18px; border-bottom: 1px solid #e4e7eb; padding-bottom: 4px; }
figure { margin: 10px 0; overflow-x: auto; }
figure svg { max-width: 100%; height: auto; }
figure.diagram svg { width: 100%; }
figcaption { color: #52606d; font-size: 13px; margin-top: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #d9dee5; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.glance { display: flex; flex-wrap: wrap; gap: 12px; margin: 14px 0; }
.glance div { border: 1px solid #d9dee5; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.glance b { display: block; font-size: 18px; }
.pass { color: #1e7b34; } .fail { color: #b00020; } .warn { color: #b00020; }
.muted { color: #52606d; }
ol.steps li, ul.notes li { margin: 3px 0; }
code { background: #f5f7fa; padding: 0 3px; border-radius: 3px; }
pre { background: #f5f7fa; padding: 10px; overflow-x: auto; font-size: 12px; }
g.node:target path, g.node:target polygon { stroke: #b00020; stroke-width: 4px; }
g.cluster:target > path, g.cluster:target > polygon { stroke: #b00020; stroke-width: 3px; }
"""


@dataclass(frozen=True)
class ReportInputs:
    """What one report is made from: the graph, the stack's spec (None for a graph file), its priced cost, the
    policy verdict, the moment the Capacity Block windows are compared with, and the sizing text when the stack
    gives the goodput model's inputs."""

    graph: ResourceGraph
    spec: ClusterSpec | None
    source: str
    cost: CostReport
    policy: PolicyReport
    now: datetime


def _usd_attr(value: float) -> str:
    """A dollar figure for a data attribute: cents, no separators (what a test parses)."""
    return f"{value:.2f}"


# --- sections -------------------------------------------------------------------------------------------------------


def _diagram_section(diagram: Diagram, title: str) -> str:
    svg = render_svg(diagram, title)
    legend = ("reserved capacity (double border, amber) is paid whether nodes run or not; blue: GPU node groups; "
              "grey: CPU node groups; a red border marks a policy finding (the verdict below links to it)")
    return (f'<section id="diagram"><h2>The cluster</h2><figure class="diagram">{svg}'
            f"<figcaption>Drawn from the graph (what the program would create), laid out by Graphviz: {_e(legend)}."
            "</figcaption></figure></section>")


def _cost_section(inputs: ReportInputs) -> str:
    plane_of = {r.urn: inputs.graph.plane_of(r) for r in inputs.graph.resources}
    figures = cost_figures(inputs.cost, plane_of)
    stack = inputs.graph.stack or "graph"
    svg = cost_chart(figures, stack)
    rows = []
    for bar in figures.planes:
        missing = "; ".join(
            ([f"no price: {', '.join(bar.unpriced)}"] if bar.unpriced else [])
            + ([f"{bar.not_estimated} usage-priced resource(s) not estimated"] if bar.not_estimated else [])
            + ([f"stale: {format_usd(bar.stale_desired)}"] if bar.stale_desired else []))
        rows.append(f'<tr data-plane="{_e(bar.name)}" data-monthly-usd="{_usd_attr(bar.desired)}" '
                    f'data-monthly-usd-at-max="{_usd_attr(bar.at_max)}" data-one-time-usd="{_usd_attr(bar.one_time)}">'
                    f"<td>{_e(PLANE_TITLES.get(bar.name, bar.name))}</td><td class=num>{format_usd(bar.desired)}</td>"
                    f"<td class=num>{format_usd(bar.at_max)}</td>"
                    f"<td class=num>{format_usd(bar.one_time) if bar.one_time else '-'}</td>"
                    f'<td class="warn">{_e(missing)}</td></tr>')
    teams = [f'<tr data-team="{_e(b.name)}" data-monthly-usd="{_usd_attr(b.desired)}" '
             f'data-monthly-usd-at-max="{_usd_attr(b.at_max)}" data-one-time-usd="{_usd_attr(b.one_time)}">'
             f"<td>{_e(b.name)}</td><td class=num>{format_usd(b.desired)}</td><td class=num>{format_usd(b.at_max)}</td>"
             f"<td class=num>{format_usd(b.one_time) if b.one_time else '-'}</td></tr>" for b in figures.teams]
    notes = []
    if figures.unpriced:
        notes.append(f"Not in the totals (no price read): {', '.join(figures.unpriced)}; every line: "
                     f"{'; '.join(unpriced_line_items(inputs.cost))}.")
    bounded = bounded_items(inputs.cost)
    if bounded:
        notes.append(f"Priced at an upper bound (the price was not read; the real figure is at most this): "
                     f"{'; '.join(bounded)}.")
    if figures.stale:
        notes.append(f"Stale prices (may have changed since they were read): {', '.join(figures.stale)}.")
    if figures.usage_not_priced:
        notes.append(f"Usage-dependent, not priced: {figures.usage_not_priced} resource(s) without a usage estimate.")
    notes.extend(inputs.cost.notes)
    return (
        f'<section id="cost" data-total-monthly-usd="{_usd_attr(figures.total_monthly_usd)}" '
        f'data-total-monthly-usd-at-max="{_usd_attr(figures.total_monthly_usd_at_max)}" '
        f'data-total-one-time-usd="{_usd_attr(figures.total_one_time_usd)}" '
        f'data-lower-bound="{str(figures.lower_bound).lower()}" '
        f'data-unpriced="{_e(json.dumps(list(figures.unpriced)))}" data-stale="{_e(json.dumps(list(figures.stale)))}">'
        f"<h2>Cost</h2><p>Monthly: <b>{_e(figures.headline)}</b>"
        + (f"; plus <b>{format_usd(figures.total_one_time_usd)}</b> prepaid once (Capacity Blocks)"
           if figures.total_one_time_usd else "")
        + f" ({_e(inputs.cost.currency)}, the cost engine's figures: <code>blueprint cost {_e(stack)}</code> lists "
          "every line).</p>"
        f'<figure class="chart">{svg}<figcaption>Hatched: priced at a stale price. Red notes: what the bar leaves '
        "out.</figcaption></figure>"
        "<table><thead><tr><th>plane</th><th class=num>a month at desired size</th><th class=num>at max size</th>"
        f"<th class=num>one-time</th><th>not in the figure</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<table><thead><tr><th>team</th><th class=num>a month at desired size</th><th class=num>at max size</th>"
        f"<th class=num>one-time</th></tr></thead><tbody>{''.join(teams)}</tbody></table>"
        + (f'<ul class="notes">{"".join(f"<li>{_e(n)}</li>" for n in notes)}</ul>' if notes else "")
        + "</section>")


def goodput_parts(inputs: ReportInputs) -> tuple[str, str | None]:
    """The goodput section's body and the ``blueprint sizing`` text it shows (None when the stack cannot be
    modelled: the body says why)."""
    from blueprint.cost.prices import prices_for
    from blueprint.sizing.inference import serving_resources, with_served
    from blueprint.sizing.report import gpu_compute_usd, price_options, render_sizing
    from components.sizing import SizingError, daly_interval, goodput_model
    from components.sizing.plan import option_plan

    spec = inputs.spec
    if spec is None:
        return ("<p class=muted>A graph carries no workload: run <code>blueprint report</code> on the stack for the "
                "goodput model.</p>"), None
    try:
        model = goodput_model(spec)
    except SizingError as err:
        return f"<p class=muted>Not modelled: {_e(err)} (<code>blueprint sizing</code> says the same).</p>", None
    options = price_options(model, prices_for(spec.cloud))
    stack = inputs.graph.stack or "graph"
    training = gpu_compute_usd(inputs.cost, serving_resources(spec))
    text = with_served(render_sizing(model, training, options, stack), spec, inputs.cost)
    plan = model.plan
    if not model.progressing or plan.interval_s == float("inf"):
        return f"<p class=warn>No useful interval to draw: see the sizing below.</p>{_sizing_block(text)}", text
    today = model.filesystem.describe() if model.filesystem is not None else model.path
    curves = [GoodputCurve(f"{model.path} on {today}", plan.delta_s, plan.restart_s + plan.lag_s, plan.mtbf_s,
                           plan.interval_s, plan.goodput)]
    rows = []
    for priced in options:
        option_curve = option_plan(model, spec, priced.option)
        if option_curve is not None and priced.option.describe() != today:
            curves.append(GoodputCurve(priced.option.describe(), option_curve.delta_s,
                                       option_curve.restart_s + option_curve.lag_s, option_curve.mtbf_s,
                                       option_curve.interval_s, option_curve.goodput))
        price = format_usd(priced.monthly_usd) if priced.monthly_usd is not None else "no price read"
        rows.append(f'<tr data-goodput="{priced.option.goodput:.6f}"><td>{_e(priced.option.describe())}'
                    f"{' (today)' if priced.option.describe() == today else ''}</td>"
                    f"<td class=num>{priced.option.goodput:.2%}</td><td class=num>{_e(price)}</td></tr>")
    svg = goodput_chart(curves, plan.young_interval_s, daly_interval(plan.delta_s, plan.mtbf_s), model.target, stack)
    target = f"{model.target:.1%}" if model.target is not None else "none"
    table = ("<table><thead><tr><th>storage that reaches the target</th><th class=num>goodput</th>"
             f"<th class=num>a month</th></tr></thead><tbody>{''.join(rows)}</tbody></table>" if rows else
             "<p class=muted>No storage option is searched for this path (or none reaches the target).</p>")
    body = (f'<div data-goodput="{plan.goodput:.6f}" data-interval-s="{plan.interval_s:.1f}" '
            f'data-young-s="{plan.young_interval_s:.1f}" data-daly-s="{daly_interval(plan.delta_s, plan.mtbf_s):.1f}">'
            f"<p>Goodput {plan.goodput:.2%} against a target of {target}, checkpointing every "
            f"{plan.interval_s / 3600:.2f} h of compute ({_e(model.path)} path, a fleet MTBF of "
            f"{model.mtbf_hours:,.1f} h).</p>"
            f'<figure class="chart">{svg}<figcaption>Daly\'s complete model (the sizing model): each curve is one '
            "storage configuration; the diamond is the interval the teams' jobs read (checkpoint-policy ConfigMap)."
            f"</figcaption></figure>{table}</div>{_sizing_block(text)}")
    return body, text


def _sizing_block(text: str) -> str:
    return f"<details><summary><code>blueprint sizing</code></summary><pre>{_e(text)}</pre></details>"


def _goodput_section(inputs: ReportInputs) -> str:
    body, _ = goodput_parts(inputs)
    return f'<section id="goodput"><h2>Goodput and checkpoints</h2>{body}</section>'


def _timeline_section(inputs: ReportInputs) -> str:
    spec = inputs.spec
    if spec is None:
        parts = ["<p class=muted>The Capacity Block plan is read from the stack file: run <code>blueprint "
                 "report</code> on the stack.</p>"]
    else:
        parts = cloud_report(spec.cloud).timeline(inputs.graph, spec, inputs.now)
    if not parts:
        parts.append("<p class=muted>No Capacity Block in this stack.</p>")
    return f'<section id="timeline"><h2>Reserved capacity and its window</h2>{"".join(parts)}</section>'


def _policy_section(inputs: ReportInputs, diagram: Diagram) -> str:
    report = inputs.policy
    state = "pass" if report.passed else "fail"
    rows = []
    for i, v in enumerate(report.violations):
        anchor = diagram.anchor_of(v.urn) if v.urn else "box-control-plane"
        where = next((n.title for n in diagram.nodes if n.id == anchor), anchor.removeprefix("box-"))
        name = v.urn.rsplit("::", 1)[-1] if v.urn else "(stack)"
        text = v.message.split("\n", 1)[1] if "\n" in v.message else v.message
        rows.append(f'<tr id="finding-{i}" class="finding" data-policy="{_e(v.policy)}" data-urn="{_e(v.urn)}">'
                    f"<td>{_e(v.enforcement)}</td><td>{_e(v.severity)}</td><td><code>{_e(v.policy)}</code></td>"
                    f'<td><a href="#{_e(anchor)}">{_e(name)}</a> <span class=muted>({_e(where)})</span></td>'
                    f"<td>{_e(text)}" + (f"<br><span class=muted>fix: {_e(v.fix)}</span>" if v.fix else "")
                    + "</td></tr>")
    table = ("<table><thead><tr><th>enforcement</th><th>severity</th><th>policy</th><th>resource (in the diagram)"
             f"</th><th>finding</th></tr></thead><tbody>{''.join(rows)}</tbody></table>" if rows
             else "<p>No finding: every policy of the pack passes on this stack.</p>")
    return (f'<section id="policy" data-passed="{str(report.passed).lower()}" '
            f'data-violations="{len(report.violations)}"><h2>Policy verdict</h2>'
            f'<p class="{state}"><b>{_e(verdict_line(report))}</b></p>{table}</section>')


def render_report(inputs: ReportInputs) -> str:
    """The whole page."""
    diagram = build_diagram(inputs.graph, inputs.spec)
    for v in inputs.policy.violations:
        anchor = diagram.anchor_of(v.urn) if v.urn else "box-control-plane"
        for node in diagram.nodes:
            if node.id == anchor:
                node.findings.append(v.policy)
    stack = inputs.graph.stack or "graph"
    where = ""
    if inputs.spec is not None:
        spec = inputs.spec
        where = f"cluster {spec.name}, {spec.environment}, {spec.cloud} {spec.region}"
    gpus_desired = sum(f.gpus_per_node * f.nodes[0] for f in inputs.cost.resources if f.nodes)
    gpus_max = sum(f.gpus_per_node * f.nodes[1] for f in inputs.cost.resources if f.nodes)
    verdict = "PASS" if inputs.policy.passed else "FAIL"
    glance = (f'<div class="glance"><div>GPUs<b>{gpus_desired} desired / {gpus_max} max</b></div>'
              f"<div>a month at desired size<b>{amount_text(inputs.cost, inputs.cost.total_monthly_usd)}</b></div>"
              f"<div>at max size<b>{amount_text(inputs.cost, inputs.cost.total_monthly_usd_at_max)}</b></div>"
              + (f"<div>one-time<b>{format_usd(inputs.cost.total_one_time_usd)}</b></div>"
                 if inputs.cost.total_one_time_usd else "")
              + f'<div>policy<b class="{verdict.lower()}">{verdict}</b></div></div>')
    title = f"{stack}: {where}" if where else stack
    body = (_diagram_section(diagram, title) + _cost_section(inputs) + _goodput_section(inputs)
            + _timeline_section(inputs) + _policy_section(inputs, diagram))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(stack)}: cluster report</title><style>{STYLE}</style></head><body>"
        f'<header><h1>{_e(stack)}</h1><p>{_e(where)}</p><p class=muted>from {_e(inputs.source)}; Capacity Block '
        f"windows compared with {inputs.now:%Y-%m-%d %H:%M} UTC</p>{glance}</header>"
        '<nav><a href="#diagram">cluster</a><a href="#cost">cost</a><a href="#goodput">goodput</a>'
        '<a href="#timeline">reserved capacity</a><a href="#policy">policy verdict</a></nav>'
        f"<main>{body}</main></body></html>\n")
