"""How a broken rule is reported: one line per issue, naming the stack file, the key path and the rule.

A list item with a ``name`` is named by it in key paths (``aws.nodeGroups[h100].maxSize``, ``teams[research]``), as
people find it in the file; an item without one, or whose name is not a plain word or is not unique in its list,
keeps its index (``teams[research].quotas[0]``). Unknown keys and enum values that are close to allowed ones get
"did you mean".
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from components.spec.base import SPEC_KEY

# --- errors -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecIssue:
    """One broken rule: where (key path), which rule, and the requirement in words."""

    path: str
    rule: str
    message: str


# What an error may echo: a line is at most this long, a rule repeats at most this often, and the whole
# report has at most this many lines (1,000 copies of one subnet would otherwise print 100 MB).
MAX_LINE = 500
MAX_PER_RULE = 10
MAX_LINES = 60


class SpecError(Exception):
    """A stack file that cannot be built; ``str()`` lists the issues, one per line, within the caps above."""

    def __init__(self, stack_file: str, issues: list[SpecIssue], totals: Mapping[str, int] | None = None) -> None:
        self.stack_file = stack_file
        self.issues = issues
        self.totals = dict(totals or {})
        super().__init__(self.render())

    def render(self) -> str:
        """One line per issue: ``<file>: <key path>: <message> [rule: <rule>]``; repeats are summarised."""
        lines: list[str] = []
        shown: dict[str, int] = {}
        hidden: dict[str, int] = {}
        for i in self.issues:
            if shown.get(i.rule, 0) >= MAX_PER_RULE or len(lines) >= MAX_LINES:
                hidden[i.rule] = hidden.get(i.rule, 0) + 1
                continue
            shown[i.rule] = shown.get(i.rule, 0) + 1
            lines.append(_clip(_one_line(f"{self.stack_file}: {i.path}: {i.message}"), MAX_LINE)
                         + f" [rule: {i.rule}]")
        for rule in self.totals:
            if self.totals[rule] > shown.get(rule, 0):
                hidden[rule] = self.totals[rule] - shown.get(rule, 0)
        for rule, count in hidden.items():
            lines.append(f"{self.stack_file}: {SPEC_KEY}: {count} more problem(s) of this rule not shown "
                         f"[rule: {rule}]")
        return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # what str.splitlines splits on, and controls
# A name shown in place of an index: a plain word that starts with a letter (never read as an index), not too long.
_ITEM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")


class _Name(str):
    """A list item's name standing for its index in a key path: rendered ``[name]``."""


def _path(loc: Iterable[int | str], root: str = SPEC_KEY) -> str:
    """``root.key[0].other``; keys that are not plain identifiers are quoted: ``labels["a b"]``; a list item named
    by :class:`_Name` is ``[name]``."""
    out = root
    for part in loc:
        if isinstance(part, int | _Name):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}"
        else:
            out += "[" + json.dumps(part) + "]"
    return out


