"""``blueprint cost diff``: what a change does to the monthly cost, in the shape PR reviewers know.

Resources are matched by URN. The Markdown follows the familiar Infracost comment: a headline ("monthly
cost will increase by $X (+Y%)"), a table of previous, new and change, and collapsible details per changed
resource; stale and unknown prices of either side are listed under it.

From one engine event log (:func:`diff_event_log`) the two sides are the states before and after the update
the preview plans: a deleted resource's cost goes, a created one's comes, and a replaced one keeps its cost (it
is deleted and created again) but is listed as ``replaced`` even when its cost does not change, since what it
holds does not carry over.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from blueprint.cost.engine import CostReport, price_graph
from blueprint.cost.prices import Price
from blueprint.cost.render import format_usd
from blueprint.cost.usage import Usage
from blueprint.eventlog import EventLogPreview


@dataclass(frozen=True)
class ResourceChange:
    """One resource whose cost changed (added, removed or changed), or that the update replaces (replaced)."""

    urn: str
    name: str
    change: str
    previous_monthly_usd: float
    new_monthly_usd: float
    previous_one_time_usd: float = 0.0
    new_one_time_usd: float = 0.0
    priced_fully: bool = True  # False: a line without a price changed, so the difference is a lower bound


@dataclass(frozen=True)
class CostDiff:
    """Two cost reports of the same stack, compared."""

    stack: str
    previous: CostReport
    new: CostReport
    resources: tuple[ResourceChange, ...]
    replaced: tuple[str, ...] = ()  # names of every resource the update replaces, priced or not (event logs)

    @property
    def diff_monthly_usd(self) -> float:
        return self.new.total_monthly_usd - self.previous.total_monthly_usd

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
        base = self.previous.total_monthly_usd
        return None if base == 0 else 100.0 * self.diff_monthly_usd / base


def diff_reports(previous: CostReport, new: CostReport, ops: Mapping[str, str] | None = None,
                 renamed: Mapping[str, str] | None = None) -> CostDiff:
    """Every resource whose monthly cost differs, sorted by URN; with ``ops`` (URN -> the step a preview plans,
    :attr:`EventLogPreview.ops`) also every priced resource that is replaced, as ``replaced``. ``renamed`` maps
    a previous URN to its new one (an alias), so a renamed resource is matched, not removed and added."""
    ops = ops or {}
    renamed = renamed or {}
    before = {renamed.get(r.urn, r.urn): r for r in previous.resources}
    after = {r.urn: r for r in new.resources}
    changes: list[ResourceChange] = []
    for urn in sorted(before.keys() | after.keys()):
        old, cur = before.get(urn), after.get(urn)
        old_usd = old.monthly_usd if old else 0.0
        new_usd = cur.monthly_usd if cur else 0.0
        replaced = old is not None and cur is not None and ops.get(urn) == "replace"
        kind = "added" if old is None else "removed" if cur is None else "replaced" if replaced else "changed"
        if (old is not None and cur is not None and not replaced and old.signature() == cur.signature()
                and old_usd == new_usd):
            continue  # the same lines at the same prices; a quantity change counts even without a price
        name = cur.name if cur is not None else old.name if old is not None else urn
        fully = all(r.priced_fully for r in (old, cur) if r is not None)
        changes.append(ResourceChange(urn, name, kind, old_usd, new_usd,
                                      old.one_time_usd if old else 0.0, cur.one_time_usd if cur else 0.0, fully))
    return CostDiff(stack=new.stack or previous.stack, previous=previous, new=new, resources=tuple(changes))


def diff_event_log(log: EventLogPreview, prices: dict[str, Price] | None = None, usage: Usage | None = None,
                   usage_notes: tuple[str, ...] = ()) -> CostDiff:
    """The cost change of the update an engine event log describes: its state before against its state after
    (:func:`blueprint.eventlog.load_event_log`), one price catalog and usage file for both."""
    diff = diff_reports(price_graph(log.old, prices, usage),
                        price_graph(log.new, prices, usage, usage_notes=usage_notes),
                        ops=log.ops, renamed=log.renamed)
    names = sorted({urn.rsplit("::", 1)[-1] for urn in log.replaced})
    return replace(diff, replaced=tuple(names))


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f}"


def _percent(diff: CostDiff) -> str:
    pct = diff.diff_percent
    return "n/a" if pct is None else f"{pct:+.1f}%"


def headline(diff: CostDiff) -> str:
    delta = diff.diff_monthly_usd
    bound = (f" Not counted: {len(diff.unpriced_changes)} changed resource(s) with lines that have no price."
             if diff.unpriced_changes else "")
    if delta == 0:
        return "Monthly cost will not change (for the priced lines)." + bound if bound else \
            "Monthly cost will not change."
    verb = "increase" if delta > 0 else "decrease"
    return f"Monthly cost will {verb} by {format_usd(abs(delta))} ({_percent(diff)}).{bound}"


def render_diff_markdown(diff: CostDiff) -> str:
    """The pull-request comment."""
    out = [f"### Cost preview: {diff.stack}", "", f"**{headline(diff)}**", "",
           "| stack | previous | new | change |", "| --- | ---: | ---: | ---: |",
           f"| {diff.stack} | {format_usd(diff.previous.total_monthly_usd)} | "
           f"{format_usd(diff.new.total_monthly_usd)} | "
           f"{_signed(diff.diff_monthly_usd)} ({_percent(diff)}) |", ""]
    if diff.diff_one_time_usd:
        out += [f"One-time (Capacity Blocks, prepaid): {format_usd(diff.previous.total_one_time_usd)} -> "
                f"{format_usd(diff.new.total_one_time_usd)} ({_signed(diff.diff_one_time_usd)}).", ""]
    if diff.resources:
        what = "changed cost or are replaced" if any(r.change == "replaced" for r in diff.resources) else "changed cost"
        out += [f"<details><summary>{len(diff.resources)} resource(s) {what}</summary>", "",
                "| resource | change | previous / month | new / month | difference | one-time |",
                "| --- | --- | ---: | ---: | ---: | ---: |"]
        for r in diff.resources:
            once = r.new_one_time_usd - r.previous_one_time_usd
            out.append(f"| `{r.name}` | {r.change}{'' if r.priced_fully else ' (some lines unpriced)'} | "
                       f"{format_usd(r.previous_monthly_usd)} | {format_usd(r.new_monthly_usd)} | "
                       f"{_signed(r.new_monthly_usd - r.previous_monthly_usd)} | {_signed(once) if once else '-'} |")
        out += ["", "</details>", ""]
    if diff.replaced:
        out += [f"**Replaced** (deleted and created again: the monthly cost carries over, what the resource holds "
                f"does not): {', '.join(f'`{name}`' for name in diff.replaced)}", ""]
    stale, unpriced = diff.stale_prices, diff.unpriced
    if stale:
        out.append(f"Stale prices (may have changed since they were read): {', '.join(f'`{k}`' for k in stale)}")
    if unpriced:
        out.append(f"Not in the totals (no price read): {', '.join(f'`{k}`' for k in unpriced)}")
    out.append("Totals: a month of running resources at desired size; Capacity Blocks are one-time, shown apart.")
    return "\n".join(out) + "\n"


def diff_document(diff: CostDiff) -> dict[str, Any]:
    return {
        "currency": diff.new.currency,
        "stack": diff.stack,
        "previous_monthly_usd": diff.previous.total_monthly_usd,
        "new_monthly_usd": diff.new.total_monthly_usd,
        "diff_monthly_usd": diff.diff_monthly_usd,
        "diff_percent": diff.diff_percent,
        "previous_one_time_usd": diff.previous.total_one_time_usd,
        "new_one_time_usd": diff.new.total_one_time_usd,
        "unpriced_changes": diff.unpriced_changes,
        "resources": [{"urn": r.urn, "change": r.change, "previous_monthly_usd": r.previous_monthly_usd,
                       "new_monthly_usd": r.new_monthly_usd, "previous_one_time_usd": r.previous_one_time_usd,
                       "new_one_time_usd": r.new_one_time_usd, "priced_fully": r.priced_fully}
                      for r in diff.resources],
        "stale_prices": diff.stale_prices,
        "unpriced": diff.unpriced,
        "replaced": list(diff.replaced),
    }


def render_diff_json(diff: CostDiff) -> str:
    return json.dumps(diff_document(diff), indent=2, sort_keys=True) + "\n"


def breaches(diff: CostDiff, fail_above_usd: float | None, fail_above_percent: float | None) -> list[str]:
    """The guardrails the increase crosses; empty when none (or none were set)."""
    out = []
    if fail_above_usd is not None and diff.diff_monthly_usd > fail_above_usd:
        out.append(f"the monthly cost rises by {format_usd(diff.diff_monthly_usd)}, above --fail-above-usd "
                   f"{format_usd(fail_above_usd)}")
    pct = diff.diff_percent
    if fail_above_percent is not None and diff.diff_monthly_usd > 0 and (pct is None or pct > fail_above_percent):
        shown = "from zero" if pct is None else f"{pct:.1f}%"
        out.append(f"the monthly cost rises by {shown}, above --fail-above-percent {fail_above_percent:g}%")
    return out
