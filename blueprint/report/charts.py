"""The report's charts, drawn by matplotlib as SVG with live text (``svg.fonttype: none``), so the figures can be
read, searched and compared in the page: the cost by plane and by team (the cost engine's report, as ``blueprint
cost`` prints it), goodput against the checkpoint interval (the goodput model of ``blueprint sizing``), and each
Capacity Block's window with the operator's steps (the preview's plan).

Only matplotlib's object API is used (``Figure``, no pyplot): no global state, no display backend.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from blueprint.cost.lines import CostReport
from blueprint.cost.render import amount_text, format_usd
from blueprint.preview.platform import PLANE_ORDER, PLANE_TITLES

DESIRED = "#3b73b9"
AT_MAX = "#a9c4e8"
ONE_TIME = "#b7791f"
WARN = "#b00020"
MUTED = "#5f6b7a"


@contextmanager
def _style(salt: str) -> Iterator[None]:
    """Text as SVG text (readable and searchable), never as mathematics (dollar amounts hold "$"), ids salted per
    chart (several SVGs share one page), no date."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "text.parse_math": False,
                                "font.family": "sans-serif", "font.size": 9, "axes.spines.top": False,
                                "axes.spines.right": False,
                                "axes.titlesize": 10, "axes.titleweight": "bold", "axes.titlelocation": "left"}):
        yield


def _svg(fig: Any) -> str:
    """The figure as an ``<svg>`` element (no XML declaration or doctype), its clip-path ids stable."""
    import matplotlib

    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = out.getvalue()
    return stable_clip_ids(text[text.index("<svg"):], str(matplotlib.rcParams["svg.hashsalt"]))


_CLIP_ID = re.compile(r'<clipPath id="(p[0-9a-f]{10})"')


def stable_clip_ids(svg: str, salt: str) -> str:
    """Clip paths renamed by their order in the chart: matplotlib names each by a hash of its rectangle's floats, whose
    last bits can differ from one process to the next (a report then differed in nothing a reader sees)."""
    prefix = "c" + hashlib.sha256(salt.encode()).hexdigest()[:8]
    names = {old: f"{prefix}-{i}" for i, old in enumerate(dict.fromkeys(_CLIP_ID.findall(svg)))}
    return re.sub(r"\bp[0-9a-f]{10}\b", lambda m: names.get(m.group(0), m.group(0)), svg)


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


# --- cost -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One row of a cost chart: monthly at desired and at max size, one-time, and what is missing from it."""

    name: str
    desired: float
    at_max: float
    one_time: float = 0.0
    stale_desired: float = 0.0  # the part of ``desired`` priced at a stale price
    unpriced: tuple[str, ...] = ()  # price keys with no figure (their lines are not in the bar)
    not_estimated: int = 0  # usage-priced resources without a usage estimate


@dataclass(frozen=True)
class CostFigures:
    """The figures the cost charts draw, read from one :class:`CostReport` (the cost engine's, as ``blueprint cost``
    prints it): the page embeds them as data attributes and tables beside the chart."""

    total_monthly_usd: float
    total_monthly_usd_at_max: float
    total_one_time_usd: float
    planes: tuple[Bar, ...]
    teams: tuple[Bar, ...]
    one_time: tuple[tuple[str, float, bool], ...]  # (resource, one-time USD, stale price)
    unpriced: tuple[str, ...]
    stale: tuple[str, ...]
    usage_not_priced: int
    lower_bound: bool
    headline: str = field(default="")


