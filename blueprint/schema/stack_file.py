"""``blueprint schema``: the JSON Schema of a stack file, and the spec reference generated from it.

Editors complete and check stack files with the schema: each shipped stack's first line is
``# yaml-language-server: $schema=../blueprint/schemas/stack-file.schema.json``, which the YAML language server
(VS Code's YAML extension, Neovim, JetBrains, Helix ...) reads. The schema is generated from the pydantic models of
``components/spec`` (keys as people write them: the camelCase aliases; every field's description, default, unit,
enum and bounds), so it cannot drift from what ``parse_spec`` accepts; the cross-field rules (``components/spec/
rules``) stay the preview's.

It is JSON Schema draft-07, not 2020-12 (what pydantic emits): draft-07 is what yaml-language-server validates and
completes with (it ships ajv's draft-07; its 2019-09/2020-12 support was merged and reverted,
redhat-developer/yaml-language-server #1006 and #1112), and jsonschema checks it the same way. So definitions live
under ``definitions`` and a ``$ref`` that carries a description or default is wrapped in ``allOf`` (draft-07 ignores
a ``$ref``'s siblings).

    blueprint schema [-o FILE]                     the JSON Schema (standard output by default)
    blueprint schema --format markdown [-o FILE]   the spec reference (docs/spec-reference.md)

``python -m blueprint.schema`` does the same without the ``blueprint`` command.
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from blueprint.files.output import OutputError, check_output_file, output_file_argument, write_atomic

if TYPE_CHECKING:
    from pydantic import BaseModel

# The models (and pydantic) are imported when a schema is generated, not when the command is registered: the
# `blueprint` command loads this module for every sub-command, and `blueprint policy graph.json` needs no spec.
SPEC_KEY = "gpu-cluster:spec"  # components.spec.base.SPEC_KEY (a test holds them equal)
ROOT_MODEL = "ClusterSpec"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schemas" / "stack-file.schema.json"
# Where the shipped files sit in the repository, for the regenerate commands.
SCHEMA_PATH = "blueprint/schemas/stack-file.schema.json"
REFERENCE_PATH = "docs/spec-reference.md"
REGENERATE_SCHEMA = f"python -m blueprint.schema -o {SCHEMA_PATH}"
REGENERATE_REFERENCE = f"python -m blueprint.schema --format markdown -o {REFERENCE_PATH}"

_OTHER_NAMESPACES = r"^(?!gpu-cluster:)[A-Za-z0-9_.-]+:.+$"


def _provider_keys() -> dict[str, dict[str, Any]]:
    """The stack file's other config keys: the providers' settings the shipped stacks set. Other providers' keys
    (aws:profile, kubernetes:...) are allowed; another gpu-cluster: key is a typo the program would never read."""
    from components.spec.providers import provider_keys_schema

    return provider_keys_schema()


def _generator() -> type[Any]:
    """pydantic's generator without the titles it derives from field names ("Maxsize"): the key is the name."""
    from pydantic.json_schema import GenerateJsonSchema

    class Generator(GenerateJsonSchema):
        def field_title_should_be_set(self, schema: Any) -> bool:
            return False

    return Generator


