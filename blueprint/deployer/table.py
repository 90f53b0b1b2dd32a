"""The tables of permissions: each cloud's ``deployer_permissions.yaml`` and the neutral ``no_cloud_permissions.yaml``,
read strictly (an unknown key, an operation that is not a list of names, an entry with both permissions and a ``none``
reason is an error naming the file and the key), and the lookup of a graph's types in them (a type in neither table is
an error naming the type and the file it belongs in: never dropped)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from blueprint import clouds
from blueprint.changes.cloud import inputs_at
from blueprint.graph.model import GraphResource, ResourceGraph

OPERATIONS = ("create", "read", "update", "delete", "tag")
COMMON_KEYS = frozenset({*OPERATIONS, "none", "note", "tf", "when", "only_when"})
NO_CLOUD_TABLE = Path(__file__).with_name("no_cloud_permissions.yaml")


class DeployerTableError(ValueError):
    """A table that cannot be read, or a graph with a type no table has (exit 2, with the message)."""


@dataclass(frozen=True)
class TypeEntry:
    """What one resource type (or invoke) needs: its permissions per operation, or why it needs none."""

    token: str
    operations: Mapping[str, tuple[str, ...]]
    none: str = ""  # why no cloud permission is needed ("" when operations say what is)
    note: str = ""
    only_when: str = ""  # the spec option that makes the program create it, when no shipped stack does
    when: tuple[tuple[str, Any, tuple[str, ...]], ...] = ()  # (input path, value, permissions needed then)
    extra: Mapping[str, Any] = field(default_factory=dict)  # the cloud's own keys (pass_role, act_as, ...)

    def permissions(self, resources: Iterable[GraphResource] = ()) -> set[str]:
        """Every permission of its operations, and those its ``when`` rules add for these resources' inputs."""
        out = {p for names in self.operations.values() for p in names}
        for res in resources:
            out |= {p for path, value, names in self.when if inputs_at(res.inputs, path) == value for p in names}
        return out


@dataclass(frozen=True)
class Table:
    """One table file: its entries for resource types and for invokes."""

    path: Path
    checked: str
    reference: str
    services: Mapping[str, str]
    types: Mapping[str, TypeEntry]
    invokes: Mapping[str, TypeEntry]

    @property
    def shown(self) -> str:
        """The file as the repository names it."""
        parts = self.path.parts
        return "/".join(parts[parts.index("blueprint"):]) if "blueprint" in parts else str(self.path)


@dataclass(frozen=True)
class Used:
    """A type (or invoke) of the graph with its entry, and the graph's resources of that type (none for an invoke)."""

    token: str
    entry: TypeEntry
    resources: tuple[GraphResource, ...]
    invoke: bool = False


def needing(used: Sequence[Used]) -> tuple[list[Used], dict[str, str]]:
    """The uses whose entries name cloud permissions, and each type that needs none with why (for both clouds)."""
    return [u for u in used if not u.entry.none], {u.token: u.entry.none for u in used if u.entry.none}


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise DeployerTableError(f"{where}: a list of permission names, got {value!r}")
    return tuple(value)


def _entry(token: str, raw: Any, where: str, extra_keys: frozenset[str]) -> TypeEntry:
    if not isinstance(raw, dict):
        raise DeployerTableError(f"{where}: a mapping of operations to permissions, or none: <reason>")
    unknown = sorted(set(raw) - COMMON_KEYS - extra_keys)
    if unknown:
        raise DeployerTableError(f"{where}: unknown key {unknown[0]!r} (allowed: "
                                 f"{', '.join(sorted(COMMON_KEYS | extra_keys))})")
    operations = {op: _names(raw[op], f"{where}.{op}") for op in OPERATIONS if op in raw}
    none = raw.get("none") or ""
    if not isinstance(none, str):
        raise DeployerTableError(f"{where}.none: the reason, as text")
    when: list[tuple[str, Any, tuple[str, ...]]] = []
    for rule, names in (raw.get("when") or {}).items():
        path, sep, value = str(rule).partition("=")
        try:
            parsed = json.loads(value) if sep else None
        except json.JSONDecodeError:
            parsed = None
        if not sep or parsed is None:
            raise DeployerTableError(f"{where}.when: {rule!r} is not <input path>=<JSON value>")
        when.append((path, parsed, _names(names, f"{where}.when.{rule}")))
    if none and (operations or when):
        raise DeployerTableError(f"{where}: both permissions and none ({none[:40]}...): say one")
    if not none and not operations and not when:
        raise DeployerTableError(f"{where}: no permissions and no none: <reason>")
    return TypeEntry(token=token, operations=operations, none=none, note=str(raw.get("note") or ""),
                     only_when=str(raw.get("only_when") or ""),
                     when=tuple(when), extra={k: raw[k] for k in extra_keys if k in raw})


