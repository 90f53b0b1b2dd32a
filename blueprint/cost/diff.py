"""``blueprint cost diff``: what a change does to the cost, in the shape PR reviewers know.

Resources are matched by URN. Every figure is given at desired size (what runs now) and at max size (what the node
groups may reach: the exposure a ``maxSize`` change moves), with one-time charges (Capacity Blocks) apart. A
percentage is shown only against a meaningful base: from nothing, or from a base under a tenth of the new figure,
the change is "new" (a +9,327 % says nothing). Several stacks give one comment: a summary table first (every stack,
unchanged ones in one row), then a folded section per changed stack with each changed resource's lines
(quantity x unit price), as Infracost's comment does. The JSON of one stack carries everything the comment shows,
so a workflow can diff stacks in parallel jobs and combine their JSON into one comment (``--combine``).

From one engine event log (:func:`diff_event_log`) the two sides are the states before and after the update the
preview plans: a deleted resource's cost goes, a created one's comes, and a replaced one keeps its cost (it is
deleted and created again) but is listed as ``replaced`` even when its cost does not change, since what it holds
does not carry over.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from blueprint.changes.render import DayTwo, day_two
from blueprint.changes.render import markdown as day_two_markdown
from blueprint.cost.engine import price_graph
from blueprint.cost.lines import CostLine, CostReport, Usage
from blueprint.cost.mermaid import render_mermaid
from blueprint.cost.prices import Price
from blueprint.cost.render import bounded_items, format_usd, unpriced_line_items
from blueprint.files.markdown import html_name, md_code, md_name, md_text
from blueprint.graph.eventlog import EventLogPreview
from blueprint.graph.model import GraphResource, ResourceGraph

# A percentage needs a base of at least this share of the larger figure; below it the change is "new".
MEANINGFUL_BASE_SHARE = 0.1


@dataclass(frozen=True)
class LineChange:
    """One cost line of a changed resource, before and after (quantity x unit price)."""

    name: str
    unit: str
    price_key: str
    previous_quantity: float
    new_quantity: float
    unit_price_usd: float | None
    previous_usd: float | None
    new_usd: float | None
    at_max: bool
    one_time: bool
    bound: str = ""  # the unit price is an upper bound (CostLine.bound)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"name": self.name, "unit": self.unit, "price_key": self.price_key,
                "previous_quantity": self.previous_quantity, "new_quantity": self.new_quantity,
                "unit_price_usd": self.unit_price_usd, "previous_usd": self.previous_usd, "new_usd": self.new_usd,
                "at_max": self.at_max, "one_time": self.one_time, "bound": self.bound}


@dataclass(frozen=True)
class ResourceChange:
    """One resource whose cost changed: added, removed or changed."""

    urn: str
    name: str
    change: str
    previous_monthly_usd: float
    new_monthly_usd: float
    previous_one_time_usd: float = 0.0
    new_one_time_usd: float = 0.0
    priced_fully: bool = True  # False: a line without a price changed, so the difference is a lower bound
    previous_at_max_usd: float = 0.0
    new_at_max_usd: float = 0.0
    lines: tuple[LineChange, ...] = ()
    plane: str = ""
    autoscaled: bool | None = None  # node groups: whether the autoscaler manages it (ResourceCost.autoscaled)
    nodes: tuple[int, int] | None = None  # node groups: (desired, max) nodes on the new side
    # Lines without a price whose quantity rises / falls: (rises at desired size, falls at desired, rises at max,
    # falls at max); the figures leave them out.
    unpriced_moves: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass(frozen=True)
class GraphChange:
    """One resource the change adds, changes, replaces or removes, priced or not (what the comment's diagram
    draws, by plane)."""

    urn: str
    name: str
    type: str
    plane: str
    change: str  # added, changed, replaced, removed

    def to_dict(self) -> dict[str, str]:
        """The JSON form."""
        return {"urn": self.urn, "name": self.name, "type": self.type, "plane": self.plane, "change": self.change}


@dataclass(frozen=True)
class CostDiff:
    """Two cost reports of the same stack, compared."""

    stack: str
    previous: CostReport
    new: CostReport
    resources: tuple[ResourceChange, ...]
    notes: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()  # names of every resource the update replaces, priced or not (event logs)
    changes: tuple[GraphChange, ...] = ()  # every resource added, changed, replaced or removed (graph_changes)
    day_two: DayTwo = field(default_factory=DayTwo)  # node rolls, replacements, refused versions (two graphs)
    serving: tuple[str, ...] = ()  # the new revision's served models as `blueprint sizing` gives them

    @property
    def diff_monthly_usd(self) -> float:
        return self.new.total_monthly_usd - self.previous.total_monthly_usd

    @property
    def diff_monthly_usd_at_max(self) -> float:
        return self.new.total_monthly_usd_at_max - self.previous.total_monthly_usd_at_max

    @property
    def diff_one_time_usd(self) -> float:
        return self.new.total_one_time_usd - self.previous.total_one_time_usd

    @property
    def unpriced_changes(self) -> list[str]:
        """Changed resources with a line that has no price: their difference is not in the figures."""
        return [r.urn for r in self.resources if not r.priced_fully]

    @property
    def stale_prices(self) -> list[str]:
        """Stale price keys used on either side."""
        return sorted(set(self.previous.stale_prices) | set(self.new.stale_prices))

    @property
    def unpriced(self) -> list[str]:
        """Price keys with no figure needed on either side."""
        return sorted(set(self.previous.unpriced) | set(self.new.unpriced))

    @property
    def diff_percent(self) -> float | None:
        """The change at desired size as a percentage of a meaningful base; None otherwise."""
        return percent(self.previous.total_monthly_usd, self.new.total_monthly_usd)


def percent(previous: float, new: float) -> float | None:
    """``100 * (new - previous) / previous`` when the base means something: not zero, and at least a tenth of the
    larger figure; None otherwise (shown as "new")."""
    if previous <= 0 or previous < MEANINGFUL_BASE_SHARE * max(previous, new):
        return None
    return 100.0 * (new - previous) / previous


def _pair_lines(old: tuple[CostLine, ...], new: tuple[CostLine, ...], at_max: bool) -> list[LineChange]:
    """Lines matched by price key, in order; only those whose quantity or cost differs."""
    out: list[LineChange] = []
    pending = list(old)
    for line in new:
        match = next((o for o in pending if o.price_key == line.price_key), None)
        if match is not None:
            pending.remove(match)
        if match is not None and match.quantity == line.quantity and match.cost_usd == line.cost_usd:
            continue
        out.append(LineChange(line.name, line.unit, line.price_key, match.quantity if match else 0.0, line.quantity,
                              line.unit_price_usd, match.cost_usd if match else 0.0, line.cost_usd, at_max,
                              line.one_time, line.bound))
    out += [LineChange(o.name, o.unit, o.price_key, o.quantity, 0.0, o.unit_price_usd, o.cost_usd, 0.0, at_max,
                       o.one_time, o.bound) for o in pending]
    return out


def _moves(lines: Sequence[LineChange]) -> tuple[int, int]:
    """(lines without a price whose quantity rises, those whose quantity falls)."""
    unpriced = [x for x in lines if x.unit_price_usd is None]
    return (sum(1 for x in unpriced if x.new_quantity > x.previous_quantity),
            sum(1 for x in unpriced if x.new_quantity < x.previous_quantity))


def diff_reports(previous: CostReport, new: CostReport, notes: Sequence[str] = (),
                 ops: Mapping[str, str] | None = None, renamed: Mapping[str, str] | None = None) -> CostDiff:
    """Every resource whose cost differs at desired or at max size (or whose lines differ), sorted by URN; with
    ``ops`` (URN -> the step a preview plans, :attr:`EventLogPreview.ops`) also every priced resource that is
    replaced, as ``replaced``. ``renamed`` maps a previous URN to its new one (an alias), so a renamed resource is
    matched, not removed and added."""
    ops = ops or {}
    renamed = renamed or {}
    before = {renamed.get(r.urn, r.urn): r for r in previous.resources}
    after = {r.urn: r for r in new.resources}
    changes: list[ResourceChange] = []
    for urn in sorted(before.keys() | after.keys()):
        old, cur = before.get(urn), after.get(urn)
        replaced = old is not None and cur is not None and ops.get(urn) == "replace"
        kind = "added" if old is None else "removed" if cur is None else "replaced" if replaced else "changed"
        if old is not None and cur is not None and not replaced and old.signature() == cur.signature() \
                and old.monthly_usd == cur.monthly_usd and old.monthly_usd_at_max == cur.monthly_usd_at_max:
            continue  # the same lines at the same prices; a quantity change counts even without a price
        name = cur.name if cur is not None else old.name if old is not None else urn
        fully = all(r.priced_fully for r in (old, cur) if r is not None)
        lines = _pair_lines(old.components if old else (), cur.components if cur else (), False)
        at_max = _pair_lines(old.components_at_max if old else (), cur.components_at_max if cur else (), True)
        moves = (*_moves(lines), *_moves(at_max))
        desired_keys = {(x.price_key, x.previous_quantity, x.new_quantity) for x in lines}
        lines += [x for x in at_max if (x.price_key, x.previous_quantity, x.new_quantity) not in desired_keys]
        either = cur if cur is not None else old
        changes.append(ResourceChange(
            urn, name, kind, old.monthly_usd if old else 0.0, cur.monthly_usd if cur else 0.0,
            old.one_time_usd if old else 0.0, cur.one_time_usd if cur else 0.0, fully,
            old.monthly_usd_at_max if old else 0.0, cur.monthly_usd_at_max if cur else 0.0, tuple(lines),
            either.plane if either is not None else "", either.autoscaled if either is not None else None,
            cur.nodes if cur is not None else None, moves))
    return CostDiff(stack=new.stack or previous.stack, previous=previous, new=new, resources=tuple(changes),
                    notes=tuple(notes))


def diff_event_log(log: EventLogPreview, prices: dict[str, Price] | None = None, usage: Usage | None = None,
                   usage_notes: tuple[str, ...] = ()) -> CostDiff:
    """The cost change of the update an engine event log describes: its state before against its state after
    (:func:`blueprint.graph.eventlog.load_event_log`), one price catalog and usage file for both."""
    diff = diff_reports(price_graph(log.old, prices, usage),
                        price_graph(log.new, prices, usage, usage_notes=usage_notes),
                        ops=log.ops, renamed=log.renamed)
    names = sorted({urn.rsplit("::", 1)[-1] for urn in log.replaced})
    return replace(diff, replaced=tuple(names), changes=graph_changes(log.old, log.new, log.ops, log.renamed),
                   day_two=day_two(log.old, log.new))


_STEPS = {"create": "added", "create-replacement": "replaced", "replace": "replaced", "delete": "removed",
          "delete-replaced": "replaced", "update": "changed", "same": "", "read": "", "refresh": ""}


def graph_changes(previous: ResourceGraph, new: ResourceGraph, ops: Mapping[str, str] | None = None,
                  renamed: Mapping[str, str] | None = None,
                  replaced: set[str] | None = None) -> tuple[GraphChange, ...]:
    """Every cloud or Kubernetes resource (not components, providers or the stack) that ``new`` adds, changes or
    removes against ``previous``, by URN; an engine event log's steps (``ops``) say it where they are known
    (a replacement is ``replaced``), otherwise inputs and protection are compared, and a change of a field that
    replaces the resource (``replaced``: their URNs, :mod:`blueprint.changes.replacements`) is ``replaced``."""
    ops = ops or {}
    replaced = replaced or set()
    renamed = renamed or {}

    def counted(res: GraphResource) -> bool:
        return not (res.is_component or res.is_provider or res.type == "pulumi:pulumi:Stack")

    before = {renamed.get(r.urn, r.urn): r for r in previous.resources if counted(r)}
    after = {r.urn: r for r in new.resources if counted(r)}
    out = []
    for urn in sorted(before.keys() | after.keys()):
        old, cur = before.get(urn), after.get(urn)
        step = _STEPS.get(ops.get(urn, ""))
        if step == "":
            continue
        if step is None:
            if old is None:
                step = "added"
            elif cur is None:
                step = "removed"
            elif old.inputs != cur.inputs or old.protect != cur.protect:
                step = "replaced" if urn in replaced else "changed"
            else:
                continue
        res, graph = (cur, new) if cur is not None else (old, previous)
        assert res is not None
        out.append(GraphChange(urn, res.name, res.type, graph.plane_of(res), step))
    return tuple(out)


# --- the JSON document: everything the comment shows -------------------------------------------------------------


def diff_document(diff: CostDiff) -> dict[str, Any]:
    """One stack's diff as JSON (``--format json``): totals and changes at desired and at max size, one-time apart,
    each changed resource with its lines, and what is stale or unpriced."""
    return {
        "currency": diff.new.currency,
        "stack": diff.stack,
        "previous_monthly_usd": diff.previous.total_monthly_usd,
        "new_monthly_usd": diff.new.total_monthly_usd,
        "diff_monthly_usd": diff.diff_monthly_usd,
        "diff_percent": diff.diff_percent,
        "previous_monthly_usd_at_max": diff.previous.total_monthly_usd_at_max,
        "new_monthly_usd_at_max": diff.new.total_monthly_usd_at_max,
        "diff_monthly_usd_at_max": diff.diff_monthly_usd_at_max,
        "diff_percent_at_max": percent(diff.previous.total_monthly_usd_at_max, diff.new.total_monthly_usd_at_max),
        "previous_one_time_usd": diff.previous.total_one_time_usd,
        "new_one_time_usd": diff.new.total_one_time_usd,
        "diff_one_time_usd": diff.diff_one_time_usd,
        "unpriced_changes": diff.unpriced_changes,
        "unpriced_rises": _unpriced_moves(diff, rising=True),
        "unpriced_falls": _unpriced_moves(diff, rising=False),
        "previous_lower_bound": diff.previous.lower_bound,
        "new_lower_bound": diff.new.lower_bound,
        "unpriced_lines": unpriced_line_items(diff.new),
        "bounded": bounded_items(diff.new),
        "resources": [{"urn": r.urn, "name": r.name, "change": r.change,
                       "previous_monthly_usd": r.previous_monthly_usd, "new_monthly_usd": r.new_monthly_usd,
                       "previous_monthly_usd_at_max": r.previous_at_max_usd,
                       "new_monthly_usd_at_max": r.new_at_max_usd,
                       "previous_one_time_usd": r.previous_one_time_usd, "new_one_time_usd": r.new_one_time_usd,
                       "priced_fully": r.priced_fully, "lines": [x.to_dict() for x in r.lines], "plane": r.plane,
                       "autoscaled": r.autoscaled, "nodes": list(r.nodes) if r.nodes is not None else None}
                      for r in diff.resources],
        "changes": [c.to_dict() for c in diff.changes],
        "stale_prices": diff.stale_prices,
        "unpriced": diff.unpriced,
        "notes": list(diff.notes),
        "serving": list(diff.serving),
        "replaced": list(diff.replaced),
        **diff.day_two.document(),
    }


def _unpriced_moves(diff: CostDiff, rising: bool) -> dict[str, int]:
    """How many changed lines without a price rise (or fall) in quantity, at desired size and at max size: the
    changes' figures leave them out, so a rise makes an increase "at least" its figure."""
    first = 0 if rising else 1
    return {"desired": sum(r.unpriced_moves[first] for r in diff.resources),
            "max": sum(r.unpriced_moves[first + 2] for r in diff.resources)}


