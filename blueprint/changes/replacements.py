"""Which resources a change replaces, and by which fields: each cloud's table of the inputs whose change makes the
provider replace the resource (``blueprint/clouds/<cloud>/replacements.yaml``, read from the Terraform provider the
pinned Pulumi provider bridges), applied to the resources present before and after. A replaced resource that holds
data or identity (a filesystem, a bucket, the cluster, a KMS key, the accounting database, an IAM role that policies
name) loses it; so does one removed. Both fail the pull-request check unless the stack allows it
(upgrades.allowReplace).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blueprint import clouds
from blueprint.changes.cloud import TypeRules, cloud_changes, inputs_at
from blueprint.graph.model import SECRET, UNKNOWN, ResourceGraph


@dataclass(frozen=True)
class Replacement:
    """A resource the change replaces (or removes), the fields that force it, and what it holds."""

    name: str
    type: str
    urn: str
    fields: tuple[str, ...]  # the fields that force the replacement; ("(removed)",) for a removal
    holds: str | None  # what a replacement loses (data, identity); None: nothing the stack needs
    allowed: str | None = None  # the stack's reason (upgrades.allowReplace), when it lists the resource
    unknown: tuple[str, ...] = ()  # changed fields whose effect the table does not know (not read upstream)

    @property
    def blocks(self) -> bool:
        """Whether the pull-request check fails on it: it holds data or identity and the stack does not allow it."""
        return self.holds is not None and self.allowed is None and bool(self.fields)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``cost diff --format json``: ``replacements``)."""
        return {"name": self.name, "type": self.type, "urn": self.urn, "fields": list(self.fields),
                "holds_data": self.holds is not None, "holds": self.holds, "allowed": self.allowed,
                "unknown_fields": list(self.unknown)}


def _known(value: Any) -> bool:
    return value not in (UNKNOWN, SECRET)


def _norm(value: Any) -> str:
    """A comparable form: lists of scalars as sets (the provider's sets are unordered)."""
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return json.dumps(sorted(map(str, value)))
    return json.dumps(value, sort_keys=True)


def _block(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))


def _changed(old: Any, new: Any) -> bool:
    """Whether a replacing field changed as the provider sees it: a block by its presence (its own ForceNew covers
    adding or removing it), any other value by its value; a value unknown before apply is not claimed."""
    if not (_known(old) and _known(new)):
        return False
    if _block(old) or _block(new):
        count = (len(old) if isinstance(old, list) else 1 if old is not None else 0,
                 len(new) if isinstance(new, list) else 1 if new is not None else 0)
        return count[0] != count[1]
    return _norm(old) != _norm(new)


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _conditional(when: str, old: Any, new: Any) -> bool:
    if not (_known(old) and _known(new)):
        return False
    if when == "decrease":
        a, b = _number(old), _number(new)
        return a is not None and b is not None and b < a
    if when == "not-containing":  # a CIDR: replaced unless the new range holds the old one (expansion is in place)
        try:
            before, after = ipaddress.ip_network(str(old), strict=False), ipaddress.ip_network(str(new), strict=False)
        except ValueError:
            return False
        return before.version != after.version or not before.subnet_of(after)  # type: ignore[arg-type]
    if when == "removal":
        return bool(old) and not new
    if when == "region":
        return old is not None and new is not None and old != new
    return False


def _ignored(field: str, ignore_changes: Sequence[str]) -> bool:
    """Whether the engine keeps the old value of ``field`` (the resource's ignoreChanges names it or a block
    around it: ``name``, ``launchTemplate``; list indices as in ``a[0].b`` are read as ``a.b``)."""
    for path in ignore_changes:
        plain = re.sub(r"\[\d+\]", "", path)
        if field == plain or field.startswith(plain + "."):
            return True
    return False


def forcing_fields(rules: TypeRules, before: dict[str, Any], after: dict[str, Any],
                   ignore_changes: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(the fields whose change replaces the resource, the changed fields the table has no reading of); a field
    under the resource's ignoreChanges is never sent again, so it replaces nothing (a rename keeps a bucket)."""
    def changed(f: str) -> bool:
        return not _ignored(f, ignore_changes) and _changed(inputs_at(before, f), inputs_at(after, f))

    fields = [f for f in rules.replace if changed(f)]
    fields += [f for f, (when, _) in rules.conditional.items()
               if not _ignored(f, ignore_changes) and _conditional(when, inputs_at(before, f), inputs_at(after, f))]
    unknown = [f for f in rules.unread if changed(f)]
    return sorted(set(fields)), unknown


def replacements(old: ResourceGraph, new: ResourceGraph,
                 allowed: Mapping[str, str] | None = None) -> list[Replacement]:
    """Every resource of a cloud's type the change replaces, and every data- or identity-holding one it removes,
    by URN."""
    allowed = allowed or {}
    cloud = clouds.of_types(r.type for r in [*new.resources, *old.resources])
    if cloud is None:
        return []
    part = cloud_changes(cloud)
    rules = part.replacement_rules()
    before = {r.urn: r for r in old.resources}
    after = {r.urn: r for r in new.resources}
    out: list[Replacement] = []
    for urn in sorted(before.keys() | after.keys()):
        was, now = before.get(urn), after.get(urn)
        res = now or was
        assert res is not None
        type_rules = rules.get(res.type)
        if was is not None and now is not None and type_rules is not None:
            fields, unknown = forcing_fields(type_rules, was.inputs, now.inputs, now.ignore_changes or ())
            if fields or unknown:
                out.append(Replacement(res.name, res.type, urn, tuple(fields), part.holds_data(old, was) if fields
                                       else None, allowed.get(res.name), tuple(unknown)))
        elif was is not None and now is None and clouds.of_type(was.type) is not None:
            holds = part.holds_data(old, was)
            if holds is not None:
                out.append(Replacement(was.name, was.type, urn, ("(removed)",), holds, allowed.get(was.name)))
    return out


def replaced_urns(found: list[Replacement]) -> set[str]:
    """URNs the change replaces (not removals), for the change list's classification."""
    return {r.urn for r in found if r.fields and r.fields != ("(removed)",)}


def describe(r: Replacement) -> str:
    """One line for people."""
    what = "removed" if r.fields == ("(removed)",) else f"replaced (by {', '.join(r.fields)})"
    text = f"`{r.name}` ({r.type}) is {what}"
    if r.holds is not None:
        text += f": it holds {r.holds}"
        text += f"; allowed: {r.allowed}" if r.allowed else ", which the replacement loses"
    if r.unknown:
        text += f"; whether {', '.join(r.unknown)} replaces it is not known (not read upstream)"
    return text