def cost_figures(report: CostReport, plane_of: Mapping[str, str]) -> CostFigures:
    """The chart's figures: per plane and per team at desired and at max size, one-time charges apart;
    ``plane_of`` gives the plane of a resource the report lists only as not estimated (the graph's)."""
    order = {p: i for i, p in enumerate(PLANE_ORDER)}
    not_estimated: dict[str, int] = {}
    for urn, _ in report.usage_not_priced:
        plane = plane_of.get(urn, "stack")
        not_estimated[plane] = not_estimated.get(plane, 0) + 1
    planes = []
    for plane in sorted({r.plane for r in report.resources} | set(not_estimated),
                        key=lambda p: (order.get(p, len(order)), p)):
        members = [r for r in report.resources if r.plane == plane]
        planes.append(Bar(
            name=plane, desired=sum(r.monthly_usd for r in members),
            at_max=sum(r.monthly_usd_at_max for r in members), one_time=sum(r.one_time_usd for r in members),
            stale_desired=sum(line.monthly_usd or 0.0 for r in members for line in r.components if line.stale),
            unpriced=tuple(sorted({line.price_key for r in members for line in (*r.components, *r.components_at_max)
                                   if line.unit_price_usd is None})),
            not_estimated=not_estimated.get(plane, 0)))
    desired, at_max, once = report.by_team(), report.by_team(at_max=True), report.by_team(one_time=True)
    teams = tuple(Bar(team, desired.get(team, 0.0), at_max.get(team, 0.0), once.get(team, 0.0))
                  for team in sorted(desired.keys() | at_max.keys() | once.keys()))
    one_time = tuple((r.name, r.one_time_usd, any(line.stale for line in r.components if line.one_time))
                     for r in report.resources if r.one_time_usd)
    headline = (f"{amount_text(report, report.total_monthly_usd)} a month at desired size, "
                f"{amount_text(report, report.total_monthly_usd_at_max)} at max size")
    return CostFigures(report.total_monthly_usd, report.total_monthly_usd_at_max, report.total_one_time_usd,
                       tuple(planes), teams, one_time, tuple(report.unpriced), tuple(report.stale_prices),
                       len(report.usage_not_priced), bool(report.unpriced or report.usage_not_priced), headline)


def _bars(ax: Any, bars: Sequence[Bar], title: str, label: Any) -> None:
    """Paired horizontal bars (desired, at max) with their amounts and what they leave out, written on them."""
    import numpy as np

    y = np.arange(len(bars))
    desired = [b.desired for b in bars]
    at_max = [b.at_max for b in bars]
    ax.barh(y - 0.18, desired, height=0.34, color=DESIRED, label="a month at desired size")
    ax.barh(y + 0.18, at_max, height=0.34, color=AT_MAX, label="a month at max size")
    stale = [b.stale_desired for b in bars]
    if any(stale):
        ax.barh(y - 0.18, stale, height=0.34, color="none", edgecolor=WARN, hatch="////", linewidth=0,
                label="stale price (may have changed)")
    top = max([*desired, *at_max, 1.0])
    ax.set_xlim(0, top * 1.9)
    for i, b in enumerate(bars):
        bound = "at least " if b.unpriced or b.not_estimated else ""
        ax.text(b.desired + top * 0.01, i - 0.18, f"{bound}{format_usd(b.desired)}", va="center", fontsize=8)
        ax.text(b.at_max + top * 0.01, i + 0.18, f"{bound}{format_usd(b.at_max)} at max", va="center", fontsize=8,
                color=MUTED)
        notes = []
        if b.unpriced:
            notes.append(f"no price: {', '.join(b.unpriced)}")
        if b.not_estimated:
            notes.append(f"{b.not_estimated} usage-priced resource(s) not estimated")
        if b.stale_desired:
            notes.append(f"stale: {format_usd(b.stale_desired)}")
        if notes:
            ax.text(max(b.desired, b.at_max) + top * 0.42, i, "; ".join(notes), va="center", fontsize=7,
                    color=WARN, wrap=True)
    ax.set_yticks(y, [label(b.name) for b in bars])
    ax.invert_yaxis()
    ax.set_title(title)
    ax.xaxis.set_major_formatter(lambda value, _: f"${value:,.0f}")
    ax.legend(loc="lower right", fontsize=7, frameon=False)