def render_diff_json(diffs: Sequence[CostDiff]) -> str:
    """One stack: its document; several: ``{"stacks": [...]}`` with the totals across them."""
    docs = [diff_document(d) for d in diffs]
    if len(docs) == 1:
        return json.dumps(docs[0], indent=2, sort_keys=True) + "\n"
    return json.dumps({"stacks": docs, "total": _totals(docs)}, indent=2, sort_keys=True) + "\n"


def _totals(docs: Sequence[dict[str, Any]]) -> dict[str, float]:
    keys = ("previous_monthly_usd", "new_monthly_usd", "diff_monthly_usd", "previous_monthly_usd_at_max",
            "new_monthly_usd_at_max", "diff_monthly_usd_at_max", "diff_one_time_usd")
    return {k: sum(float(d.get(k) or 0.0) for d in docs) for k in keys}


# --- the comment ----------------------------------------------------------------------------------------------------


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f}"


def _pct(value: float | None, delta: float, previous: float) -> str:
    """`` (+12.5%)``, `` (new)`` from nothing, or the base itself when it is too small for a percentage."""
    if delta == 0:
        return ""
    if value is not None:
        return f" ({value:+.1f}%)"
    return " (new)" if previous == 0 else f" (from {format_usd(previous)})"


def _changed(doc: dict[str, Any]) -> bool:
    keys = ("diff_monthly_usd", "diff_monthly_usd_at_max", "diff_one_time_usd")
    day_two = ("node_rolls", "replacements", "version_problems")
    return bool(doc["resources"]) or bool(doc.get("replaced")) or any(doc.get(k) for k in (*keys, *day_two))


