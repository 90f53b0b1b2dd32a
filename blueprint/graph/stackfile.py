"""Read a stack file (``stacks/Pulumi.<env>.yaml``) the way Pulumi does, with clear errors.

Every failure, from a missing file to a bad spec, is a :class:`StackError` whose message names the
file, the key path and the rule; the command-line tool prints it and exits with status 2.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from blueprint.files.input import InputTooLargeError, read_limited
from components.spec import SPEC_KEY, ClusterSpec, SpecError, parse_spec
from components.spec.providers import PROVIDER_PROJECT_KEYS, PROVIDER_REGION_KEYS

# The source tree's stacks; an installed ``blueprint`` reads ``./stacks`` of the project it runs in.
STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"


def default_stacks_dir() -> Path:
    """``./stacks`` when the current directory is a Pulumi project of this blueprint, else the source tree's."""
    here = Path.cwd() / "stacks"
    return here if here.is_dir() else STACKS_DIR


class StackError(Exception):
    """A stack file that cannot be used; the message is ready to print."""


MAX_STACK_FILE_BYTES = 1024 * 1024
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


@dataclass(frozen=True)
class StackFile:
    """A loaded and validated stack file."""

    name: str
    path: Path
    display_path: str
    config: dict[str, Any]
    spec: ClusterSpec

    @property
    def region(self) -> str:
        """The region the stack deploys to (its cloud's)."""
        return self.spec.region


def available_stacks(stacks_dir: Path | None = None) -> list[str]:
    """Stack names that have a file in ``stacks/``."""
    stacks_dir = stacks_dir or default_stacks_dir()
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stacks_dir.glob("Pulumi.*.yaml"))


def resolve(stack: str, stacks_dir: Path | None = None) -> tuple[str, Path]:
    """A stack name (``prod-aws``) or a path to a stack file, as (stack name, path)."""
    stacks_dir = stacks_dir or default_stacks_dir()
    candidate = Path(stack)
    if candidate.suffix in (".yaml", ".yml"):
        name = candidate.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        return name, candidate
    return stack, stacks_dir / f"Pulumi.{stack}.yaml"


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_stack(stack: str, stacks_dir: Path | None = None) -> StackFile:
    """Load, parse and validate a stack; raise :class:`StackError` with a clear message otherwise."""
    stacks_dir = stacks_dir or default_stacks_dir()
    name, path = resolve(stack, stacks_dir)
    shown = _display(path)
    if not path.is_file():
        known = ", ".join(available_stacks(stacks_dir)) or "none"
        raise StackError(f"{shown}: stack file not found (stacks in {_display(stacks_dir)}: {known})")
    try:
        data = read_limited(path, MAX_STACK_FILE_BYTES)
    except InputTooLargeError:
        raise StackError(f"{shown}: more than {MAX_STACK_FILE_BYTES:,} bytes; a stack file is at most "
                         f"{MAX_STACK_FILE_BYTES:,} bytes [rule: stack-file-size]") from None
    except OSError as err:
        raise StackError(f"{shown}: cannot be read: {err.strerror or err} [rule: stack-file-readable]") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StackError(f"{shown}: not UTF-8 text [rule: yaml-syntax]") from None
    doc = parse_stack_yaml(text, shown)
    if not isinstance(doc, dict):
        raise StackError(f"{shown}: a stack file is a mapping with a 'config' key [rule: stack-file-shape]")
    config = doc.get("config")
    if not isinstance(config, dict):
        raise StackError(f"{shown}: config: required mapping is missing [rule: stack-file-shape]")
    if SPEC_KEY not in config:
        raise StackError(f"{shown}: config.{SPEC_KEY}: required key is missing [rule: schema-required-key]")
    raw_spec = config[SPEC_KEY]
    region_key = PROVIDER_REGION_KEYS.get(str(raw_spec.get("cloud"))) if isinstance(raw_spec, dict) else None
    region = config.get(region_key) if region_key is not None else None
    if region is not None and not isinstance(region, str):
        raise StackError(f"{shown}: config.{region_key}: must be a string [rule: schema-type]")
    project_key = PROVIDER_PROJECT_KEYS.get(str(raw_spec.get("cloud"))) if isinstance(raw_spec, dict) else None
    project = config.get(project_key) if project_key is not None else None
    if project is not None and not isinstance(project, str):
        raise StackError(f"{shown}: config.{project_key}: must be a string [rule: schema-type]")
    try:
        spec = parse_spec(config[SPEC_KEY], shown, provider_region=region, provider_project=project)
    except SpecError as err:
        raise StackError(str(err)) from None
    return StackFile(name=name, path=path, display_path=shown, config=dict(config), spec=spec)
