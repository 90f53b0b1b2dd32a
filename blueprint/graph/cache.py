"""The graph cache: a stack's graph kept on disk, so that a reader given a stack name (``blueprint admit prod-aws
job.yaml``, ``cost``, ``report``, ``policy``) runs the Pulumi program once a day, not on every call.

An entry is found only under its key, a SHA-256 of everything the graph depends on:

- the stack's name and its file's bytes;
- the day of the program's clock (``GPU_CLUSTER_NOW`` when set, else today in UTC; :mod:`components.clock`): the
  spec's rules compare support dates with it. The program also compares each Capacity Block's window with the
  clock to the minute; the entry keeps the instants where a block changes phase (its start, 30 minutes before its
  end, its end) and is not served across one of them;
- the project's source: every ``.py``, ``.yaml`` and ``.json`` under ``components/`` (the program and its catalogs,
  with the price overlay of ``blueprint prices refresh``) and under ``blueprint/`` (the offline engine and its cloud
  parts) but ``blueprint/schemas/`` (CRDs the readers check against on every call, which the program does not read),
  with ``__main__.py`` and ``Pulumi.yaml``; the policy pack and the usage file are not in it: the graph does not
  depend on them, and the readers apply them on every call;
- the Python version and the versions of the SDKs and libraries the program runs on (pulumi, pulumi-aws, pulumi-gcp,
  pulumi-kubernetes, pydantic, PyYAML).

A changed byte in any of these is another key: a miss, and the program runs. The entries live in
``$BLUEPRINT_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/gpu-cluster-blueprint/graphs`` (``~/.cache/...``);
``BLUEPRINT_NO_CACHE=1`` (or a command's ``--no-cache``) turns the cache off. An entry is written whole or not at all
(a temporary file renamed over it); one that cannot be read, is not JSON, names another key or holds no valid graph
is recomputed and written again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from blueprint.graph.model import GraphFormatError, ResourceGraph, strict_json

CACHE_DIR_ENV = "BLUEPRINT_CACHE_DIR"
NO_CACHE_ENV = "BLUEPRINT_NO_CACHE"
FORMAT = 1
ROOT = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = (".py", ".yaml", ".json")
# Distributions whose version is part of the key (what the program and its spec models run on).
DISTRIBUTIONS = ("pulumi", "pulumi_aws", "pulumi_gcp", "pulumi_kubernetes", "pydantic", "PyYAML")


def enabled() -> bool:
    """Whether the cache is on (``BLUEPRINT_NO_CACHE`` unset, empty or ``0``)."""
    return os.environ.get(NO_CACHE_ENV, "") in ("", "0")


def cache_dir() -> Path:
    """Where the entries are: ``$BLUEPRINT_CACHE_DIR``, else the XDG cache folder's ``gpu-cluster-blueprint/graphs``."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-cluster-blueprint" / "graphs"


def source_files(root: Path = ROOT) -> list[Path]:
    """The project's files the graph depends on (see the module's docstring), sorted."""
    out = [root / "__main__.py", root / "Pulumi.yaml"]
    skipped = {root / "blueprint" / "schemas"}
    for top in ("components", "blueprint"):
        for folder, dirs, files in os.walk(root / top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and Path(folder, d) not in skipped)
            out += [Path(folder, f) for f in files if f.endswith(SOURCE_SUFFIXES)]
    return sorted(p for p in out if p.is_file())


def _versions() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    out = [sys.version]
    for name in DISTRIBUTIONS:
        try:
            out.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            out.append(f"{name}=none")
    return out


def graph_key(stack: str, stack_text: bytes, now: datetime, root: Path = ROOT) -> str:
    """The key of a stack's graph: a SHA-256 of the stack's name and file, the clock's day, the project's source and
    the versions it runs on."""
    digest = hashlib.sha256()

    def part(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    part("format", str(FORMAT).encode())
    part("stack", stack.encode())
    part("stack-file", stack_text)
    part("day", now.date().isoformat().encode())
    for version in _versions():
        part("version", version.encode())
    for path in source_files(root):
        part("source", path.relative_to(root).as_posix().encode())
        part("content", path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Lookup:
    """What :func:`cached_graph` did: ``hit`` (served from the cache) or not, and the entry's path."""

    graph: ResourceGraph
    hit: bool
    path: Path | None


def _same_side(then: datetime, now: datetime, boundaries: list[datetime]) -> bool:
    """Whether every boundary compares the same with both instants (no block changed phase in between)."""
    return all((then < b) == (now < b) for b in boundaries)


def _read(path: Path, key: str, now: datetime) -> ResourceGraph | None:
    """The entry's graph, or None when it is absent, unreadable, for another key or for another block phase."""
    try:
        doc = strict_json(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
            return None
        then = datetime.fromisoformat(doc["clock"])
        boundaries = [datetime.fromisoformat(b) for b in doc["boundaries"]]
        if not _same_side(then, now, boundaries):
            return None
        return ResourceGraph.from_document(doc["graph"])
    except (OSError, ValueError, KeyError, TypeError, GraphFormatError):
        return None


def _write(path: Path, key: str, now: datetime, boundaries: list[datetime], graph: ResourceGraph) -> None:
    """Write the entry whole (a temporary file renamed over it); a cache that cannot be written is no error."""
    head = json.dumps({"format": FORMAT, "key": key, "clock": now.isoformat(),
                       "boundaries": [b.isoformat() for b in boundaries]})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".entry-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(head[:-1] + ', "graph": ')
                for chunk in graph.iter_json():
                    fh.write(chunk)
                fh.write("}\n")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return


def cached_graph(stack: str, stack_text: bytes, now: datetime,
                 compute: Callable[[], tuple[ResourceGraph, list[datetime]]]) -> Lookup:
    """The stack's graph from the cache, or ``compute()`` (the graph and the instants where its Capacity Blocks change
    phase) stored under its key."""
    key = graph_key(stack, stack_text, now)
    path = cache_dir() / f"{key}.json"
    graph = _read(path, key, now)
    if graph is not None:
        return Lookup(graph, True, path)
    graph, boundaries = compute()
    _write(path, key, now, boundaries, graph)
    return Lookup(graph, False, path)


def block_boundaries(spec: object) -> list[datetime]:
    """The instants where a Capacity Block of the spec changes phase (start, the EC2 shutdown lead before its end,
    its end: :class:`components.aws.capacity_block.BlockWindow`)."""
    from components.aws.capacity_block import EC2_SHUTDOWN_LEAD

    out: list[datetime] = []
    if getattr(spec, "cloud", None) != "aws":
        return out
    for group in spec.aws_spec().node_groups:  # type: ignore[attr-defined]
        cap = group.capacity
        if cap.type == "capacity-block" and cap.start and cap.end:
            out += [cap.start, cap.end - EC2_SHUTDOWN_LEAD, cap.end]
    return sorted(out)
