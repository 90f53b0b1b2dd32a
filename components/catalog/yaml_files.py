"""How the catalogs' YAML files are parsed: by libyaml's C loader where PyYAML was built with it, once per file.

``aws_instances.yaml`` alone is a quarter of a megabyte: PyYAML's pure-Python loader took half a second of every
preview on it, its C loader (``yaml.CSafeLoader``, PyYAML documentation "Installation": "LibYAML based parser and
emitter") a tenth of that, with the same data (the tests compare both loaders on every catalog file). When PyYAML
has no C extension the pure-Python ``SafeLoader`` reads the same files.

Faster still, each large shipped catalog (:data:`PARSED_MIN_BYTES`) has its data beside it as JSON
(``<name>.parsed.json``, written by ``make catalogs``: :func:`write_parsed`), which Python's C JSON decoder reads in a
fortieth of libyaml's time (``aws_instances.yaml``: 2.6 ms against 105 ms). The JSON names the SHA-256 of the YAML it
was made from, and :func:`load_file` uses it only when that is the YAML's hash now: an edited catalog is parsed from
its YAML until ``make catalogs`` runs again, never read stale (tests/program/test_catalog_yaml.py checks that every
shipped JSON is current and equals its YAML's data, so the test suite fails on a forgotten ``make catalogs``).

A file is loaded once per process: :func:`load_file` keeps what it loaded, keyed by the file's path, size and
modification time (a test that points a catalog at an edited copy, or edits a file, gets the new content). The data
it returns is shared by every caller: read it, never change it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import yaml

# How many times each file was loaded (from its YAML or its current JSON) in this process (the tests read it: one load
# per file), and how many of those parsed the YAML.
PARSES: Counter[str] = Counter()
YAML_PARSES: Counter[str] = Counter()
PARSED_SUFFIX = ".parsed.json"
PARSED_FORMAT = 1


def safe_loader() -> type[Any]:
    """libyaml's ``CSafeLoader`` when PyYAML has its C extension, else the pure-Python ``SafeLoader``."""
    loader: type[Any] = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    return loader


def _mapping(loader: Any, node: yaml.MappingNode) -> dict[Any, Any]:
    """A mapping whose keys are all different: a key given twice is refused (the second would silently win)."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    mapping: dict[Any, Any] = loader.construct_mapping(node)
    return mapping


@cache
def _unique_key_loader(base: type[Any]) -> type[Any]:
    """``base`` (the C or the Python safe loader) refusing duplicate keys; made once per base."""
    loader: Any = type(f"UniqueKey{base.__name__}", (base,), {"__doc__": "A safe loader refusing a key given twice."})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    made: type[Any] = loader
    return made


def unique_key_loader() -> type[Any]:
    """The safe loader of :func:`safe_loader` that refuses a key given twice (``duplicate key 'x'``)."""
    base: Any = safe_loader()
    return _unique_key_loader(base)


def parse(text: str, *, unique_keys: bool = False) -> Any:
    """YAML text as data, with the fast safe loader (refusing duplicate keys when asked); ``yaml.YAMLError`` on bad
    YAML."""
    return yaml.load(text, Loader=unique_key_loader() if unique_keys else safe_loader())


def load_file(path: Path, *, unique_keys: bool = False) -> Any:
    """A catalog file's data, parsed once per process and content (shared: do not change it); ``yaml.YAMLError`` on
    bad YAML, ``OSError`` when it cannot be read."""
    stat = os.stat(path)
    return _load(Path(path).resolve(), stat.st_size, stat.st_mtime_ns, unique_keys)


@cache
def _load(path: Path, size: int, mtime_ns: int, unique_keys: bool) -> Any:
    """One load of ``path`` at that size and modification time (both only make the key): its current JSON, else a
    parse of its YAML."""
    PARSES[str(path)] += 1
    raw = path.read_bytes()
    current = _current_parsed(path, raw)
    if current is not None:
        return current[0]
    YAML_PARSES[str(path)] += 1
    return parse(raw.decode("utf-8"), unique_keys=unique_keys)


def parsed_path(path: Path) -> Path:
    """Where a catalog's JSON is: ``aws_instances.yaml`` -> ``aws_instances.parsed.json`` beside it."""
    return path.with_name(path.stem + PARSED_SUFFIX)


def _current_parsed(path: Path, raw: bytes) -> tuple[Any] | None:
    """(the data) from the file's JSON when it was made from exactly these bytes; None when there is none, it cannot be
    read, or it was made from other bytes."""
    try:
        doc = json.loads(parsed_path(path).read_bytes())
    except (OSError, ValueError):
        return None
    if (not isinstance(doc, dict) or doc.get("format") != PARSED_FORMAT or "data" not in doc
            or doc.get("sha256") != hashlib.sha256(raw).hexdigest()):
        return None
    return (doc["data"],)


def _json_safe(value: Any, where: str) -> None:
    """Refuse what JSON would change: a non-string key (JSON makes it a string), a date, a set."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not a string; JSON would make it one")
            _json_safe(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _json_safe(item, f"{where}[{i}]")
    elif not (value is None or isinstance(value, str | int | float | bool)):
        raise ValueError(f"{where}: a {type(value).__name__} has no JSON form; quote it in the YAML")


def parsed_document(path: Path) -> str:
    """The JSON of a catalog file: its YAML's SHA-256 and its data (parsed refusing duplicate keys)."""
    raw = path.read_bytes()
    data = parse(raw.decode("utf-8"), unique_keys=True)
    _json_safe(data, path.name)
    return json.dumps({"format": PARSED_FORMAT, "source": path.name, "sha256": hashlib.sha256(raw).hexdigest(),
                       "note": "Generated by `make catalogs` from the YAML named in source; edit the YAML, not this.",
                       "data": data}, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"


CATALOG_DIR = Path(__file__).resolve().parent


# Only a catalog this large gets a JSON: below it libyaml takes about a millisecond, not worth a second copy.
PARSED_MIN_BYTES = 16 * 1024


def shipped_yaml(folder: Path = CATALOG_DIR) -> list[Path]:
    """The catalog YAML files that get a JSON: shipped (not a price refresh's local overlay, ``*_refreshed.yaml``)
    and at least :data:`PARSED_MIN_BYTES`."""
    return [p for p in sorted(folder.glob("*.yaml"))
            if not p.name.endswith("_refreshed.yaml") and p.stat().st_size >= PARSED_MIN_BYTES]


def write_parsed(folder: Path = CATALOG_DIR) -> tuple[list[Path], list[str]]:
    """Write (or rewrite) the JSON of every shipped catalog YAML in ``folder``: (the files written, the YAML files
    that have no JSON form and why; those are parsed from YAML, and a stale JSON of theirs is removed)."""
    written, skipped = [], []
    for path in shipped_yaml(folder):
        target = parsed_path(path)
        try:
            text = parsed_document(path)
        except ValueError as err:
            skipped.append(f"{path.name}: {err}")
            target.unlink(missing_ok=True)
            continue
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written, skipped


def main() -> None:
    """``make catalogs``: write the catalogs' JSON and say what changed; exit 1 on a catalog that is not valid YAML."""
    try:
        written, skipped = write_parsed()
    except yaml.YAMLError as err:
        raise SystemExit(f"a catalog is not valid YAML (nothing more was written): {err}") from None
    for path in written:
        print(f"wrote {path.relative_to(CATALOG_DIR.parents[1])}")
    for reason in skipped:
        print(f"kept as YAML only: {reason}")
    if not written:
        print("every catalog's JSON is current")
