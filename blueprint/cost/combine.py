"""``cost diff --combine``: per-stack JSON reports (``cost diff --format json`` of parallel CI jobs) read back, every
field the comment and the guardrails read checked for its JSON type, and the guardrails applied to the sum.

A report is a file another job wrote, so it is read as hostile: a string where a figure goes, a list where an
object goes, ``null`` or ``true`` for a number would otherwise end the tool in an internal error, or be rendered
into the pull-request comment. Each refusal names the file, the key path and what the key must be; NaN and
Infinity are refused by the JSON reader; a stack given twice is refused (its cost would be counted twice).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from blueprint.cost.diff import guardrail_breaches
from blueprint.graph.model import strict_json

Check = Callable[[Any], bool]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_number(v) for v in value)


def _moves(value: Any) -> bool:
    return isinstance(value, dict) and set(value) <= {"desired", "max"} and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values())


def _or_null(check: Check) -> Check:
    return lambda value: value is None or check(value)


_NUMBER, _STRING, _BOOL, _STRINGS = ("a finite number", _number), ("a string", _string), ("true or false", _boolean), \
    ("a list of strings", _strings)
_NUMBER_OR_NULL = ("a finite number or null", _or_null(_number))
_BOOL_OR_NULL = ("true, false or null", _or_null(_boolean))
_STRING_OR_NULL = ("a string or null", _or_null(_string))
# key -> (what it must be, check, required)
Fields = dict[str, tuple[str, Check, bool]]
_LINE: Fields = {k: (*_STRING, True) for k in ("name", "unit", "price_key")} | {
    k: (*_NUMBER, True) for k in ("previous_quantity", "new_quantity")} | {
    k: (*_NUMBER_OR_NULL, True) for k in ("unit_price_usd", "previous_usd", "new_usd")} | {
    k: (*_BOOL, True) for k in ("at_max", "one_time")} | {"bound": (*_STRING, False)}
_RESOURCE: Fields = {k: (*_STRING, True) for k in ("urn", "name", "change")} | {
    k: (*_NUMBER, True) for k in ("previous_monthly_usd", "new_monthly_usd", "previous_monthly_usd_at_max",
                                  "new_monthly_usd_at_max", "previous_one_time_usd", "new_one_time_usd")} | {
    "priced_fully": (*_BOOL, True), "plane": (*_STRING, False), "autoscaled": (*_BOOL_OR_NULL, False),
    "nodes": ("null or [desired, max]", _or_null(_pair), False)}
_CHANGE: Fields = {k: (*_STRING, True) for k in ("urn", "name", "type", "change")} | {"plane": (*_STRING, False)}
_ROLL: Fields = {"node_group": (*_STRING, True), "nodes": (*_NUMBER, True), "reason": (*_STRING, True),
                 "order": (*_NUMBER, True), "interrupts_jobs": (*_BOOL, True),
                 "gpu_hours_at_risk": (*_NUMBER_OR_NULL, False), "how": (*_STRING, True),
                 "when": (*_STRING_OR_NULL, False)}
_REPLACEMENT: Fields = {"name": (*_STRING, True), "type": (*_STRING, True), "urn": (*_STRING, False),
                        "fields": (*_STRINGS, True), "holds_data": (*_BOOL, False), "holds": (*_STRING_OR_NULL, False),
                        "allowed": (*_STRING_OR_NULL, False), "unknown_fields": (*_STRINGS, False)}
_PROBLEM: Fields = {"message": (*_STRING, True)} | {k: (*_STRING_OR_NULL, False) for k in ("what", "key", "rule")}
_REPORT: Fields = {"stack": (*_STRING, True), "currency": (*_STRING_OR_NULL, False)} | {
    k: (*_NUMBER, True) for k in ("previous_monthly_usd", "new_monthly_usd", "diff_monthly_usd",
                                  "previous_monthly_usd_at_max", "new_monthly_usd_at_max",
                                  "diff_monthly_usd_at_max")} | {
    k: (*_NUMBER, False) for k in ("previous_one_time_usd", "new_one_time_usd", "diff_one_time_usd")} | {
    k: (*_NUMBER_OR_NULL, False) for k in ("diff_percent", "diff_percent_at_max")} | {
    k: (*_STRINGS, False) for k in ("unpriced_changes", "stale_prices", "unpriced", "notes", "replaced",
                                   "unpriced_lines", "bounded")} | {
    k: (*_BOOL, False) for k in ("previous_lower_bound", "new_lower_bound")} | {
    k: ("an object of desired and max counts", _moves, False) for k in ("unpriced_rises", "unpriced_falls")}
# Lists of objects: key -> (the object's fields, required).
_LISTS: dict[str, tuple[Fields, bool]] = {"resources": (_RESOURCE, True), "changes": (_CHANGE, False),
                                          "node_rolls": (_ROLL, False), "replacements": (_REPLACEMENT, False),
                                          "version_problems": (_PROBLEM, False)}


def _check(obj: Any, fields: Fields, where: str) -> None:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: must be an object, got {type(obj).__name__ if obj is not None else 'null'}")
    for key, (what, check, required) in fields.items():
        if key not in obj:
            if required:
                raise ValueError(f"{where}.{key}: required ({what})")
            continue
        if not check(obj[key]):
            raise ValueError(f"{where}.{key}: must be {what}, got {_shown(obj[key])}")


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


def check_report(doc: Any, where: str) -> None:
    """One stack's report of the shape ``cost diff --format json`` writes; ValueError naming the key path."""
    _check(doc, _REPORT, where)
    for key, (fields, required) in _LISTS.items():
        if key not in doc and not required:
            continue
        items = doc.get(key)
        if not isinstance(items, list):
            raise ValueError(f"{where}.{key}: must be a list of objects, got {_shown(items)}")
        for i, item in enumerate(items):
            _check(item, fields, f"{where}.{key}[{i}]")
            if key == "resources" and not isinstance(item.get("lines", []), list):
                raise ValueError(f"{where}.{key}[{i}].lines: must be a list of objects, got {_shown(item['lines'])}")
            for j, line in enumerate(item.get("lines", []) if key == "resources" else []):
                _check(line, _LINE, f"{where}.{key}[{i}].lines[{j}]")


