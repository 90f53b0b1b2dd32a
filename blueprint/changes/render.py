"""The day-two part of the pull-request comment and of ``cost diff --format json``: the node groups that roll (in
order, what they interrupt, the GPU-hours at risk), the resources replaced (and the fields that force it), and the
version changes the service refuses; and the lines that fail the check."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from blueprint.changes.replacements import Replacement, replaced_urns, replacements
from blueprint.changes.rolls import NodeRoll, describe, node_rolls
from blueprint.changes.steps import VersionProblem, step_problems
from blueprint.files.markdown import md_code, md_text
from blueprint.graph.model import ResourceGraph


@dataclass(frozen=True)
class DayTwo:
    """What a change does to the running cluster."""

    node_rolls: tuple[NodeRoll, ...] = ()
    replacements: tuple[Replacement, ...] = ()
    version_problems: tuple[VersionProblem, ...] = ()

    @property
    def replaced_urns(self) -> set[str]:
        """The URNs the provider replaces."""
        return replaced_urns(list(self.replacements))

    def document(self) -> dict[str, Any]:
        """The JSON keys (``node_rolls``, ``replacements``, ``version_problems``)."""
        return {"node_rolls": [r.to_dict() for r in self.node_rolls],
                "replacements": [r.to_dict() for r in self.replacements],
                "version_problems": [{"what": p.what, "key": p.key, "message": p.message, "rule": p.rule}
                                     for p in self.version_problems]}


def day_two(old: ResourceGraph, new: ResourceGraph, allowed: dict[str, str] | None = None) -> DayTwo:
    """Compare two graphs of one stack (``allowed``: upgrades.allowReplace, resource name -> reason)."""
    return DayTwo(tuple(node_rolls(old, new)), tuple(replacements(old, new, allowed)),
                  tuple(step_problems(old, new)))


def failures(doc: dict[str, Any]) -> list[str]:
    """The lines that fail the pull-request check: a replacement or removal of what holds data or identity that the
    stack does not allow, and a version change the service refuses."""
    out = []
    for r in doc.get("replacements") or []:
        if r.get("holds_data") and not r.get("allowed") and r.get("fields"):
            what = "removes" if r["fields"] == ["(removed)"] else f"replaces it (field {', '.join(r['fields'])})"
            out.append(f"{doc['stack']}: {r['name']} ({r['type']}) holds {r['holds']}, and the change {what}: keep "
                       "the field, or list the resource under gpu-cluster:spec.upgrades.allowReplace with a reason")
    for p in doc.get("version_problems") or []:
        out.append(f"{doc['stack']}: {p['message']}")
    return out


def markdown(doc: dict[str, Any]) -> list[str]:
    """The day-two lines of one stack's section (nothing when the change touches no node and replaces nothing)."""
    out: list[str] = []
    rolls: Sequence[dict[str, Any]] = doc.get("node_rolls") or []
    if rolls:
        out += ["", "**Node groups that roll** (in this order; each waits for the one before):", "",
                "| order | node group | nodes | why | how | interrupts jobs | GPU-hours at risk |",
                "| ---: | --- | ---: | --- | --- | --- | ---: |"]
        for r in rolls:
            risk = "-" if not r["interrupts_jobs"] else (
                f"{r['gpu_hours_at_risk']:,.1f}" if r.get("gpu_hours_at_risk") is not None else "not modelled")
            how = md_text(r["how"]) + (f"; {md_text(r['when'])}" if r.get("when") else "")
            out.append(f"| {r['order']} | {md_code(r['node_group'])} | {r['nodes']} | {md_text(r['reason'])} | {how} | "
                       f"{'yes' if r['interrupts_jobs'] else 'no'} | {risk} |")
    found: Sequence[dict[str, Any]] = doc.get("replacements") or []
    if found:
        out += ["", "**Replaced or removed** (the provider deletes and creates it again; what it holds does not carry "
                "over):", ""]
        for r in found:
            what = "removed" if r["fields"] == ["(removed)"] else (
                f"replaced by {', '.join(md_code(f, table=False) for f in r['fields'])}" if r["fields"] else
                "may be replaced")
            line = f"- {md_code(r['name'], table=False)} ({md_text(r['type'])}): {what}"
            if r.get("holds_data"):
                line += f"; holds {md_text(r['holds'])}" + (f"; allowed: {md_text(r['allowed'])}" if r.get("allowed")
                                                             else " **(fails the check)**")
            if r.get("unknown_fields"):
                line += (f"; whether {', '.join(md_code(f, table=False) for f in r['unknown_fields'])} replaces it "
                         "is not known "
                         "(the field was not read upstream)")
            out.append(line)
    problems: Sequence[dict[str, Any]] = doc.get("version_problems") or []
    if problems:
        out += ["", "**Version changes the service refuses:**", "", *(f"- {md_text(p['message'])}" for p in problems)]
    return out


def text(changes: DayTwo, previous: str) -> str:
    """The preview's day-two section: what this run does to the cluster ``previous`` describes."""
    out = [f"== day two: this run after {previous}"]
    if not (changes.node_rolls or changes.replacements or changes.version_problems):
        out.append("   no node group rolls, nothing is replaced or removed")
    if changes.node_rolls:
        out.append("   node groups that roll (in this order; each waits for the one before):")
        out += [f"     {describe(r).replace('`', '')}" for r in changes.node_rolls]
    for r in changes.replacements:
        what = "removed" if r.fields == ("(removed)",) else (
            f"replaced by {', '.join(r.fields)}" if r.fields else "may be replaced")
        line = f"   {r.name} ({r.type}): {what}"
        if r.holds is not None:
            line += f"; holds {r.holds}" + (f"; allowed: {r.allowed}" if r.allowed else
                                            "; FAILS (list it under upgrades.allowReplace with a reason to allow it)")
        if r.unknown:
            line += f"; whether {', '.join(r.unknown)} replaces it is not known"
        out.append(line)
    out += [f"   refused: {p.message}" for p in changes.version_problems]
    return "\n".join(out) + "\n"
