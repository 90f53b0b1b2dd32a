"""How the catalogs' YAML files are parsed: by libyaml's C loader where PyYAML was built with it, once per file.

``aws_instances.yaml`` alone is a quarter of a megabyte: PyYAML's pure-Python loader took half a second of every
preview on it, its C loader (``yaml.CSafeLoader``, PyYAML documentation "Installation": "LibYAML based parser and
emitter") a tenth of that, with the same data (the tests compare both loaders on every catalog file). When PyYAML
has no C extension the pure-Python ``SafeLoader`` reads the same files.

A file is parsed once per process: :func:`load_file` keeps what it parsed, keyed by the file's path, size and
modification time (a test that points a catalog at an edited copy, or edits a file, gets the new content). The data
it returns is shared by every caller: read it, never change it.
"""

from __future__ import annotations

import os
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import yaml

# How many times each file was parsed in this process (the tests read it: one parse per file).
PARSES: Counter[str] = Counter()


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
    """One parse of ``path`` at that size and modification time (both only make the key)."""
    PARSES[str(path)] += 1
    return parse(path.read_text(encoding="utf-8"), unique_keys=unique_keys)
