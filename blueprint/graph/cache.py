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
  depend on them, and the readers apply them on every call. Each file's SHA-256 is remembered in the folder with its
  stat, so the day's second call stats these files rather than reading them (:func:`source_digests`);
- the Python version and the versions of the SDKs and libraries the program runs on (:data:`DISTRIBUTIONS`);
- the ``PULUMI_*`` and ``GPU_CLUSTER_*`` environment variables (:data:`KEY_ENV_PREFIXES`).

The folder must be this user's alone (:func:`usable`).

A changed byte in any of these is another key: a miss, and the program runs. The entries live in
``$BLUEPRINT_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/gpu-cluster-blueprint/graphs`` (``~/.cache/...``);
``BLUEPRINT_NO_CACHE=1`` (or a command's ``--no-cache``) turns the cache off. An entry is written whole or not at all
(a temporary file renamed over it); one that cannot be read, is not JSON, names another key or holds no valid graph
is recomputed and written again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from blueprint import clouds
from blueprint.graph.model import GraphFormatError, ResourceGraph, strict_json

CACHE_DIR_ENV = "BLUEPRINT_CACHE_DIR"
NO_CACHE_ENV = "BLUEPRINT_NO_CACHE"
FORMAT = 1
MEMO_FORMAT = 1
# The source files' digests by stat (source_digests), in the cache's folder.
MEMO_NAME = f"source-digests{MEMO_FORMAT}.json"
ROOT = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = (".py", ".yaml", ".json")
# Distributions whose version is part of the key (what the program and its spec models run on): the Pulumi SDK, each
# cloud's provider SDK (pulumi_<cloud>, for every folder under blueprint/clouds), the Kubernetes and random providers,
# the spec's models and the SDK's wire libraries.
DISTRIBUTIONS = ("pulumi", *(f"pulumi_{cloud}" for cloud in clouds.names()), "pulumi_kubernetes", "pulumi_random",
                 "pydantic", "PyYAML", "protobuf", "grpcio")
# Environment variables the program's output may depend on, whose values are part of the key: the SDKs read
# PULUMI_CONFIG / PULUMI_CONFIG_<KEY> for config the stack file lacks (pulumi.Config) and pulumi-kubernetes's Provider
# fills options from PULUMI_K8S_* (deleteUnreachable, enableConfigMapMutable, ...); GPU_CLUSTER_* are the project's.
KEY_ENV_PREFIXES = ("PULUMI_", "GPU_CLUSTER_")


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


def usable(folder: Path) -> bool:
    """Whether the cache may use ``folder``: made (mode 0700) when absent; an existing one only when this user owns it
    and no one else may write it. Anyone who can write the folder could plant an entry (a graph the readers would
    trust) or the CEL grammar file (which lark loads with pickle), so a shared or foreign folder is not used: the
    command then runs as with ``--no-cache``."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return False
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    return not hasattr(os, "getuid") or info.st_uid == os.getuid()


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


# A file's digest is reused from the memo only while its size, times, inode and device are those recorded, and only
# if it was recorded at least this long after the file's last change (a file changed twice within the filesystem's
# timestamp granularity would otherwise keep its first digest: git's "racily clean" entries).
MEMO_SETTLE_NS = 2_000_000_000


def _stat_tag(info: os.stat_result) -> list[int]:
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def _load_memo(memo: Path | None) -> dict[str, list[Any]]:
    if memo is None:
        return {}
    try:
        doc = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != MEMO_FORMAT or not isinstance(doc.get("files"), dict):
        return {}
    return {k: v for k, v in doc["files"].items()
            if isinstance(v, list) and len(v) == 2 and isinstance(v[0], list) and isinstance(v[1], str)}


def source_digests(root: Path = ROOT, memo: Path | None = None) -> list[tuple[str, str]]:
    """Each source file's path (relative to ``root``) and the SHA-256 of its bytes. With ``memo`` (a file in the
    cache's folder), a file whose size, modification and change times, inode and device are those recorded there is
    not read again: the same test Python's bytecode cache makes, with the inode and the change time added, so that
    the second call of the day stats the project's files instead of hashing them. The memo is rewritten when a digest
    was computed."""
    known = _load_memo(memo)
    fresh: dict[str, list[Any]] = {}
    out: list[tuple[str, str]] = []
    settled = time.time_ns() - MEMO_SETTLE_NS
    for path in source_files(root):
        rel = path.relative_to(root).as_posix()
        info = path.stat()
        tag = _stat_tag(info)
        entry = known.get(rel)
        known_here = entry is not None and entry[0] == tag
        digest = entry[1] if entry is not None and known_here else _file_digest(path)
        if known_here or (info.st_mtime_ns < settled and info.st_ctime_ns < settled):
            fresh[rel] = [tag, digest]
        out.append((rel, digest))
    if memo is not None and fresh != known:
        write_entry(memo, [json.dumps({"format": MEMO_FORMAT, "files": fresh}, sort_keys=True)])
    return out


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def graph_key(stack: str, stack_text: bytes, now: datetime, root: Path = ROOT, memo: Path | None = None) -> str:
    """The key of a stack's graph: a SHA-256 of the stack's name and file, the clock's day, the project's source and
    the versions it runs on. ``memo``: see :func:`source_digests`."""
    digest = hashlib.sha256()

    def part(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    part("format", str(FORMAT).encode())
    part("stack", stack.encode())
    part("stack-file", stack_text)
    part("day", now.date().isoformat().encode())
    for name in sorted(n for n in os.environ if n.startswith(KEY_ENV_PREFIXES) and n != "GPU_CLUSTER_NOW"):
        part("env", f"{name}={os.environ[name]}".encode())  # GPU_CLUSTER_NOW is in the key as its day
    for version in _versions():
        part("version", version.encode())
    for rel, file_digest in source_digests(root, memo):
        part("source", rel.encode())
        part("content-sha256", file_digest.encode())
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


def write_entry(path: Path, pieces: Iterable[str]) -> None:
    """Write a cache entry whole: its pieces into a temporary file beside it, renamed over it. Unlike
    :func:`blueprint.files.output.write_atomic` it follows no symbolic link in the entry's place and writes through no
    device; a cache that cannot be written is no error. The derived entries (:mod:`blueprint.files.derived`) use it
    too."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".entry-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for piece in pieces:
                    fh.write(piece)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return


def _write(path: Path, key: str, now: datetime, boundaries: list[datetime], graph: ResourceGraph) -> None:
    """Write the entry whole (:func:`write_entry`)."""
    head = json.dumps({"format": FORMAT, "key": key, "clock": now.isoformat(),
                       "boundaries": [b.isoformat() for b in boundaries]})
    write_entry(path, itertools.chain([head[:-1] + ', "graph": '], graph.iter_json(), ["}\n"]))


def cached_graph(stack: str, stack_text: bytes, now: datetime,
                 compute: Callable[[], tuple[ResourceGraph, list[datetime]]]) -> Lookup:
    """The stack's graph from the cache, or ``compute()`` (the graph and the instants where its Capacity Blocks change
    phase) stored under its key."""
    folder = cache_dir()
    if not usable(folder):
        graph, _ = compute()
        return Lookup(graph, False, None)
    key = graph_key(stack, stack_text, now, memo=folder / MEMO_NAME)
    path = folder / f"{key}.json"
    hit = _read(path, key, now)
    if hit is not None:
        return Lookup(hit, True, path)
    graph, boundaries = compute()
    _write(path, key, now, boundaries, graph)
    # The graph as a hit will read it (resources by URN, keys sorted: ResourceGraph.to_dict), so that the first call
    # of the day and the next ones print the same findings in the same order.
    return Lookup(_read(path, key, now) or ResourceGraph.from_document(graph.to_dict()), False, path)


def block_boundaries(spec: Any) -> list[datetime]:
    """The instants where the spec's graph changes with the clock alone (a Capacity Block's start, the EC2 shutdown
    lead before its end, its end): the cloud's ``phase_boundaries``."""
    from blueprint.graph.cloud import cloud_graph

    return cloud_graph(spec.cloud).phase_boundaries(spec)