def _models(root: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """Every model reachable from ``root`` through its fields, each once."""
    from pydantic import BaseModel

    from components.spec.errors import _flatten

    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        yield model
        for field in model.model_fields.values():
            stack = _flatten(field.annotation)
            while stack:
                t = stack.pop()
                if isinstance(t, type) and issubclass(t, BaseModel):
                    todo.append(t)
                else:
                    stack += [a for arg in typing.get_args(t) for a in _flatten(arg)]


def _factory_defaults(root: type[BaseModel], defs: dict[str, Any]) -> None:
    """pydantic leaves out defaults made by a ``default_factory``; written as people would write them (a model's
    own defaults are ``{}``)."""
    from pydantic import BaseModel, TypeAdapter

    for model in _models(root):
        properties = defs[model.__name__].get("properties", {})
        for name, field in model.model_fields.items():
            if field.default_factory is None:
                continue
            value = field.get_default(call_default_factory=True, validated_data={})
            if isinstance(value, BaseModel):
                default = value.model_dump(mode="json", by_alias=True, exclude_defaults=True)
            else:
                default = TypeAdapter[Any](field.annotation or Any).dump_python(value, mode="json", by_alias=True)
            properties[field.alias or name]["default"] = default


_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def _draft07(node: Any) -> Any:
    """pydantic's 2020-12 output as draft-07: ``$ref`` with siblings wrapped in ``allOf``; bounds pydantic could not
    place on a union of numbers (``gt``, ``le``) written as JSON Schema keywords; no titles."""
    if isinstance(node, list):
        return [_draft07(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {_BOUNDS.get(k, k): _draft07(v) for k, v in node.items() if k != "title"}
    if "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


def spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of ``gpu-cluster:spec`` alone: ``ClusterSpec`` and its parts under
    ``definitions``."""
    from components.spec.model import ClusterSpec

    root = ClusterSpec.model_json_schema(by_alias=True, ref_template="#/definitions/{model}",
                                         schema_generator=_generator())
    defs: dict[str, Any] = root.pop("$defs")
    defs[ROOT_MODEL] = root
    _factory_defaults(ClusterSpec, defs)
    return {"definitions": {name: _draft07(defs[name]) for name in sorted(defs)}}


def stack_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of a stack file ``stacks/Pulumi.<stack>.yaml``: ``config`` holds
    ``gpu-cluster:spec`` (the whole :class:`ClusterSpec`) and the providers' keys."""
    config = {
        "type": "object",
        "description": "The stack's configuration: the blueprint's spec and the cloud provider's settings.",
        "properties": {SPEC_KEY: {"allOf": [{"$ref": f"#/definitions/{ROOT_MODEL}"}],
                                  "description": "Everything the program builds (components/spec, ClusterSpec)."},
                       **_provider_keys()},
        "patternProperties": {_OTHER_NAMESPACES: {"description": "Another provider's setting (namespace:key)."}},
        "additionalProperties": False,
        "required": [SPEC_KEY],
    }
    return {
        "$schema": DRAFT_07,
        "$comment": f"Generated from components/spec by `{REGENERATE_SCHEMA}`; do not edit.",
        "title": "GPU cluster blueprint stack file (stacks/Pulumi.<stack>.yaml)",
        "description": "A Pulumi stack file of the GPU cluster blueprint. Pulumi's own stack settings "
        "(secretsprovider, encryptedkey, encryptionsalt, environment) are allowed beside config.",
        "type": "object",
        "properties": {"config": config},
        "required": ["config"],
        **spec_schema(),
    }


def render_schema(schema: dict[str, Any] | None = None) -> str:
    """The schema as the shipped file holds it: two-space JSON, ASCII, a final newline."""
    return json.dumps(schema if schema is not None else stack_file_schema(), indent=2) + "\n"


# --- the spec reference ---------------------------------------------------------------------------------------------


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A property's schema with ``allOf: [$ref]`` and ``anyOf: [X, null]`` unwrapped: (the schema, may be null)."""
    nullable = False
    variants = node.get("anyOf")
    if variants is not None:
        kept = [v for v in variants if v != {"type": "null"}]
        nullable = len(kept) < len(variants)
        if len(kept) == 1:
            node = {**{k: v for k, v in node.items() if k != "anyOf"}, **kept[0]}
    refs = node.get("allOf")
    if refs is not None and len(refs) == 1 and "$ref" in refs[0]:
        node = {**{k: v for k, v in node.items() if k != "allOf"}, "$ref": refs[0]["$ref"]}
    return node, nullable


def _target(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
    """The definition a ``$ref`` names, or None."""
    ref = node.get("$ref")
    return schema["definitions"][ref.rsplit("/", 1)[1]] if isinstance(ref, str) else None


def _type(schema: dict[str, Any], node: dict[str, Any]) -> str:
    """A property's type in words: ``integer``, ``list of string``, ``map of string``, ``object``."""
    if "$ref" in node:
        return "object"
    if "anyOf" in node:
        types = [_type(schema, v) for v in node["anyOf"] if v != {"type": "null"}]
        return "number" if set(types) == {"integer", "number"} else " or ".join(types)
    kind = node.get("type")
    if kind == "array":
        item, _ = _resolve(schema, node.get("items", {}))
        return f"list of {_type(schema, item)}"
    if kind == "object":
        values = node.get("additionalProperties")
        return f"map of {_type(schema, values)}" if isinstance(values, dict) else "object"
    if kind == "string" and node.get("format") == "date-time":
        return "date-time (ISO 8601)"
    return str(kind) if kind else "any"


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return f"`{text}`"


def _bounds(node: dict[str, Any], what: str = "") -> list[str]:
    """``1 to 1000``, ``> 0 and <= 100000000``; for a size, ``length: at least 1``, ``items: 1 to 4``."""
    low = [(">=", node.get("minimum")), (">", node.get("exclusiveMinimum"))]
    high = [("<=", node.get("maximum")), ("<", node.get("exclusiveMaximum"))]
    (lo_op, lo), (hi_op, hi) = (next(((o, v) for o, v in side if v is not None), (None, None)) for side in (low, high))
    if lo_op == ">=" and hi_op == "<=":
        shown = f"{lo} to {hi}"
    elif what:
        shown = " and ".join(f"{word} {v}" for word, op, v in (("at least", lo_op, lo), ("at most", hi_op, hi))
                             if op is not None)
    else:
        shown = " and ".join(f"{op} {v}" for op, v in ((lo_op, lo), (hi_op, hi)) if op is not None)
    return [f"{what}{shown}"] if shown else []


def _allowed(schema: dict[str, Any], node: dict[str, Any]) -> str:
    """Enums, bounds, patterns and sizes, in words."""
    parts: list[str] = []
    if "enum" in node:
        parts.append(", ".join(_code(v) for v in node["enum"]))
    if "const" in node:
        parts.append(_code(node["const"]))
    parts += _bounds(node)
    if "pattern" in node:
        parts.append(f"pattern {_code(node['pattern'])}")
    lengths = {"minimum": node.get("minLength"), "maximum": node.get("maxLength")}
    parts += _bounds({k: v for k, v in lengths.items() if v is not None}, "length: ")
    items = {"minimum": node.get("minItems"), "maximum": node.get("maxItems")}
    parts += _bounds({k: v for k, v in items.items() if v is not None}, "items: ")
    if "anyOf" in node:
        parts += [a for v in node["anyOf"] if (a := _allowed(schema, v))]
    if node.get("type") == "array":
        item, _ = _resolve(schema, node.get("items", {}))
        if "$ref" not in item and (each := _allowed(schema, item)):
            parts.append(f"each: {each}")
    return "; ".join(parts)


def _default(node: dict[str, Any], required: bool) -> str:
    if required:
        return "**required**"
    if "default" not in node or node["default"] is None:
        return "not set"
    return _code(node["default"])


def _cell(text: str) -> str:
    """Table-cell text: pipes escaped (GitHub splits cells on them, even in code), one line."""
    return " ".join(text.replace("|", "\\|").split())


def _prose(text: str) -> str:
    """A description as Markdown text: a cell, with ``<name>`` placeholders kept (not read as HTML tags)."""
    return _cell(text).replace("<", "&lt;")


def _sections(schema: dict[str, Any], definition: dict[str, Any], path: str) -> Iterator[str]:
    """The section of one object (its keys as a table), then the sections of the objects below it."""
    rows = ["| Key | Type | Default | Allowed values | Unit | Description |", "|---|---|---|---|---|---|"]
    below: list[tuple[dict[str, Any], str]] = []
    required = set(definition.get("required", []))
    for key, raw in definition.get("properties", {}).items():
        node, nullable = _resolve(schema, raw)
        key_path = f"{path}.{key}" if path else key
        kind = _type(schema, node) + (" or null" if nullable else "")
        unit = node.get("x-unit", "")
        rows.append("| " + " | ".join(_cell(c) for c in (
            f"`{key_path}`", kind, _default(node, key in required), _allowed(schema, node), unit)) + " | "
            + _prose(node.get("description", "")) + " |")
        if (target := _target(schema, node)) is not None:
            below.append((target, key_path))
        elif node.get("type") == "array":
            item, _ = _resolve(schema, node.get("items", {}))
            if (target := _target(schema, item)) is not None:
                below.append((target, f"{key_path}[]"))
    yield f"## `{path or SPEC_KEY}`\n\n{_prose(definition.get('description', ''))}\n\n" + "\n".join(rows) + "\n"
    for target, key_path in below:
        yield from _sections(schema, target, key_path)


def spec_reference(schema: dict[str, Any] | None = None) -> str:
    """docs/spec-reference.md: every key of ``gpu-cluster:spec`` by key path, with its type, default, allowed values,
    unit and description, one table per object."""
    schema = schema if schema is not None else stack_file_schema()
    config = schema["properties"]["config"]
    head = [
        "# Stack file reference",
        "",
        f"<!-- Generated from components/spec by `{REGENERATE_REFERENCE}`; do not edit. -->",
        "",
        "Every key of `gpu-cluster:spec` in a stack file (`stacks/Pulumi.<stack>.yaml`), by key path: `[]` is an "
        "item of a list (errors name it by its `name`, e.g. `aws.nodeGroups[h100]`, or by its index). The same "
        f"facts are in the JSON Schema `{SCHEMA_PATH}`, which editors use to complete and check stack files (the "
        "first line of each shipped stack names it). The cross-field rules (sizes in order, zones in the region, "
        "quotas that fit the node groups, ...) are checked by `blueprint preview`, not by the schema.",
        "",
        "## `config`",
        "",
        "| Key | Type | Description |",
        "|---|---|---|",
    ]
    for key, node in config["properties"].items():
        if key != SPEC_KEY:
            head.append(f"| `{key}` | {_type(schema, node)} | {_prose(node['description'])} |")
    head.append(f"| `{SPEC_KEY}` | object | The cluster: the sections below. |")
    head.append("")
    root = schema["definitions"][ROOT_MODEL]
    return "\n".join(head) + "\n" + "\n".join(_sections(schema, root, "")).rstrip("\n") + "\n"


# --- the command -----------------------------------------------------------------------------------------------------


def add_parser(subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    """Register ``schema`` on the ``blueprint`` command's sub-parsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "schema", parents=list(parents),
        help="write the JSON Schema of a stack file (draft-07, for editors), or with --format markdown the spec "
        "reference")
    parser.add_argument("--format", choices=("json", "markdown"), default="json",
                        help="json: the JSON Schema (default); markdown: the spec reference")
    parser.add_argument("-o", "--output", type=output_file_argument,
                        help="write it here instead of standard output")
    return parser


def run(args: argparse.Namespace) -> int:
    """``blueprint schema``: exit 0; an output path that cannot be written raises :class:`OutputError` (exit 2)."""
    output: Path | None = args.output
    if output is not None:
        check_output_file(output)
    schema = stack_file_schema()
    text = spec_reference(schema) if args.format == "markdown" else render_schema(schema)
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomic(output, text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m blueprint.schema``: :func:`run` with its own parser; exit 2 when the output cannot be written."""
    parser = argparse.ArgumentParser(prog="python -m blueprint.schema", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    add_parser(sub)
    args = parser.parse_args(["schema", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run(args)
    except OutputError as err:
        sys.stderr.write(f"error: {err}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