def load_documents(texts: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Per-stack JSON reports (``cost diff --format json``), one or a ``{"stacks": [...]}`` of several per file, each
    checked (:func:`check_report`); ValueError names the file and the key path. A stack given twice is refused."""
    docs: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for shown, text in texts:
        try:
            doc = strict_json(text)  # NaN, Infinity, a key given twice and too deep a nesting are refused
        except ValueError as err:
            raise ValueError(f"{shown}: not JSON ({err})") from None
        several = isinstance(doc, dict) and "stacks" in doc
        if several and not isinstance(doc["stacks"], list):
            raise ValueError(f"{shown}: stacks: must be a list of reports, got {_shown(doc['stacks'])}")
        found = doc["stacks"] if several else [doc]
        for i, d in enumerate(found):
            where = f"stacks[{i}]" if several else "(the report)"
            try:
                check_report(d, where)
            except ValueError as err:
                raise ValueError(f"{shown}: not a `blueprint cost diff --format json` report: {err}") from None
            if d["stack"] in seen:
                raise ValueError(f"{shown}: {where}.stack: the stack {d['stack']!r} is also in {seen[d['stack']]}: "
                                 "each stack's report is combined once (its cost would count twice)")
            seen[d["stack"]] = shown
            docs.append(d)
    return docs


def combined_breaches(docs: Sequence[dict[str, Any]], fail_above_usd: float | None,
                      fail_above_percent: float | None) -> list[str]:
    """The guardrails the combined increase crosses (the sum of every stack), at desired and at max size, as
    :func:`blueprint.cost.diff.breaches` says them for one stack."""
    sides = [(where, sum(float(d[f"diff_monthly_usd{suffix}"]) for d in docs),
              sum(float(d[f"previous_monthly_usd{suffix}"]) for d in docs))
             for where, suffix in (("at desired size", ""), ("at max size", "_at_max"))]
    return guardrail_breaches("all stacks", sides, fail_above_usd, fail_above_percent)
