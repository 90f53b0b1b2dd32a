"""Data derived from shipped files, kept on disk per machine so that a command does not derive it on every call.

``blueprint admit`` checks a JobSet, an MPIJob or a TrainJob against the strict schema of the CRD the cluster
installs: the CRD's YAML (0.5 to 1.4 MB each) parsed and made strict took more CPU than the admission itself
(issue 37). :func:`cached_json` keeps the derived JSON in the graph cache's folder (:mod:`blueprint.graph.cache`: this
user's alone, or not used), under a SHA-256 of what it was derived from (a label naming the derivation and its format,
and each source file's name and bytes), so a changed CRD is another key and never read stale. An entry is written
whole (:func:`blueprint.graph.cache.write_entry`) and names its label and key; one that cannot be read, is not JSON or
names another is derived again. Nothing is read or written when the cache is off (``BLUEPRINT_NO_CACHE``, as in the test
suite; a command's ``--no-cache`` is about the graph only), and the data is then derived in process.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from blueprint.graph import cache


def derived_key(label: str, sources: Sequence[Path]) -> str:
    """The SHA-256 of the derivation's label and its sources' names and bytes."""
    digest = hashlib.sha256()
    for part in (label.encode(), *(b for p in sources for b in (p.name.encode(), p.read_bytes()))):
        digest.update(f"{len(part)}\0".encode())
        digest.update(part)
    return digest.hexdigest()


def cached_json(label: str, sources: Sequence[Path], derive: Callable[[], Any]) -> Any:
    """``derive()`` (JSON data), from this machine's cache when it was derived from the same sources before.

    ``sources`` are every file the result depends on, the deriving code's own module included (a changed derivation
    is then another key). Without sources nothing is cached: there is nothing to key the entry by."""
    if not cache.enabled() or not sources:
        return derive()
    folder = cache.cache_dir()
    if not cache.usable(folder):
        return derive()
    key = derived_key(label, sources)
    path = folder / f"derived-{label}-{key}.json"
    try:
        if not path.is_symlink():
            doc = json.loads(path.read_bytes())
            if isinstance(doc, dict) and doc.get("label") == label and doc.get("key") == key and "data" in doc:
                return doc["data"]
    except (OSError, ValueError):
        pass  # absent, unreadable or not JSON: derived again, and written over
    data = derive()
    try:
        text = json.dumps({"label": label, "key": key, "data": data}, separators=(",", ":"))
    except (TypeError, ValueError):
        return data  # not JSON: kept in process only
    cache.write_entry(path, [text])
    return data
