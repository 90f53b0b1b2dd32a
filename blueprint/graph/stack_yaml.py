"""The YAML of stack files (and of usage and price files given as text), read with the stack files' rules: JSON-only
values, no aliases, no duplicate or non-string keys, bounded nesting; every failure a one-line :class:`StackError`.

Apart from :mod:`blueprint.graph.stackfile` (which validates the spec with its models) so that the readers of a saved
graph (``blueprint cost graph.json --usage FILE``) parse a usage file without loading the spec's models.
"""

from __future__ import annotations

import re
from collections import Counter

import yaml


class StackError(Exception):
    """A stack file that cannot be used; the message is ready to print."""


MAX_YAML_DEPTH = 64


class _YamlRuleError(Exception):
    """A YAML construct stack files do not allow (aliases, duplicate keys, deep nesting, odd keys)."""

    def __init__(self, mark: yaml.Mark | None, problem: str, rule: str) -> None:
        super().__init__(problem)
        self.mark, self.problem, self.rule = mark, problem, rule


class _StackLoader(yaml.SafeLoader):
    """YAML as the Pulumi CLI reads stack files, minus what only hurts here.

    Refused: aliases (``*ref``, which make cycles and billion-laughs bombs possible; Pulumi stack files
    need none), duplicate keys (a second ``environment:`` would silently win), non-string keys and nesting
    deeper than :data:`MAX_YAML_DEPTH`. Timestamps stay strings, as the Pulumi CLI passes them.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise _YamlRuleError(event.start_mark, "aliases (*name) are not allowed in stack files; write the "
                                 "value out", "yaml-no-aliases")
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _YamlRuleError(self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                                     f"nested deeper than {MAX_YAML_DEPTH} levels", "yaml-depth")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                raise _YamlRuleError(key_node.start_mark, "keys must be plain strings", "yaml-key-type")
            if key_node.value in seen:
                raise _YamlRuleError(key_node.start_mark, f"duplicate key '{_clip(key_node.value)}' (the first "
                                     "value would be silently replaced)", "yaml-duplicate-key")
            seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


_StackLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# What a stack file's values may be: what JSON has (Pulumi passes config to the program as JSON). Explicit tags
# that build other objects (!!binary, !!timestamp, !!set, !!omap, !!pairs) are refused with the key path.
_JSON_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq")}
# Numbers reach the program through Pulumi's property values, which are IEEE doubles: integers beyond 2^53 do
# not survive exactly (and Python refuses to parse integers of more than 4,300 digits).
MAX_SAFE_INTEGER = 2**53
_MAX_INT_CHARS = 40


class _ItemName(str):
    """A list item's ``name`` standing for its index in a key path (``nodeGroups[h100]``), as spec errors show it."""


_ITEM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")


def _item_names(items: list[yaml.Node]) -> list[str | int]:
    """Each item of a sequence by its ``name`` when it is a mapping with a plain, unique one; else by its index."""
    names: list[str | None] = []
    for item in items:
        name = None
        if isinstance(item, yaml.MappingNode):
            name = next((str(v.value) for k, v in item.value if isinstance(k, yaml.ScalarNode) and k.value == "name"
                         and isinstance(v, yaml.ScalarNode) and v.tag == "tag:yaml.org,2002:str"), None)
        names.append(name if name is not None and _ITEM_NAME.fullmatch(name) else None)
    counts = Counter(names)
    return [_ItemName(n) if n is not None and counts[n] == 1 else i for i, n in enumerate(names)]


def _key_path(path: list[str | int]) -> str:
    out = ""
    for part in path:
        named = isinstance(part, int | _ItemName)
        out += f"[{part}]" if named else (f".{part}" if out else str(part))
    return out or "(the document)"


def _check_json_scalars(root: yaml.Node, constructor: yaml.constructor.SafeConstructor) -> None:
    """Refuse, with the key path, values JSON cannot carry: non-JSON tags and integers beyond +-2^53."""
    stack: list[tuple[yaml.Node, list[str | int]]] = [(root, [])]
    while stack:
        node, path = stack.pop()
        if node.tag not in _JSON_TAGS:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise _YamlRuleError(node.start_mark, f"{_key_path(path)}: the tag {_clip(tag, 40)} is not allowed: values "
                                 "are strings, numbers, booleans, null, lists and mappings, as in JSON",
                                 "yaml-json-values")
        if isinstance(node, yaml.MappingNode):
            stack += [(value, [*path, str(key.value)]) for key, value in node.value]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(value, [*path, key]) for key, value in zip(_item_names(node.value), node.value, strict=True)]
        elif node.tag == "tag:yaml.org,2002:str" and "\0" in str(node.value):
            # no field holds one; it ends the string where a C library, a shell or a file name reads it
            raise _YamlRuleError(node.start_mark, f"{_key_path(path)}: a NUL character in a string",
                                 "yaml-json-values")
        elif node.tag == "tag:yaml.org,2002:int":
            text = str(node.value)
            value = None if len(text) > _MAX_INT_CHARS else constructor.construct_yaml_int(node)  # type: ignore[arg-type]
            if value is None or abs(value) > MAX_SAFE_INTEGER:
                raise _YamlRuleError(node.start_mark, f"{_key_path(path)}: the integer {_clip(text, 24)} "
                                     f"({len(text):,} characters) is out of range: numbers stay within +-2^53 "
                                     f"({MAX_SAFE_INTEGER:,}), what Pulumi's property values carry exactly",
                                     "yaml-number-range")


def _clip(text: str, limit: int = 80) -> str:
    """A user value, on one line and at most ``limit`` characters, for an error message."""
    flat = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)
    return flat if len(flat) <= limit else flat[:limit] + "..."


def parse_stack_yaml(text: str, shown: str) -> object:
    """Parse stack-file YAML with :class:`_StackLoader`; every failure is a one-line :class:`StackError`."""
    try:
        loader = _StackLoader(text)
    except yaml.reader.ReaderError as err:
        raise StackError(f"{shown}: position {err.position}: not valid YAML: unacceptable character "
                         f"#x{err.character:04x} [rule: yaml-syntax]") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_json_scalars(node, loader)
        return loader.construct_document(node)
    except _YamlRuleError as err:
        where = f"line {err.mark.line + 1}, column {err.mark.column + 1}: " if err.mark is not None else ""
        raise StackError(f"{shown}: {where}{err.problem} [rule: {err.rule}]") from None
    except yaml.reader.ReaderError as err:
        raise StackError(f"{shown}: position {err.position}: not valid YAML: unacceptable character "
                         f"#x{err.character:04x} [rule: yaml-syntax]") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or "cannot be parsed"
        raise StackError(f"{shown}: {where}not valid YAML: {_clip(str(problem), 200)} [rule: yaml-syntax]") from None
    except RecursionError:
        raise StackError(f"{shown}: nested too deeply [rule: yaml-depth]") from None
    finally:
        loader.dispose()