def cost_chart(figures: CostFigures, stack: str) -> str:
    """The cost by plane and by team (desired and max size), with the one-time charges apart, as SVG."""
    rows = [len(figures.planes), max(len(figures.teams), 1)] + ([len(figures.one_time)] if figures.one_time else [])
    with _style(f"cost-{stack}"):
        fig = _figure(9.5, 1.4 + 0.55 * sum(rows) + 0.6 * len(rows))
        axes = fig.subplots(len(rows), 1, gridspec_kw={"height_ratios": [r + 1.2 for r in rows]})
        fig.suptitle(f"{stack}: {figures.headline}" + (
            f"; plus {format_usd(figures.total_one_time_usd)} one-time" if figures.total_one_time_usd else ""),
            fontsize=10, fontweight="bold", x=0.01, ha="left")
        _bars(axes[0], figures.planes, "monthly cost by plane", lambda p: PLANE_TITLES.get(p, p))
        if figures.teams:
            _bars(axes[1], figures.teams, "monthly cost by team (GPU groups split by nominal quota share)",
                  lambda t: t)
        else:
            axes[1].set_axis_off()
            axes[1].text(0, 0.5, "no team", color=MUTED)
        if figures.one_time:
            ax = axes[2]
            names = [f"{name} (one-time)" for name, _, _ in figures.one_time]
            values = [usd for _, usd, _ in figures.one_time]
            ax.barh(range(len(values)), values, height=0.5, color=ONE_TIME, label="prepaid once, not monthly")
            for i, (_, usd, stale) in enumerate(figures.one_time):
                ax.text(usd * 1.01, i, format_usd(usd) + ("  stale price" if stale else ""), va="center",
                        fontsize=8, color=WARN if stale else "black")
            ax.set_yticks(range(len(values)), names)
            ax.set_xlim(0, max(values) * 1.6)
            ax.invert_yaxis()
            ax.set_title("one-time charges: Capacity Blocks, prepaid for their window (not in the monthly totals)")
            ax.xaxis.set_major_formatter(lambda value, _: f"${value:,.0f}")
        return _svg(fig)


# --- goodput --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoodputCurve:
    """Goodput against the checkpoint interval for one write configuration."""

    label: str
    delta_s: float
    restart_s: float
    mtbf_s: float
    interval_s: float
    goodput: float


def goodput_at(interval_s: float, curve: GoodputCurve) -> float:
    """Daly's complete model at a given compute time between checkpoints (the sizing model's function)."""
    from components.sizing import wall_time_ratio

    ratio = wall_time_ratio(interval_s, curve.delta_s, curve.restart_s, curve.mtbf_s)
    return 0.0 if math.isinf(ratio) else 1.0 / ratio