def headline(doc: dict[str, Any]) -> str:
    """One sentence on a stack's (or the sum's) change at desired and at max size."""
    now, reach = float(doc["diff_monthly_usd"]), float(doc["diff_monthly_usd_at_max"])
    bound = (f" Not counted: {len(doc['unpriced_changes'])} changed resource(s) with lines that have no price."
             if doc.get("unpriced_changes") else "")

    def part(delta: float, pct: float | None, side: str) -> str:
        rises = int(_dict(doc.get("unpriced_rises")).get(side) or 0)
        falls = int(_dict(doc.get("unpriced_falls")).get(side) or 0)
        if delta == 0 and not (rises or falls):
            return "will not change"
        if delta == 0:
            return "changes only by lines without a price (listed below)"
        least = (delta > 0 and rises and not falls) or (delta < 0 and falls and not rises)
        rest = "" if least or not (rises or falls) else ", not counting lines without a price (listed below)"
        base = float(doc.get("previous_monthly_usd" if side == "desired" else "previous_monthly_usd_at_max") or 0.0)
        return (f"will {'increase' if delta > 0 else 'decrease'} by {'at least ' if least else ''}"
                f"{format_usd(abs(delta))}{_pct(pct, delta, base)}{rest}")
    text = f"Monthly cost at desired size {part(now, doc.get('diff_percent'), 'desired')}"
    text += f"; at max size (what the node groups may reach) it {part(reach, doc.get('diff_percent_at_max'), 'max')}."
    once = float(doc.get("diff_one_time_usd") or 0.0)
    if once:
        text += f" One-time (Capacity Blocks, prepaid): {_signed(once)}."
    return text + bound


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _total(doc: dict[str, Any], key: str) -> str:
    """A stack's total, "at least" when that side leaves lines without a price or usage without an estimate out."""
    side = "previous" if key.startswith("previous") else "new"
    least = "at least " if doc.get(f"{side}_lower_bound") else ""
    return least + format_usd(float(doc[key]))