# A relative key path as the rules write it: .key, [0] or ["quoted key"], repeated.
_PATH_PART = re.compile(r'\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def _parse_path(text: str) -> list[int | str] | None:
    """The parts of a relative key path (``.aws.nodeGroups[1].labels["a b"]``), or None when it is not one."""
    parts: list[int | str] = []
    pos = 0
    while pos < len(text):
        m = _PATH_PART.match(text, pos)
        if m is None:
            return None
        key, index, quoted = m.groups()
        if quoted is not None:
            try:
                key = str(json.loads(quoted))
            except ValueError:
                return None
        parts.append(key if key is not None else int(index))
        pos = m.end()
    return parts


@cache
def _model_keys(cls: type[BaseModel]) -> dict[str, str]:
    """A model's keys as written (aliases) and by field name, to the field name."""
    keys = {name: name for name in cls.model_fields}
    keys.update({f.alias: name for name, f in cls.model_fields.items() if f.alias})
    return keys


def _child(node: Any, part: int | str) -> Any:
    """What ``part`` holds in a raw tree (mappings and lists, keys as written) or a model tree; None if nothing."""
    if isinstance(part, int):
        return node[part] if isinstance(node, Sequence) and not isinstance(node, str) and 0 <= part < len(node) \
            else None
    if isinstance(node, Mapping):
        return node.get(part)
    if isinstance(node, BaseModel):
        name = _model_keys(type(node)).get(part)
        return getattr(node, name) if name is not None else None
    return None


def _item_name(item: Any) -> str | None:
    """A list item's ``name`` when it has one that can stand for its index."""
    if isinstance(item, Mapping):
        name = item.get("name")
    elif isinstance(item, BaseModel) and "name" in type(item).model_fields:
        name = getattr(item, "name", None)
    else:
        return None
    return name if isinstance(name, str) and _ITEM_NAME.fullmatch(name) else None


class _Namer:
    """Names list items in key paths by walking the spec they point into (raw input or the parsed model)."""

    def __init__(self, root: Any) -> None:
        self._root = root
        self._counts: dict[int, tuple[Sequence[Any], dict[str, int]]] = {}

    def _unique(self, items: Sequence[Any], name: str) -> bool:
        known = self._counts.get(id(items))
        if known is None or known[0] is not items:
            counts: dict[str, int] = {}
            for item in items:
                if (other := _item_name(item)) is not None:
                    counts[other] = counts.get(other, 0) + 1
            known = self._counts[id(items)] = (items, counts)
        return known[1].get(name) == 1

    def loc(self, loc: Iterable[int | str]) -> list[int | str]:
        """``loc`` with each index of a uniquely named item replaced by its :class:`_Name`."""
        out: list[int | str] = []
        node = self._root
        for part in loc:
            child = _child(node, part) if node is not None else None
            if isinstance(part, int) and child is not None and (name := _item_name(child)) is not None \
                    and self._unique(node, name):
                out.append(_Name(name))
            else:
                out.append(part)
            node = child
        return out

    def path(self, relative: str) -> str:
        """A rule's relative key path (``.teams[0].budget``) as shown: ``gpu-cluster:spec.teams[research].budget``."""
        parts = _parse_path(relative)
        return _path([]) + relative if parts is None else _path(self.loc(parts))


def named_path(spec: BaseModel, relative: str) -> str:
    """The key path a user sees for a place in a parsed spec: ``named_path(spec, ".teams[0]")`` is
    ``gpu-cluster:spec.teams[research]`` (preview warnings name items as errors do)."""
    return _Namer(spec).path(relative)


def _one_line(text: str) -> str:
    """Escape control characters from user input so that each issue stays on one line."""
    return _CONTROL.sub(lambda m: json.dumps(m.group())[1:-1], text)


_PYDANTIC_RULES = {
    "missing": ("schema-required-key", "required key is missing"),
    "extra_forbidden": ("schema-unknown-key", "unknown key"),
}


def _flatten(annotation: Any) -> list[Any]:
    """The types an annotation admits: unions and ``Optional`` split, ``Annotated`` (``StrictInt``) unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return [t for arg in typing.get_args(annotation) for t in _flatten(arg)]
    if origin is typing.Annotated:
        return _flatten(typing.get_args(annotation)[0])
    return [annotation]


def _types_at(root: type[BaseModel], loc: Iterable[int | str]) -> list[Any]:
    """The types the models allow at ``loc`` (keys as written), following models, lists and mappings."""
    current: list[Any] = [root]
    for part in loc:
        found: list[Any] = []
        for t in current:
            origin = typing.get_origin(t)
            if isinstance(part, str) and isinstance(t, type) and issubclass(t, BaseModel):
                name = _model_keys(t).get(part)
                if name is not None:
                    found += _flatten(t.model_fields[name].annotation)
            elif isinstance(part, str) and origin is dict:
                found += _flatten(typing.get_args(t)[1])
            elif isinstance(part, int) and origin is list:
                found += _flatten(typing.get_args(t)[0])
        current = found
    return current


def _without_member_tags(root: type[BaseModel], loc: list[int | str]) -> list[int | str]:
    """``loc`` less the tags pydantic gives the members of a union of scalars (``monthlyUsd.int``, ``.float``): a
    key below a value that is neither a model nor a mapping."""
    out: list[int | str] = []
    for part in loc:
        below = _types_at(root, out)
        scalar = below and not any(typing.get_origin(t) is dict or (isinstance(t, type) and issubclass(t, BaseModel))
                                   for t in below)
        if not (isinstance(part, str) and scalar):
            out.append(part)
    return out


def _allowed_keys(root: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys (as written) of the mapping that holds ``loc``'s last key."""
    keys: list[str] = []
    for t in _types_at(root, loc[:-1]):
        if isinstance(t, type) and issubclass(t, BaseModel):
            keys += [f.alias or name for name, f in t.model_fields.items()]
    return keys


def _allowed_values(root: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The string values an enum (``Literal``) at ``loc`` allows."""
    values: list[str] = []
    for t in _types_at(root, loc):
        if typing.get_origin(t) is typing.Literal:
            values += [v for v in typing.get_args(t) if isinstance(v, str)]
    return values


def _fold(word: str) -> str:
    """What a near-miss ignores: case, '-' and '_' (``max_size`` and ``MaxSize`` are ``maxSize``)."""
    return word.lower().replace("-", "").replace("_", "")


def did_you_mean(word: object, choices: Sequence[str]) -> str:
    """``"; did you mean maxSize?"`` naming the closest of ``choices`` (up to three), or ``""`` when none is close.

    Close: a similarity of at least 0.75 (difflib) once case, '-' and '_' are ignored (``maxSzie``, ``max_size``), or
    one word starting with the other (``production`` and ``prod``; three characters at least)."""
    if not isinstance(word, str) or not choices:
        return ""
    typed = _fold(word[:200])
    folded: dict[str, str] = {}
    for choice in choices:
        folded.setdefault(_fold(choice), choice)
    similar = difflib.get_close_matches(typed, list(folded), n=3, cutoff=0.75)
    prefixed = [f for f in folded if min(len(f), len(typed)) >= 3 and (f.startswith(typed) or typed.startswith(f))]
    close = [folded[f] for f in dict.fromkeys(similar + prefixed)][:3]
    if not close:
        return ""
    shown = close[0] if len(close) == 1 else ", ".join(close[:-1]) + " or " + close[-1]
    return f"; did you mean {shown}?"


def _issues_from_validation(err: ValidationError, raw: Any = None,
                            root: type[BaseModel] | None = None) -> list[SpecIssue]:
    """One issue per pydantic error; list items named from ``raw`` (the input), suggestions from ``root``'s
    fields."""
    issues: list[SpecIssue] = []
    namer = _Namer(raw)
    for e in err.errors(include_url=False):
        rule, message = _PYDANTIC_RULES.get(e["type"], ("schema-type", e["msg"]))
        if e["type"] == "value_error":
            message = str(e["ctx"]["error"]) if "ctx" in e else e["msg"]
        # pydantic tags union/literal members in the location; keep only real keys and indices
        loc = [p for p in e["loc"] if isinstance(p, int) or not str(p).startswith(("function-", "literal["))]
        if root is not None:
            loc = _without_member_tags(root, loc)
        if root is not None and loc and e["type"] == "extra_forbidden":
            message += did_you_mean(loc[-1], _allowed_keys(root, loc))
        elif root is not None and e["type"] == "literal_error":
            message += did_you_mean(e.get("input"), _allowed_values(root, loc))
        issues.append(SpecIssue(_path(namer.loc(loc)), rule, message))
    return issues


class _Collector:
    """Issues of the cross-field rules; keeps the first few of each rule, counts the rest."""

    def __init__(self, spec: BaseModel | None = None) -> None:
        self.issues: list[SpecIssue] = []
        self._per_rule: dict[str, int] = {}
        self._namer = _Namer(spec)

    @property
    def totals(self) -> dict[str, int]:
        """How many issues each rule found, shown or not."""
        return dict(self._per_rule)

    def add(self, path: str, rule: str, message: str) -> None:
        """Record a broken rule at ``path`` (relative: ``.aws.nodeGroups[1].maxSize``; items are named when shown)."""
        seen = self._per_rule[rule] = self._per_rule.get(rule, 0) + 1
        if seen <= MAX_PER_RULE + 1:  # one more than shown, so the summary line knows there are more
            # A value quoted in a message may hold control characters: shown escaped, one issue stays one line.
            shown = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), message)
            self.issues.append(SpecIssue(self._namer.path(path), rule, shown))

    def ref(self, relative: str) -> str:
        """A relative key path as a message quotes it: ``.teams[0].roleArns[1]`` is ``teams[research].roleArns[1]``."""
        return self._namer.path(relative).removeprefix(_path([]) + ".")
