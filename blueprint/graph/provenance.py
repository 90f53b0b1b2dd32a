"""From a resource of the graph to the line of the stack file a person edits.

The program marks each component with the key of the stack file it was built from (``specPath``, and per item
``specItems``: components/provenance.py). A resource's key is its nearest marked ancestor's, narrowed to an item
when the resource's name carries the item's name as a dash-separated part (``tenancy-ns-research`` ->
``gpu-cluster:spec.teams[0]``). The key path is then found in the stack file's YAML (the node's line), so SARIF and
text findings can say ``stacks/Pulumi.prod-aws.yaml:57``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from blueprint.graph.model import GraphResource, ResourceGraph

SPEC_KEY = "gpu-cluster:spec"
_TOKEN = re.compile(r"\.([^.\[\]]+)|\[([^\]]+)\]")


def spec_path_of(graph: ResourceGraph, res: GraphResource | None) -> str:
    """The stack-file key a resource comes from (``gpu-cluster:spec`` when no component says)."""
    if res is None:
        return SPEC_KEY
    chain = [res, *graph.ancestors(res)]
    names = [r.name for r in chain]
    for node in chain:
        path = node.inputs.get("specPath") if node.is_component else None
        if not isinstance(path, str) or not path:
            continue
        items = node.inputs.get("specItems")
        if isinstance(items, dict):
            found = [(len(item), str(where)) for item, where in items.items() if isinstance(item, str) and any(
                re.search(rf"(^|-){re.escape(item)}(-|$)", name) for name in names[:chain.index(node)])]
            if found:
                return max(found)[1]
        return path
    return SPEC_KEY


def _tokens(path: str) -> tuple[str, list[str]] | None:
    """(config key, the keys and [indexes] after it) of ``gpu-cluster:spec.aws.nodeGroups[1].maxSize``."""
    match = re.match(r"^([^.\[\]]+)", path)
    if match is None:
        return None
    rest, tokens = path[match.end():], []
    pos = 0
    while pos < len(rest):
        token = _TOKEN.match(rest, pos)
        if token is None:
            return None
        tokens.append(token.group(1) if token.group(1) is not None else f"[{token.group(2)}]")
        pos = token.end()
    return match.group(1), tokens


def _child(node: yaml.Node, token: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode) and not token.startswith("["):
        return next((value for key, value in node.value if isinstance(key, yaml.ScalarNode) and key.value == token),
                    None)
    if isinstance(node, yaml.SequenceNode) and token.startswith("["):
        inner = token[1:-1]
        if inner.isdigit():
            index = int(inner)
            return node.value[index] if index < len(node.value) else None
        for item in node.value:  # a list item named by its name: nodeGroups[h100]
            if isinstance(item, yaml.MappingNode) and any(
                    isinstance(k, yaml.ScalarNode) and k.value == "name" and isinstance(v, yaml.ScalarNode)
                    and v.value == inner for k, v in item.value):
                return item
    return None


def _key_node(node: yaml.MappingNode, token: str) -> yaml.Node | None:
    return next((key for key, _ in node.value if isinstance(key, yaml.ScalarNode) and key.value == token), None)


@dataclass(frozen=True)
class Located:
    """Where a key path is in a stack file: the deepest part of it the file writes (``found``; ``exact`` when that is
    the whole path), its 1-based line and column (the key's, or a list item's first), and where that region ends (the
    value's end for a scalar or a one-line collection, else the key's own end). Line 1 when nothing is found."""

    path: str
    line: int
    exact: bool  # the whole path was found (not only an ancestor of it)
    found: str = ""
    column: int = 1
    end_line: int = 1
    end_column: int = 1


def _located(path: str, found: str, exact: bool, start: yaml.Node, value: yaml.Node) -> Located:
    """From ``start`` (a key, or a list item) to the end of ``value`` when that is a scalar or a flow collection;
    else to the key's end (a block item: its start alone)."""
    if isinstance(value, yaml.ScalarNode) or getattr(value, "flow_style", False):
        end = value.end_mark
    else:
        end = start.end_mark if isinstance(start, yaml.ScalarNode) and start is not value else start.start_mark
    return Located(path, start.start_mark.line + 1, exact, found, start.start_mark.column + 1, end.line + 1,
                   end.column + 1)


def locate(text: str, path: str) -> Located:
    """Where ``path`` is in a stack file's text: the key for a mapping key, the item for a list item; the deepest
    ancestor found when the file lacks the rest (a default the file does not write)."""
    parsed = _tokens(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        root = None
    if parsed is None or not isinstance(root, yaml.MappingNode):
        return Located(path, 1, False)
    config = _child(root, "config")
    if not isinstance(config, yaml.MappingNode):
        return Located(path, 1, False)
    key, tokens = parsed
    start = _key_node(config, key)
    node = _child(config, key)
    if start is None or node is None:
        return Located(path, 1, False)
    found = key
    for token in tokens:
        child = _child(node, token)
        if child is None:
            return _located(path, found, False, start, node)
        start = (_key_node(node, token) if isinstance(node, yaml.MappingNode) else None) or child
        found += token if token.startswith("[") else f".{token}"
        node = child
    return _located(path, found, True, start, node)