def _autoscaler_notes(doc: dict[str, Any]) -> list[str]:
    """A new node group the autoscaler will not manage: it runs (and is billed) at its desired size from the first
    apply, whatever the queue holds."""
    out = []
    for r in doc["resources"]:
        if r.get("change") != "added" or r.get("autoscaled") is not False:
            continue
        name = md_code(r["name"], table=False)
        if float(r.get("new_one_time_usd") or 0.0) > 0:
            out.append(f"New node group {name} is not managed by the autoscaler: a Capacity Block, sized by its "
                       "window's schedule and prepaid whether nodes run or not.")
            continue
        nodes = r.get("nodes") or ["?", "?"]
        out.append(f"New node group {name} is not managed by the autoscaler (fixed size): it stays at its desired "
                   f"{_qty(float(nodes[0])) if nodes[0] != '?' else '?'} node(s), used or not, and nothing grows it "
                   f"toward its max of {_qty(float(nodes[1])) if nodes[1] != '?' else '?'} "
                   f"({format_usd(float(r['new_monthly_usd']))} a month at desired size, "
                   f"{format_usd(float(r['new_monthly_usd_at_max']))} at max size).")
    return out


def _qty(value: float) -> str:
    return f"{value:,.6g}"


def _stack_section(doc: dict[str, Any]) -> list[str]:
    out = [f"<details><summary><b>{html_name(doc['stack'])}</b>: {_signed(doc['diff_monthly_usd'])}/month at desired "
           "size, "
           f"{_signed(doc['diff_monthly_usd_at_max'])} at max size</summary>", "", headline(doc), "",
           "| resource | change | previous / month | new / month | at max: previous | at max: new | one-time |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in doc["resources"]:
        once = float(r["new_one_time_usd"]) - float(r["previous_one_time_usd"])
        out.append(f"| {md_code(r['name'])} | {md_name(r['change'])}"
                   f"{'' if r['priced_fully'] else ' (some lines unpriced)'} | "
                   f"{format_usd(r['previous_monthly_usd'])} | {format_usd(r['new_monthly_usd'])} | "
                   f"{format_usd(r['previous_monthly_usd_at_max'])} | {format_usd(r['new_monthly_usd_at_max'])} | "
                   f"{_signed(once) if once else '-'} |")
    lines = [(r["name"], x) for r in doc["resources"] for x in r.get("lines", [])]
    if lines:
        out += ["", "| resource | line | quantity | unit price | previous | new |",
                "| --- | --- | ---: | ---: | ---: | ---: |"]
        for name, x in lines:
            price = "no price" if x["unit_price_usd"] is None else f"${x['unit_price_usd']:g}/{md_text(x['unit'])}"
            if x.get("bound"):
                price += f" (upper bound: {md_text(x['bound'])})"
            where = " (at max size)" if x["at_max"] else (" (one-time)" if x["one_time"] else "")
            out.append(f"| {md_code(name)} | {md_text(x['name'])}{where} | {_qty(x['previous_quantity'])} -> "
                       f"{_qty(x['new_quantity'])} {md_text(x['unit'])} | {price} | {format_usd(x['previous_usd'])} | "
                       f"{format_usd(x['new_usd'])} |")
    if doc.get("replaced"):
        out += ["", f"**Replaced** (deleted and created again: the monthly cost carries over, what the resource holds "
                f"does not): {', '.join(md_code(name, table=False) for name in doc['replaced'])}"]
    autoscaler = _autoscaler_notes(doc)
    if autoscaler:
        out += ["", *autoscaler]
    if doc.get("unpriced_lines"):
        out += ["", "Not in the figures (no price read), every line:", "",
                *(f"- {md_text(item)}" for item in doc["unpriced_lines"])]
    if doc.get("bounded"):
        out += ["", "Priced at an upper bound (the price was not read; the real figure is at most this):", "",
                *(f"- {md_text(item)}" for item in doc["bounded"])]
    if doc.get("serving"):  # each served model's replicas, GPUs, money and cost per million tokens after the change
        out += ["", "Served models after this change (`blueprint sizing`):", "", "```text", *doc["serving"], "```"]
    if doc.get("notes"):
        out += ["", *(f"Note: {md_text(n)}" for n in doc["notes"])]  # a blank line first, or they join the table
    return [*out, "", "</details>", ""]


def render_diff_markdown(docs: Sequence[dict[str, Any]]) -> str:
    """The pull-request comment: the headline across stacks, one table of every stack, then a folded section per
    changed stack; stale and unpriced keys once at the end."""
    total = _totals(docs)
    total_doc = {**total, "diff_percent": percent(total["previous_monthly_usd"], total["new_monthly_usd"]),
                 "diff_percent_at_max": percent(total["previous_monthly_usd_at_max"],
                                                total["new_monthly_usd_at_max"]),
                 "unpriced_changes": [u for d in docs for u in d.get("unpriced_changes", [])],
                 **{f"unpriced_{way}": {side: sum(int(_dict(d.get(f"unpriced_{way}")).get(side) or 0) for d in docs)
                                        for side in ("desired", "max")} for way in ("rises", "falls")}}
    changed = [d for d in docs if _changed(d)]
    title = f"### Cost preview: {md_name(docs[0]['stack'], table=False)}" if len(docs) == 1 else \
        f"### Cost preview: {len(changed)} of {len(docs)} stacks change"
    out = [title, "", f"**{headline(total_doc)}**", "",
           "| stack | previous / month | new / month | change | at max size: new | at max: change | one-time |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    ordered = sorted(docs, key=lambda d: (not _changed(d), -abs(float(d["diff_monthly_usd_at_max"])), d["stack"]))
    for d in ordered:
        if not _changed(d):
            out.append(f"| {md_name(d['stack'])} | {_total(d, 'previous_monthly_usd')} | "
                       f"{_total(d, 'new_monthly_usd')} | no change | | | |")
            continue
        once = float(d.get("diff_one_time_usd") or 0.0)
        reach_pct = _pct(d.get("diff_percent_at_max"), d["diff_monthly_usd_at_max"], d["previous_monthly_usd_at_max"])
        out.append(f"| {md_name(d['stack'])} | {_total(d, 'previous_monthly_usd')} | "
                   f"{_total(d, 'new_monthly_usd')} | "
                   f"{_signed(d['diff_monthly_usd'])}"
                   f"{_pct(d.get('diff_percent'), d['diff_monthly_usd'], d['previous_monthly_usd'])} | "
                   f"{_total(d, 'new_monthly_usd_at_max')} | "
                   f"{_signed(d['diff_monthly_usd_at_max'])}"
                   f"{reach_pct} | "
                   f"{_signed(once) if once else '-'} |")
    out.append("")
    picture = render_mermaid(ordered)
    if picture:
        out += ["What changed, by plane (red: the cost rises, green: it falls, grey: no cost change, amber: a line "
                "without a price changed):", "", *picture, ""]
    # Day two before the folded sections: reviewers see which nodes roll and what is replaced without opening them.
    day_two_parts = [(d["stack"], day_two_markdown(d)) for d in ordered]
    if any(lines for _, lines in day_two_parts):
        out += ["#### What this change does to the running cluster", ""]
        for stack, lines in day_two_parts:
            if lines:
                out += [f"**{md_name(stack, table=False)}**", *lines, ""]
    for d in ordered:  # the sections in the table's order
        if _changed(d):
            out += _stack_section(d)
    stale = sorted({k for d in docs for k in d.get("stale_prices", [])})
    unpriced = sorted({k for d in docs for k in d.get("unpriced", [])})
    if stale:
        out.append(f"Stale prices (may have changed since they were read): "
                   f"{', '.join(md_code(k, table=False) for k in stale)}")
    if unpriced:
        out.append(f"Not in the totals (no price read): {', '.join(md_code(k, table=False) for k in unpriced)}")
    out.append("Totals: a month of running resources at desired size, and at max size (what node groups may reach); "
               "Capacity Blocks are one-time, shown apart. A percentage is shown against a meaningful base only.")
    return "\n".join(out) + "\n"


def breaches(diff: CostDiff, fail_above_usd: float | None, fail_above_percent: float | None) -> list[str]:
    """The guardrails the increase crosses, at desired size (what runs) or at max size (what the node groups may
    reach: a maxSize change moves only this); empty when none (or none were set)."""
    sides = (("at desired size", diff.diff_monthly_usd, diff.previous.total_monthly_usd),
             ("at max size", diff.diff_monthly_usd_at_max, diff.previous.total_monthly_usd_at_max))
    return guardrail_breaches(diff.stack, sides, fail_above_usd, fail_above_percent)


def guardrail_breaches(who: str, sides: Sequence[tuple[str, float, float]], fail_above_usd: float | None,
                       fail_above_percent: float | None) -> list[str]:
    """The guardrails each ``(where, increase, base)`` crosses, said for ``who`` (a stack, or all stacks)."""
    out = []
    for where, delta, base in sides:
        if fail_above_usd is not None and delta > fail_above_usd:
            out.append(f"{who}: the monthly cost {where} rises by {format_usd(delta)}, above "
                       f"--fail-above-usd {format_usd(fail_above_usd)}")
        pct = percent(base, base + delta)
        if fail_above_percent is not None and delta > 0 and (pct is None or pct > fail_above_percent):
            shown = f"from a base of {format_usd(base)}" if pct is None else f"{pct:.1f}%"
            out.append(f"{who}: the monthly cost {where} rises by {shown}, above --fail-above-percent "
                       f"{fail_above_percent:g}%")
    return out
