"""How a broken rule is reported: one line per issue, naming the stack file, the key path and the rule."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

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


def _path(loc: Iterable[int | str], root: str = SPEC_KEY) -> str:
    """``root.key[0].other``; keys that are not plain identifiers are quoted: ``labels["a b"]``."""
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}"
        else:
            out += "[" + json.dumps(part) + "]"
    return out


def _one_line(text: str) -> str:
    """Escape control characters from user input so that each issue stays on one line."""
    return _CONTROL.sub(lambda m: json.dumps(m.group())[1:-1], text)


_PYDANTIC_RULES = {
    "missing": ("schema-required-key", "required key is missing"),
    "extra_forbidden": ("schema-unknown-key", "unknown key"),
}


def _issues_from_validation(err: ValidationError) -> list[SpecIssue]:
    issues: list[SpecIssue] = []
    for e in err.errors(include_url=False):
        rule, message = _PYDANTIC_RULES.get(e["type"], ("schema-type", e["msg"]))
        if e["type"] == "value_error":
            message = str(e["ctx"]["error"]) if "ctx" in e else e["msg"]
        # pydantic tags union/literal members in the location; keep only real keys and indices
        loc = [p for p in e["loc"] if isinstance(p, int) or not str(p).startswith(("function-", "literal["))]
        issues.append(SpecIssue(_path(loc), rule, message))
    return issues


class _Collector:
    """Issues of the cross-field rules; keeps the first few of each rule, counts the rest."""

    def __init__(self) -> None:
        self.issues: list[SpecIssue] = []
        self._per_rule: dict[str, int] = {}

    @property
    def totals(self) -> dict[str, int]:
        """How many issues each rule found, shown or not."""
        return dict(self._per_rule)

    def add(self, path: str, rule: str, message: str) -> None:
        seen = self._per_rule[rule] = self._per_rule.get(rule, 0) + 1
        if seen <= MAX_PER_RULE + 1:  # one more than shown, so the summary line knows there are more
            # A value quoted in a message may hold control characters: shown escaped, one issue stays one line.
            shown = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), message)
            self.issues.append(SpecIssue(_path([]) + path, rule, shown))
