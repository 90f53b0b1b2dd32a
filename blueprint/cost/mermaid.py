"""The pull-request comment's picture of a change: a small Mermaid flowchart (GitHub renders a ```mermaid block in a
comment) of the planes a change touches and the resources it adds, changes, replaces or removes, each coloured by its
cost change (red: up, green: down, grey: none, amber: a line without a price changed).

It is drawn from the ``cost diff --format json`` documents alone, so ``cost diff --combine`` draws it from the
parallel jobs' reports: ``changes`` (every resource that changed, priced or not, with its plane) and ``resources``
(the priced ones with their cost before and after). A document without ``changes`` (an older report) still draws its
priced resources. Per plane at most :data:`PER_PLANE` resources are named, the largest cost changes first; the rest
are counted, so the picture stays small whatever the change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PER_PLANE = 4
SYMBOL = {"added": "+", "changed": "~", "replaced": "±", "removed": "-"}
CLASSES = (
    "classDef up fill:#fde2e1,stroke:#b00020,color:#5c0011",
    "classDef down fill:#e3f6e5,stroke:#1e7b34,color:#0b3d17",
    "classDef same fill:#f2f2f2,stroke:#8895a7,color:#333333",
    "classDef unpriced fill:#fff1c7,stroke:#b7791f,color:#5c3d00,stroke-dasharray:4 3",
)
PLANE_ORDER = ("network", "compute", "storage", "control-plane", "platform", "telemetry", "cost")


_SAFE = str.maketrans({'"': "'", "`": "'", "<": "(", ">": ")", "#": "No.", "&": "+"})


def _text(value: str) -> str:
    """A label Mermaid takes inside double quotes: what would end it or be read as markup or an entity code
    (``"``, a backtick, ``<``, ``>``, ``#``, ``&``) is swapped for a look-alike; Mermaid's own entity codes are not
    decoded everywhere (a subgraph title keeps them as text)."""
    return value.translate(_SAFE)


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f}"


def _deltas(r: dict[str, Any] | None) -> tuple[float, float, float]:
    """A priced resource's change: monthly at desired size, monthly at max size, one-time."""
    if r is None:
        return 0.0, 0.0, 0.0
    return (float(r.get("new_monthly_usd", 0.0)) - float(r.get("previous_monthly_usd", 0.0)),
            float(r.get("new_monthly_usd_at_max", 0.0)) - float(r.get("previous_monthly_usd_at_max", 0.0)),
            float(r.get("new_one_time_usd", 0.0)) - float(r.get("previous_one_time_usd", 0.0)))


def _cost(deltas: tuple[float, float, float]) -> tuple[float, str]:
    """The change the picture colours by (monthly at desired size, else at max size, else one-time) and its text:
    each part that moved, the one-time charge apart."""
    desired, at_max, once = deltas
    parts = []
    if desired:
        parts.append(f"{_signed(desired)}/month")
    if at_max and at_max != desired:
        parts.append(f"{_signed(at_max)}/month at max size")
    if once:
        parts.append(f"{_signed(once)} one-time")
    return next((d for d in deltas if d), 0.0), ", ".join(parts)


def _klass(delta: float, priced: bool) -> str:
    if not priced:
        return "unpriced"
    return "up" if delta > 0 else "down" if delta < 0 else "same"


def _rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every changed resource of a stack: its name, plane, change and cost change (priced ones matched by URN)."""
    priced = {str(r["urn"]): r for r in doc.get("resources", [])}
    rows = []
    seen = set()
    for c in doc.get("changes", []):
        cost = priced.get(str(c["urn"]))
        rows.append({"name": c["name"], "plane": c.get("plane") or "?", "change": c["change"], "cost": cost})
        seen.add(str(c["urn"]))
    for urn, r in priced.items():  # a cost change without an input change (a price, a usage estimate)
        if urn not in seen:
            rows.append({"name": r["name"], "plane": r.get("plane") or "?", "change": r["change"], "cost": r})
    return rows


def render_mermaid(docs: Sequence[dict[str, Any]]) -> list[str]:
    """The ```mermaid block (its lines) of the changed stacks; empty when nothing changed."""
    stacks = [(d, rows) for d in docs if (rows := _rows(d))]
    if not stacks:
        return []
    out = ["```mermaid", "flowchart LR"]
    order = {p: i for i, p in enumerate(PLANE_ORDER)}
    for i, (doc, rows) in enumerate(stacks):
        title = (f"{doc['stack']}: {_signed(float(doc.get('diff_monthly_usd', 0.0)))}/month, "
                 f"{_signed(float(doc.get('diff_monthly_usd_at_max', 0.0)))} at max size")
        out.append(f'  subgraph s{i}["{_text(title)}"]')
        out.append("    direction LR")
        planes = sorted({r["plane"] for r in rows}, key=lambda p: (order.get(p, len(order)), p))
        for j, plane in enumerate(planes):
            members = [r for r in rows if r["plane"] == plane]
            for r in members:
                r["delta"], r["label"] = _cost(_deltas(r["cost"]))
                r["priced"] = r["cost"] is None or bool(r["cost"].get("priced_fully", True))
            sums = [_deltas(r["cost"]) for r in members]
            delta, money = _cost((sum(s[0] for s in sums), sum(s[1] for s in sums), sum(s[2] for s in sums)))
            counts = ", ".join(f"{sum(1 for r in members if r['change'] == kind)} {kind}"
                               for kind in SYMBOL if any(r["change"] == kind for r in members))
            label = "<br/>".join(_text(part) for part in (plane, counts, money) if part)
            node = f"s{i}p{j}"
            out.append(f'    {node}["{label}"]:::{_klass(delta, all(r["priced"] for r in members))}')
            shown = sorted(members, key=lambda r: (-abs(r["delta"]), r["change"] != "added", r["name"]))[:PER_PLANE]
            for k, r in enumerate(shown):
                text = "<br/>".join(_text(part) for part in (f"{SYMBOL.get(r['change'], '?')} {r['name']}",
                                                             r["label"]) if part)
                out.append(f'    {node}r{k}["{text}"]:::{_klass(r["delta"], r["priced"])}')
                out.append(f"    {node} --- {node}r{k}")
            if len(members) > len(shown):
                out.append(f'    {node}more["and {len(members) - len(shown)} more"]:::same')
                out.append(f"    {node} --- {node}more")
        out.append("  end")
    out += [f"  {c}" for c in CLASSES]
    out.append("```")
    return out
