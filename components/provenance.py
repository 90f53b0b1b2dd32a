"""Which key of the stack file each component was built from, recorded on the component so findings can point at
the line a person edits.

A component's props (its inputs in the graph and in Pulumi's state) carry ``specPath``, the key path in the stack
file's config (``gpu-cluster:spec.aws.nodeGroups[1]``), and, for components that build something per team,
``specItems``: each item's name and its own key path (``research`` -> ``gpu-cluster:spec.teams[0]``), so a child
resource whose name carries the item's name is traced to that item. Builders wrap a component's construction in
:func:`from_spec`; components pass :func:`props` to ``ComponentResource.__init__``. Nothing here changes what a
provider receives: only components carry these props.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

SPEC_KEY = "gpu-cluster:spec"
_stack: list[dict[str, Any]] = []


def spec_path(*parts: str | int) -> str:
    """``gpu-cluster:spec.aws.nodeGroups[1]`` from ("aws", "nodeGroups", 1)."""
    out = SPEC_KEY
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


@contextmanager
def from_spec(path: str, items: Mapping[str, str] | None = None) -> Iterator[None]:
    """Components constructed inside come from ``path`` (and per item from ``items``)."""
    _stack.append({"specPath": path, **({"specItems": dict(items)} if items else {})})
    try:
        yield
    finally:
        _stack.pop()


def props() -> dict[str, Any] | None:
    """The props of a component being constructed: where in the stack file it comes from (None outside
    :func:`from_spec`)."""
    return dict(_stack[-1]) if _stack else None


def team_items(team_names: list[str]) -> dict[str, str]:
    """Each team's own key path, by name, in the order of ``teams``."""
    return {name: spec_path("teams", i) for i, name in enumerate(team_names)}