def goodput_chart(curves: Sequence[GoodputCurve], young_s: float, daly_s: float, target: float | None,
                  stack: str) -> str:
    """Goodput (%) against the interval (hours, log scale) for the stack's path (the first curve) and the storage
    options that reach the target, with Young's and Daly's optima and the chosen interval marked."""
    import numpy as np

    chosen = curves[0]
    with _style(f"goodput-{stack}"):
        fig = _figure(9.5, 5.4)
        ax = fig.subplots()
        centre = chosen.interval_s
        xs = np.logspace(math.log10(centre / 10), math.log10(centre * 10), 400)
        for i, curve in enumerate(curves):
            ys = [100 * goodput_at(float(x), curve) for x in xs]
            if i == 0:
                ax.plot(xs / 3600, ys, color=DESIRED, linewidth=2.2, label=f"{curve.label} (today)")
            else:
                ax.plot(xs / 3600, ys, linewidth=1, alpha=0.8, label=curve.label)
                ax.plot(curve.interval_s / 3600, 100 * curve.goodput, "o", markersize=4, color="#444")
        ax.axvline(young_s / 3600, color="#6b46c1", linestyle=":", linewidth=1.4,
                   label=f"Young's optimum {young_s / 3600:.2f} h")
        ax.axvline(daly_s / 3600, color="#2f855a", linestyle="--", linewidth=1.2,
                   label=f"Daly's optimum {daly_s / 3600:.2f} h")
        ax.plot(chosen.interval_s / 3600, 100 * chosen.goodput, "D", color=WARN, markersize=7, zorder=5,
                label=f"chosen: every {chosen.interval_s / 3600:.2f} h, goodput {chosen.goodput:.2%}")
        ax.annotate(f"chosen: every {chosen.interval_s / 3600:.2f} h -> {chosen.goodput:.2%}",
                    (chosen.interval_s / 3600, 100 * chosen.goodput), textcoords="offset points", xytext=(12, 12),
                    fontsize=8, color=WARN)
        if target is not None:
            ax.axhline(100 * target, color=MUTED, linestyle="-.", linewidth=1, label=f"target {target:.1%}")
        ax.set_xscale("log")
        # Plain hours on the log axis: its default ticks are mathematics ("$10^{0}$"), which text.parse_math off
        # (dollar amounts elsewhere) prints as raw TeX.
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} h"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        best = max(100 * c.goodput for c in curves)
        floor = min([100 * c.goodput for c in curves] + ([100 * target] if target is not None else []))
        span = max(best - floor, 0.5)
        ax.set_ylim(max(0.0, floor - 1.5 * span), min(100.0, best + 0.6 * span))
        ax.set_xlabel("compute time between checkpoints (hours, log scale)")
        ax.set_ylabel("goodput (% of paid GPU time kept as work)")
        ax.set_title(f"{stack}: goodput against the checkpoint interval")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False, ncol=2)
        return _svg(fig)


# --- Capacity Block timeline ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    """A moment on the timeline."""

    at: datetime
    label: str
    color: str


def timeline_chart(title: str, start: datetime, end: datetime, marks: Sequence[Mark], now: datetime,
                   stack: str) -> str:
    """The window as a bar with its moments (the scale-up, the scale-down deadlines, the end), and the last two hours
    enlarged where the deadlines crowd; where "now" stands is written in the title."""
    import matplotlib.dates as mdates

    num = cast(Callable[[datetime], float], mdates.date2num)
    with _style(f"timeline-{stack}-{start:%Y%m%d%H%M}"):
        fig = _figure(9.5, 3.2)
        fig.suptitle(title, fontsize=9, fontweight="bold", x=0.01, ha="left")
        full, zoom = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1.5]})
        margin = max((end - start) / 20, timedelta(hours=6))
        last = end - timedelta(hours=2)
        panels = ((full, start - margin, end + margin, [m for m in marks if m.at < last]),
                  (zoom, last, end + timedelta(minutes=20), [m for m in marks if m.at >= last]))
        for ax, lo, hi, shown in panels:
            ax.barh(0, num(end) - num(start), left=num(start), height=0.3,
                    color="#fff1c7", edgecolor="#b7791f", linewidth=1.2)
            for i, m in enumerate(sorted(shown, key=lambda m: m.at)):
                ax.axvline(num(m.at), color=m.color, linewidth=1.3)
                ax.text(num(m.at), 0.3 + 0.17 * i, f" {m.label} ", fontsize=7, color=m.color,
                        ha="left" if ax is full else "right")
            if lo <= now <= hi:
                ax.axvline(num(now), color="black", linestyle="--", linewidth=1)
                ax.text(num(now), -0.38, " now", fontsize=7)
            ax.set_xlim(num(lo), num(hi))
            ax.set_ylim(-0.5, 0.95)
            ax.set_yticks([])
            ax.spines["left"].set_visible(False)
        full.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=8))  # type: ignore[no-untyped-call]
        full.xaxis.set_major_formatter(mdates.DateFormatter("%b %d"))  # type: ignore[no-untyped-call]
        full.set_title("the window (UTC)", fontsize=8, fontweight="normal")
        zoom.xaxis.set_major_locator(mdates.MinuteLocator(byminute=[0, 30]))  # type: ignore[no-untyped-call]
        zoom.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
        zoom.set_title("its last two hours (UTC)", fontsize=8, fontweight="normal")
        return _svg(fig)
