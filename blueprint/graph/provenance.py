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


def _key_line(node: yaml.MappingNode, token: str) -> int | None:
    return next((key.start_mark.line + 1 for key, _ in node.value
                 if isinstance(key, yaml.ScalarNode) and key.value == token), None)


@dataclass(frozen=True)
class Located:
    """A key path and the line it was found at (the deepest part of it the file has; 1 when none)."""

    path: str
    line: int
    exact: bool  # the whole path was found (not only an ancestor of it)


def locate(text: str, path: str) -> Located:
    """The line of ``path`` in a stack file's text: the key's line for a mapping key, the item's first line for a
    list item; the deepest ancestor found when the file lacks the rest (a default the file does not write)."""
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
    line = _key_line(config, key)
    node = _child(config, key)
    if line is None or node is None:
        return Located(path, 1, False)
    for token in tokens:
        child = _child(node, token)
        if child is None:
            return Located(path, line, False)
        line = (_key_line(node, token) if isinstance(node, yaml.MappingNode) else None) \
            or child.start_mark.line + 1
        node = child
    return Located(path, line, True)