def load_table(path: Path, extra_keys: Iterable[str] = ()) -> Table:
    """A cloud's ``deployer_permissions.yaml``; ``extra_keys`` are the keys its cloud module reads."""
    extra = frozenset(extra_keys)
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise DeployerTableError(f"{path}: cannot be read as YAML: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("types"), dict):
        raise DeployerTableError(f"{path}: a mapping with meta, services, types and invokes")
    meta = data.get("meta") or {}
    sections = {}
    for section in ("types", "invokes"):
        sections[section] = {str(token): _entry(str(token), raw, f"{path}: {section}.{token}", extra)
                             for token, raw in (data.get(section) or {}).items()}
    return Table(path=path, checked=str(meta.get("checked") or ""), reference=str(meta.get("reference") or ""),
                 services={str(k): str(v) for k, v in (data.get("services") or {}).items()},
                 types=sections["types"], invokes=sections["invokes"])


@cache
def no_cloud_table() -> Table:
    """The types no cloud's IAM authorises (Kubernetes objects, random values, the stack), each with its reason."""
    try:
        data: Any = yaml.safe_load(NO_CLOUD_TABLE.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise DeployerTableError(f"{NO_CLOUD_TABLE}: cannot be read as YAML: {err}") from None
    reasons = data.get("reasons") or {}
    types = {}
    for token, key in (data.get("types") or {}).items():
        if key not in reasons:
            raise DeployerTableError(f"{NO_CLOUD_TABLE}: types.{token}: no reason {key!r} under reasons")
        types[str(token)] = TypeEntry(token=str(token), operations={}, none=str(reasons[key]))
    return Table(path=NO_CLOUD_TABLE, checked=str((data.get("meta") or {}).get("checked") or ""), reference="",
                 services={}, types=types, invokes={})


def used_entries(graph: ResourceGraph, invokes: Iterable[str], table: Table) -> list[Used]:
    """Each resource type of the graph (components aside: they make no provider call) and each invoke the run made,
    with its entry from the cloud's ``table`` or the neutral one; a type or invoke in neither is an error that names
    every one missing and the file it belongs in."""
    neutral = no_cloud_table()
    by_type: dict[str, list[GraphResource]] = {}
    for res in graph.resources:
        if not res.is_component:
            by_type.setdefault(res.type, []).append(res)
    used: list[Used] = []
    missing: list[str] = []
    for token in sorted(by_type):
        entry = table.types.get(token) or neutral.types.get(token)
        if entry is None:
            home = table.shown if clouds.of_type(token) else no_cloud_table().shown
            missing.append(f"resource type {token} is in the graph of stack {graph.stack} but not in {home}")
        else:
            used.append(Used(token, entry, tuple(by_type[token])))
    for token in sorted(set(invokes)):
        entry = table.invokes.get(token)
        if entry is None:
            missing.append(f"invoke {token} is made by stack {graph.stack} but not in {table.shown} (invokes)")
        else:
            used.append(Used(token, entry, (), invoke=True))
    if missing:
        raise DeployerTableError("\n".join(missing) + "\nadd each with the permissions its provider calls need and "
                                 "their source, or none: <reason> (docs/aws.md, docs/gcp.md: the deployer)")
    return used
